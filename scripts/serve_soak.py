"""A soak of fairseq-rope-serve: many times its queue through every endpoint, every limit crossed, clients
that hang up, a graceful shutdown under load; then nothing lost and nothing leaked.

    python -m scripts.serve_soak --model work/sample/checkpoints/rope_transformer work/sample/data-bin \
        --backend fairseq --rounds 80 --clients 16 --queue-size 48

It starts the server (a new process, its own TMPDIR; small --char-limit, --batch-limit, --file-limit,
--file-char-limit and --nesting-limit derived from --queue-size and the sentences, so that each can be
crossed; an --api-keys file of a free key and one allowed --rate requests a minute), then:

- warm-up: translates each sentence alone (POST /translate), records the answer, and runs every kind of
  request below once, one after the other (the rate-limited key until its 429);
- the baseline: the server's open descriptors (/proc/PID/fd), threads (/proc/PID/task), files in its
  temporary folder, VmRSS;
- --rounds rounds of --clients concurrent clients, each doing one request of a seeded random mix: /translate
  of 1-4 sentences (q as a list), a burst of two texts of --queue-size sentences each (the queue full: 503),
  /translate_file of a small .srt and .html and of a .srt of more sentences than the queue holds (in
  parts), then the download (and a second GET: 404); requests past each limit; the rate-limited key; and
  clients that hang up (after part of a body, or right after sending a whole request);
- checks: every 200 of /translate is, sentence for sentence, the warm-up's answer (batching does not change
  a translation), every downloaded file is the file of those answers; every other answer is a JSON error
  ``{"error": ...}`` with the status docs/serving.md gives its limit (Retry-After on 503 and 429); once the
  queue drained: /health's queue counters 0, descriptors exactly at the baseline (after up to 15 s for the
  server to close the connections of clients that hung up), threads at most the asyncio executor's
  min(32, cores + 4) more than the baseline (asyncio.to_thread starts them on demand and keeps them: not a
  leak), no file in the temporary folder once the downloads are taken (none at the baseline either), VmRSS growth since the baseline
  within --rss-bound-mib; the rate-limited key answered again once its Retry-After passed (where that is
  within --rate-wait seconds);
- a graceful shutdown under load: SIGTERM once --clients requests are in flight: each is answered (its
  translation or a JSON error), the process exits with status -SIGTERM, its temporary folder empty.

It prints a summary (requests by kind and status, latencies p50/p95, the resources before and after, the
problems found) and returns it as a dict from ``soak(...)`` (JSON with --json). Exit status 1 when a check
failed.
"""

import argparse
import concurrent.futures
import http.client
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

# sentences of simple English words (the vocabulary of tests/test_serve.py's tiny model, and any English model's)
SENTENCES = [f"{a} {b} {c} the {d} {e} ." for a, b, c, d, e in zip(
    ["The", "A", "It", "He", "She", "The", "A", "He", "She", "It", "The", "A"],
    ["dog", "cat", "man", "woman", "dog", "house", "man", "cat", "dog", "woman", "cat", "dog"],
    ["sees", "runs", "eats", "has", "sees", "has", "runs", "eats", "sees", "has", "runs", "eats"],
    ["red", "big", "small", "old", "big", "red", "old", "small", "red", "big", "old", "red"],
    ["house", "dog", "cat", "man", "woman", "cat", "house", "dog", "man", "cat", "woman", "house"])]
MIX = {  # kind: weight in a round's random choice
    "translate": 30, "burst": 5, "srt": 6, "html": 6, "srt_in_parts": 2, "rate": 4,
    "char_limit": 2, "batch_limit": 2, "body_limit": 1, "queue_limit": 2, "json_depth": 2, "nesting_text": 2,
    "nesting_file": 2, "file_limit": 2, "file_char_limit": 2, "no_key": 1, "wrong_key": 1,
    "hang_up_mid_body": 3, "hang_up_after_request": 3, "hang_up_mid_file": 2}
NESTING = 4  # --nesting-limit


class Text(str):
    """A text of ``sentences`` joined by spaces."""

    def __new__(cls, sentences):
        text = super().__new__(cls, " ".join(sentences))
        text.sentences = sentences
        return text


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))] if values else None


class Soak:
    """One server under soak: its process, its limits, the warm-up's answers and every request's record."""

    def __init__(self, model, backend, queue_size, sentences, rate, timeout, work):
        self.sentences, self.queue_size, self.rate = sentences, queue_size, rate
        longest = max(map(len, sentences))
        self.char_limit = (longest + 1) * (queue_size + 1)  # room for a text of the queue's sentences and one more
        self.batch_limit = 4
        self.file_char_limit = (longest + 1) * (queue_size + 2)  # a .srt of more sentences than the queue holds
        self.file_limit = (longest + 40) * (queue_size + 2) + self.file_char_limit + 4096
        self.body_limit = max(1 << 20, 12 * self.char_limit + (64 << 10))  # fairseq_rope_server.app.Limits's
        self.tmp = os.path.join(work, "tmp")
        os.mkdir(self.tmp)
        keys = os.path.join(work, "keys.txt")
        with open(keys, "w") as f:
            f.write(f"free\nlimited {rate}\n")
        self.port = free_port()
        self.log_path = os.path.join(work, "server.log")
        flags = ["--port", str(self.port), "--device", "cpu", "--threads", "1", "--backend", backend,
                 "--queue-size", str(queue_size), "--char-limit", str(self.char_limit),
                 "--batch-limit", str(self.batch_limit), "--file-limit", str(self.file_limit),
                 "--file-char-limit", str(self.file_char_limit), "--nesting-limit", str(NESTING),
                 "--api-keys", keys, "--timeout", str(timeout), "--max-tokens", "64"]
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [os.path.join(os.path.dirname(sys.executable), "fairseq-rope-serve"), "--model", *map(str, model),
                 *flags], stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, "TMPDIR": self.tmp})
        self.records = []  # {"kind", "status", "seconds", "problem"}
        self.lock = threading.Lock()
        self.warm = {}
        self.last_429 = None  # (time, Retry-After) of the rate-limited key's last 429
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server ended ({self.process.returncode}):\n{self.log()}")
            try:
                status, _, health = self.call("GET", "/health", timeout=5)
                if status == 200:
                    self.source, self.target = health["models"][0].split("-")
                    self.pair = health["models"][0]
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the server did not become ready in 300 s:\n{self.log()}")

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-3000:]

    # ---- the client --------------------------------------------------------------------------
    def call(self, method, path, body=None, headers=None, timeout=120):
        """(status, headers with lower-case names, answer: JSON where it is, else bytes)"""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            raw = response.read()
            got = {k.lower(): v for k, v in response.getheaders()}
        finally:
            connection.close()
        if got.get("content-type", "").startswith("application/json"):
            return response.status, got, json.loads(raw)
        return response.status, got, raw

    def fields(self, **extra):
        return {"source": self.source, "target": self.target, "api_key": "free", **extra}

    def post(self, fields):
        return self.call("POST", "/translate", json.dumps(fields).encode(), {"Content-Type": "application/json"})

    def multipart(self, name, data, key="free"):
        """(body, headers) of POST /translate_file with ``data`` as the file ``name``"""
        boundary = "fairseq-rope-soak"
        body = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
                        for k, v in (("source", self.source), ("target", self.target), ("api_key", key)))
        body += (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n\r\n'.encode()
                 + data + f"\r\n--{boundary}--\r\n".encode())
        return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}

    def post_file(self, name, data):
        return self.call("POST", "/translate_file", *self.multipart(name, data))

    def hang_up(self, path, body, headers, part):
        """Sends the request's head and ``part`` of its body (0 to 1), then closes the connection."""
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n" + \
            "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            s.sendall(head.encode() + body[:int(len(body) * part)])

    # ---- what an answer must be ----------------------------------------------------------------
    @staticmethod
    def error(status, headers, answer, expected, says, retry=False):
        """None where the answer is the JSON error ``expected`` (status) whose message holds ``says``."""
        if status != expected:
            return f"status {status}, expected {expected}: {str(answer)[:200]}"
        if not (isinstance(answer, dict) and list(answer) == ["error"] and isinstance(answer["error"], str)):
            return f"not a JSON error: {str(answer)[:200]}"
        if says not in answer["error"]:
            return f"the error does not say {says!r}: {answer['error'][:200]}"
        if retry and not headers.get("retry-after", "").isdigit():
            return f"a {status} without Retry-After"
        return None

    def busy(self, status, headers, answer):
        """None for a 503 of a full queue or of the timeout, with Retry-After."""
        if status == 503 and isinstance(answer, dict) and "took longer than the limit" in answer.get("error", ""):
            return self.error(status, headers, answer, 503, "took longer", retry=True)
        return self.error(status, headers, answer, 503, "the server is busy", retry=True)

    def translated(self, status, headers, answer, q):
        """None for the warm-up's translations of ``q`` (a list of sentences: each; a text of sentences
        joined by spaces: theirs, so joined), or a clean 503."""
        if status != 200:
            return self.busy(status, headers, answer)
        expected = [self.warm[s] for s in q] if isinstance(q, list) else \
            " ".join(self.warm[s] for s in q.sentences)
        if answer != {"translatedText": expected}:
            return f"not the warm-up's translations: {str(answer)[:300]}"
        return None

    def srt(self, sentences, translated=False):
        return "".join(f"{i + 1}\n00:00:{i % 60:02d},000 --> 00:00:{i % 60:02d},500\n"
                       f"{self.warm[s] if translated else s}\n\n" for i, s in enumerate(sentences)).encode()

    def html(self, sentences, translated=False):
        return ("<html><body>\n" + "".join(f"<p>{self.warm[s] if translated else s}</p>\n" for s in sentences)
                + "</body></html>\n").encode()

    def file_round_trip(self, name, data, expected, in_parts=False):
        """POST /translate_file, then GET its URL (the translated file, equal to ``expected``), then again (404).
        A file of more sentences than the queue holds (``in_parts``) waits for room: only its timeout is a 503."""
        status, headers, answer = self.post_file(name, data)
        if status != 200:
            if in_parts and status == 503 and "the server is busy" in str(answer):
                return status, "a file in parts was answered busy: its parts wait for room in the queue (--timeout)"
            return status, self.busy(status, headers, answer)
        path = urllib.parse.urlsplit(answer["translatedFileUrl"]).path
        got, _, content = self.call("GET", path)
        if got != 200:
            return got, f"the download: status {got}: {str(content)[:200]}"
        if content != expected:
            return got, f"the downloaded {name} is not the warm-up's translations: {content[:300]!r}"
        again, headers, answer = self.call("GET", path)
        return got, self.error(again, headers, answer, 404, "no translated file")

    # ---- the kinds of request --------------------------------------------------------------------
    def do(self, kind, rng):
        """One request (or two) of ``kind``: its record(s)."""
        started = time.perf_counter()
        status, problem = getattr(self, "kind_" + kind)(rng)
        record = {"kind": kind, "status": status, "seconds": time.perf_counter() - started, "problem": problem}
        with self.lock:
            self.records.append(record)
        return record

    def kind_translate(self, rng):
        q = [rng.choice(self.sentences) for _ in range(rng.randint(1, 4))]
        status, headers, answer = self.post(self.fields(q=q))
        return status, self.translated(status, headers, answer, q)

    def kind_burst(self, rng):
        """Two texts of --queue-size sentences at once: the queue holds one (the other: 503, or after it)."""
        texts = [[rng.choice(self.sentences) for _ in range(self.queue_size)] for _ in range(2)]
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda t: self.post(self.fields(q=" ".join(t))), texts))
        problems = [self.translated(*a, Text(t)) for a, t in zip(answers, texts)]
        return "/".join(str(a[0]) for a in answers), "; ".join(p for p in problems if p) or None

    def kind_srt(self, rng, count=None):
        sentences = [rng.choice(self.sentences) for _ in range(count or rng.randint(1, 4))]
        return self.file_round_trip("talk.srt", self.srt(sentences), self.srt(sentences, True), in_parts=bool(count))

    def kind_srt_in_parts(self, rng):
        return self.kind_srt(rng, self.queue_size + 2)

    def kind_html(self, rng):
        sentences = [rng.choice(self.sentences) for _ in range(rng.randint(1, 4))]
        return self.file_round_trip("page.html", self.html(sentences), self.html(sentences, True))

    def kind_rate(self, rng):
        q = [rng.choice(self.sentences)]
        status, headers, answer = self.post(self.fields(q=q, api_key="limited"))
        if status == 429:
            with self.lock:
                self.last_429 = (time.monotonic(), int(headers.get("retry-after", "0") or 0))
            return status, self.error(status, headers, answer, 429, f"{self.rate} requests per minute", retry=True)
        return status, self.translated(status, headers, answer, q)

    def kind_char_limit(self, rng):
        status, headers, answer = self.post(self.fields(q="x" * (self.char_limit + 1)))
        return status, self.error(status, headers, answer, 400, f"exceeds text limit ({self.char_limit})")

    def kind_batch_limit(self, rng):
        status, headers, answer = self.post(self.fields(q=self.sentences[:1] * (self.batch_limit + 1)))
        return status, self.error(status, headers, answer, 400, f"exceeds text limit ({self.batch_limit})")

    def kind_body_limit(self, rng):
        body = json.dumps(self.fields(q="x" * self.body_limit)).encode()
        status, headers, answer = self.call("POST", "/translate", body, {"Content-Type": "application/json"})
        return status, self.error(status, headers, answer, 413, f"larger than the limit ({self.body_limit} bytes)")

    def kind_queue_limit(self, rng):
        text = " ".join(rng.choice(self.sentences) for _ in range(self.queue_size + 1))
        status, headers, answer = self.post(self.fields(q=text))
        return status, self.error(status, headers, answer, 400, f"more than the queue holds ({self.queue_size})")

    def kind_json_depth(self, rng):
        body = ('{"q": ' + "[" * 40 + '"x"' + "]" * 40 + f', "source": "{self.source}", "target": "{self.target}", '
                '"api_key": "free"}').encode()
        status, headers, answer = self.call("POST", "/translate", body, {"Content-Type": "application/json"})
        return status, self.error(status, headers, answer, 400, "deeper than 32 levels")

    def nested(self, rng):
        return "<b>" * (NESTING + 1) + rng.choice(self.sentences) + "</b>" * (NESTING + 1)

    def kind_nesting_text(self, rng):
        status, headers, answer = self.post(self.fields(q=f"<p>{self.nested(rng)}</p>", format="html"))
        return status, self.error(status, headers, answer, 400, f"deeper than the limit of {NESTING}")

    def kind_nesting_file(self, rng):
        status, headers, answer = self.post_file("deep.html", f"<p>{self.nested(rng)}</p>".encode())
        return status, self.error(status, headers, answer, 400, f"deep.html: inline elements nested deeper than "
                                                                f"the limit of {NESTING}")

    def kind_file_limit(self, rng):
        status, headers, answer = self.post_file("big.txt", b"x" * (self.file_limit + 1))
        return status, self.error(status, headers, answer, 413, f"larger than the limit ({self.file_limit} bytes)")

    def kind_file_char_limit(self, rng):
        text = (" ".join(self.sentences) + "\n") * (self.file_char_limit // len(" ".join(self.sentences)) + 1)
        status, headers, answer = self.post_file("long.txt", text.encode())
        return status, self.error(status, headers, answer, 400, f"exceeds the file limit ({self.file_char_limit}")

    def kind_no_key(self, rng):
        status, headers, answer = self.post({"q": self.sentences[0], "source": self.source, "target": self.target})
        return status, self.error(status, headers, answer, 403, "needs one (api_key)")

    def kind_wrong_key(self, rng):
        status, headers, answer = self.post(self.fields(q=self.sentences[0], api_key="wrong"))
        return status, self.error(status, headers, answer, 403, "Invalid API key")

    def kind_hang_up_mid_body(self, rng):
        body = json.dumps(self.fields(q=[rng.choice(self.sentences) for _ in range(4)])).encode()
        self.hang_up("/translate", body, {"Content-Type": "application/json"}, rng.uniform(0.1, 0.9))
        return "hung up", None

    def kind_hang_up_after_request(self, rng):
        body = json.dumps(self.fields(q=[rng.choice(self.sentences) for _ in range(4)])).encode()
        self.hang_up("/translate", body, {"Content-Type": "application/json"}, 1)
        return "hung up", None

    def kind_hang_up_mid_file(self, rng):
        sentences = [rng.choice(self.sentences) for _ in range(4)]
        self.hang_up("/translate_file", *self.multipart("talk.srt", self.srt(sentences)), rng.uniform(0.1, 0.9))
        return "hung up", None

    # ---- the server's resources ----------------------------------------------------------------
    def resources(self):
        pid = self.process.pid
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        files = [os.path.relpath(os.path.join(d, n), self.tmp) for d, _, names in os.walk(self.tmp) for n in names]
        return {"descriptors": len(os.listdir(f"/proc/{pid}/fd")), "threads": len(os.listdir(f"/proc/{pid}/task")),
                "temporary_files": len(files), "rss_mib": round(rss / 1024, 1), "files": files}

    def queue(self):
        return self.call("GET", "/health")[2]["queue"][self.pair]


def soak(model, backend="fairseq", rounds=20, clients=8, queue_size=16, seed=0, sentences=SENTENCES, rate=2,
         rate_wait=65.0, timeout=30.0, rss_bound_mib=64.0, quiet=False):
    """Soaks a server of ``model`` ((model_dir, data_bin), or (ct2_export,)) on ``backend``: the module's text.
    Returns the summary, its "problems" empty where every check passed."""
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))
    work = tempfile.mkdtemp(prefix="serve-soak-")
    soaked = None
    try:
        soaked = Soak(model, backend, queue_size, sentences, rate, timeout, work)
        problems = []
        rng = random.Random(seed)
        # warm-up: each sentence alone, then each kind once (the rate-limited key to its 429)
        for s in dict.fromkeys(sentences):
            status, _, answer = soaked.post(soaked.fields(q=s))
            if status != 200:
                raise RuntimeError(f"the warm-up's {s!r}: {status} {answer}")
            soaked.warm[s] = answer["translatedText"]
        for kind in MIX:
            soaked.do(kind, rng)
        for _ in range(rate):
            soaked.do("rate", rng)
        warm_up = list(soaked.records)
        if soaked.records[-1]["status"] != 429:
            problems.append(f"the rate-limited key ({rate} a minute) was not refused past its rate")
        time.sleep(1)
        baseline = soaked.resources()
        say(f"[soak] {backend}: warmed up ({len(soaked.warm)} sentences, {len(warm_up)} requests); baseline {baseline}")

        started = time.perf_counter()
        kinds, weights = list(MIX), list(MIX.values())
        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            for r in range(rounds):
                plan = [(kind, random.Random(seed * 1_000_003 + r * 1000 + c))
                        for c, kind in enumerate(random.Random(seed * 7919 + r).choices(kinds, weights, k=clients))]
                list(pool.map(lambda job: soaked.do(*job), plan))
                if (r + 1) % max(1, rounds // 5) == 0:
                    say(f"[soak] round {r + 1}/{rounds}: {len(soaked.records) - len(warm_up)} requests, "
                        f"rss {soaked.resources()['rss_mib']} MiB")
        wall = time.perf_counter() - started
        soak_records = soaked.records[len(warm_up):]

        # the rate-limited key answers again once its window allows
        # (a probe now: a 200, or a 429 whose Retry-After, where it is within rate_wait, is waited for once)
        status, _ = soaked.kind_rate(rng)
        recovered = True if status == 200 else None
        if status == 429 and soaked.last_429[1] <= rate_wait:
            time.sleep(soaked.last_429[1] + 0.5)
            status, _ = soaked.kind_rate(rng)
            recovered = status == 200
            if not recovered:
                problems.append(f"the rate-limited key was refused ({status}) after its Retry-After passed")

        # the queue drains (requests of clients that hung up still run), then the resources are back
        deadline = time.monotonic() + timeout + 10
        while soaked.queue() != {"sentences": 0, "jobs": 0} and time.monotonic() < deadline:
            time.sleep(0.2)
        queue = soaked.queue()
        if queue != {"sentences": 0, "jobs": 0}:
            problems.append(f"the queue did not drain: {queue}")
        deadline = time.monotonic() + 15
        after = soaked.resources()
        while after["descriptors"] > baseline["descriptors"] and time.monotonic() < deadline:
            time.sleep(0.5)
            after = soaked.resources()
        executor = min(32, (os.cpu_count() or 1) + 4)  # asyncio's default executor's threads at most
        if after["descriptors"] != baseline["descriptors"]:
            problems.append(f"descriptors: {after['descriptors']} open, {baseline['descriptors']} at the baseline: "
                            + " ".join(sorted(os.readlink(f"/proc/{soaked.process.pid}/fd/{fd}")
                                              for fd in os.listdir(f"/proc/{soaked.process.pid}/fd")))[:1000])
        if after["threads"] > baseline["threads"] + executor:
            problems.append(f"threads: {after['threads']}, more than the baseline's {baseline['threads']} and the "
                            f"executor's {executor}")
        if after["temporary_files"] or baseline["temporary_files"]:  # (every file downloaded, the warm-up's too)
            problems.append(f"temporary files left: {after['files'][:10]} (at the baseline: {baseline['files'][:10]})")
        if after["rss_mib"] - baseline["rss_mib"] > rss_bound_mib:
            problems.append(f"VmRSS grew {after['rss_mib'] - baseline['rss_mib']:.1f} MiB, more than {rss_bound_mib}")

        translated = soaked.call("GET", "/health")[2]["translated"][soaked.pair]
        # a graceful shutdown under load
        shutdown = shut_down(soaked, clients, random.Random(seed + 1))
        problems += shutdown.pop("problems")

        for record in soaked.records:
            if record["problem"]:
                problems.append(f"{record['kind']} ({record['status']}): {record['problem']}")
        by_status = {}
        for record in soak_records:
            for status in str(record["status"]).split("/"):
                by_status[status] = by_status.get(status, 0) + 1
        by_kind = {}
        for record in soak_records:
            counts = by_kind.setdefault(record["kind"], {})
            for status in str(record["status"]).split("/"):
                counts[status] = counts.get(status, 0) + 1
        if not any("503" in str(r["status"]) for r in soak_records) and clients > 1:
            problems.append("no request found the queue full (503): more clients or rounds")
        latencies = [r["seconds"] for r in soak_records if r["status"] != "hung up"]
        summary = {
            "backend": backend, "rounds": rounds, "clients": clients, "queue_size": queue_size, "seed": seed,
            "limits": {"char_limit": soaked.char_limit, "batch_limit": soaked.batch_limit, "file_limit":
                       soaked.file_limit, "file_char_limit": soaked.file_char_limit, "nesting_limit": NESTING,
                       "body_limit": soaked.body_limit, "rate_per_minute": rate, "timeout_s": timeout},
            "requests": len(soak_records), "wall_s": round(wall, 1), "by_status": dict(sorted(by_status.items())),
            "by_kind": by_kind,
            "sentences_translated": translated,
            "latency_p50_s": round(statistics.median(latencies), 3) if latencies else None,
            "latency_p95_s": round(percentile(latencies, 0.95), 3) if latencies else None,
            "baseline": {k: v for k, v in baseline.items() if k != "files"},
            "after": {k: v for k, v in after.items() if k != "files"}, "queue_after": queue,
            "thread_tolerance": executor, "rss_bound_mib": rss_bound_mib, "rate_recovered": recovered,
            "shutdown": shutdown, "problems": problems}
        say(report(summary))
        return summary
    finally:
        if soaked and soaked.process.poll() is None:
            soaked.process.kill()
            soaked.process.wait()
        shutil.rmtree(work, ignore_errors=True)


def shut_down(soaked, clients, rng):
    """SIGTERM while ``clients`` requests are in flight (each sent whole, then 0.5 s for the server to take
    them; a third of them files, all of them together within the queue): each answered with its translation
    or a JSON error, exit status -SIGTERM, the temporary folder empty."""
    sent = threading.Barrier(clients + 1)
    problems, answers = [], []

    each = max(1, soaked.queue_size // clients)
    plans = [([rng.choice(soaked.sentences) for _ in range(each)] if c % 3 else None,
              [rng.choice(soaked.sentences) for _ in range(each)]) for c in range(clients)]

    def client(c):
        q, sentences = plans[c]
        if q:
            body, headers, path = json.dumps(soaked.fields(q=q)).encode(), {"Content-Type": "application/json"}, \
                "/translate"
        else:
            (body, headers), path = soaked.multipart("talk.srt", soaked.srt(sentences)), "/translate_file"
        connection = http.client.HTTPConnection("127.0.0.1", soaked.port, timeout=120)
        try:
            connection.request("POST", path, body=body, headers=headers)
            sent.wait(60)
            response = connection.getresponse()
            status, answer = response.status, json.loads(response.read())
            got = {k.lower(): v for k, v in response.getheaders()}
        except (OSError, http.client.HTTPException, ValueError) as error:
            return f"{path}: in flight at SIGTERM, not answered: {type(error).__name__}: {error}"
        finally:
            connection.close()
        answers.append(status)
        if status != 200:  # (a clean error: the timeout's 503, say)
            return soaked.busy(status, got, answer)
        if q:
            return soaked.translated(status, got, answer, q)
        return None if "translatedFileUrl" in answer else f"/translate_file: {answer}"

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        futures = [pool.submit(client, c) for c in range(clients)]
        sent.wait(60)
        time.sleep(0.5)
        in_flight = soaked.queue()
        soaked.process.send_signal(signal.SIGTERM)
        signalled = time.perf_counter()
        problems += [p for p in (f.result() for f in futures) if p]
    try:
        code = soaked.process.wait(120)
    except subprocess.TimeoutExpired:
        code = None
        problems.append("the server did not exit within 120 s of SIGTERM")
    took = time.perf_counter() - signalled
    if code != -signal.SIGTERM:
        problems.append(f"exit status {code}, not -SIGTERM:\n{soaked.log()}")
    left = [os.path.join(d, n) for d, dirs, names in os.walk(soaked.tmp) for n in dirs + names]
    if left:
        problems.append(f"left in the temporary folder at shutdown: {left[:10]}")
    return {"in_flight": clients, "queue_at_sigterm": in_flight, "answered": sorted(answers), "exit_status": code,
            "exit_s": round(took, 2), "left_in_tmp": len(left), "problems": problems}


def report(summary):
    s = summary
    lines = [f"soak of fairseq-rope-serve ({s['backend']}): {s['rounds']} rounds x {s['clients']} clients, "
             f"--queue-size {s['queue_size']}: {s['requests']} requests in {s['wall_s']} s",
             f"  by status: {s['by_status']}",
             "  by kind: " + ", ".join(f"{kind} {counts}" for kind, counts in sorted(s["by_kind"].items())),
             f"  latency p50 {s['latency_p50_s']} s, p95 {s['latency_p95_s']} s; translated: {s['sentences_translated']}",
             f"  baseline {s['baseline']}", f"  after    {s['after']} (queue {s['queue_after']}; threads tolerance "
                                            f"+{s['thread_tolerance']}, VmRSS bound +{s['rss_bound_mib']} MiB)",
             f"  rate-limited key recovered: {s['rate_recovered']}",
             f"  shutdown: {s['shutdown']}",
             f"  problems: {len(s['problems'])}"] + [f"    {p}" for p in s["problems"][:30]]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", nargs="+", required=True, metavar=("MODEL_DIR", "DATA_BIN"))
    ap.add_argument("--backend", choices=["fairseq", "ctranslate2"], default="fairseq")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--queue-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--text", help="the sentences to send, one a line (default: 12 simple English sentences)")
    ap.add_argument("--rate", type=int, default=2, help="requests a minute of the rate-limited key")
    ap.add_argument("--rate-wait", type=float, default=65.0,
                    help="seconds to wait, at most, for the rate-limited key's window to let it in again")
    ap.add_argument("--timeout", type=float, default=30.0, help="the server's --timeout")
    ap.add_argument("--rss-bound-mib", type=float, default=64.0, help="VmRSS growth allowed after the warm-up")
    ap.add_argument("--json", help="write the summary here")
    args = ap.parse_args(argv)
    for name in ("rounds", "clients", "queue_size", "rate"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    sentences = SENTENCES
    if args.text:
        with open(args.text, encoding="utf-8") as f:
            sentences = [line.strip() for line in f if line.strip()]
        if not sentences:
            ap.error(f"--text {args.text} holds no sentence")
    summary = soak(args.model, args.backend, args.rounds, args.clients, args.queue_size, args.seed, sentences,
                   args.rate, args.rate_wait, args.timeout, args.rss_bound_mib)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 1 if summary["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
