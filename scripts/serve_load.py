"""fairseq-rope-serve under load, on loopback, against the in-process API on the same model.

    python -m scripts.serve_load --model work/sample/checkpoints/rope_transformer work/sample/data-bin \
        --text recipes/wmt14_en_de/sample/test.en --clients 32 --requests 2000

For each of --backends (fairseq, CTranslate2 float32, CTranslate2 int8; one after the other) it starts
the server (its defaults, --threads as given), sends --requests requests from --clients concurrent
clients, each of 1 to 4 sentences of --text (mixed lengths), and prints: requests that failed (none
should below the limits), p50/p95 latency, sentences/s; then the in-process API's throughput on the
same sentences (``translate`` in batches of --api-batch) with the same backend and threads, and the
ratio; at the end a table of the backends. Last, a burst past a small queue (a server with the default
backend and --queue-size 64) to time the 503s. JSON with --json.
"""

import argparse
import concurrent.futures
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(model, *flags):
    port = free_port()
    process = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "fairseq-rope-serve"), "--model", *model,
                                "--port", str(port), *flags], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    return process, url
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the server did not start")


def post(url, q, timeout=300):
    data = json.dumps({"q": q, "source": "en", "target": "de"}).encode()
    request = urllib.request.Request(url + "/translate", data=data, headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            r.read()
            status = r.status
    except urllib.error.HTTPError as error:
        status = error.code
    except OSError:
        status = -1
    return status, time.perf_counter() - started


BACKENDS = {  # name: (fairseq-rope-serve's flags, load_translator's arguments)
    "fairseq": (["--backend", "fairseq"], dict(backend="fairseq")),
    "ctranslate2": (["--backend", "ctranslate2"], dict(backend="ctranslate2")),
    "int8": (["--backend", "ctranslate2", "--quantization", "int8"], dict(backend="ctranslate2", compute_type="int8")),
}


def load(url_flags, model, requests, clients):
    """Serves ``model`` with ``url_flags`` and sends ``requests`` from ``clients`` threads: figures."""
    process, url = start(model, *url_flags)
    try:
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            results = list(pool.map(lambda q: post(url, " ".join(q)), requests))
        wall = time.perf_counter() - started
        with urllib.request.urlopen(url + "/health", timeout=30) as r:
            translated = next(iter(json.load(r)["translated"].values()))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(120)
    latencies = sorted(t for _, t in results)
    sentences = sum(map(len, requests))
    return {"failed": sum(status != 200 for status, _ in results), "p50_s": statistics.median(latencies),
            "p95_s": latencies[int(0.95 * (len(latencies) - 1))], "server_sentences_per_s": sentences / wall,
            "beam_searches": translated["batches"], "translating_share": translated["seconds"] / wall}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", nargs="+", required=True)
    ap.add_argument("--text", required=True, help="sentences, one a line")
    ap.add_argument("--backends", nargs="+", choices=sorted(BACKENDS), default=list(BACKENDS),
                    help="each served in turn (default: all); a fairseq-rope-ct2 export as --model: not fairseq")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--api-batch", type=int, default=64)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    with open(args.text, encoding="utf-8") as f:
        pool = [line.strip() for line in f if line.strip()]
    rng = random.Random(0)
    requests = [[rng.choice(pool) for _ in range(rng.randint(1, 4))] for _ in range(args.requests)]
    sentences = sum(map(len, requests))
    flags = ["--device", "cpu", "--char-limit", "0"] + (["--threads", str(args.threads)] if args.threads else [])

    import torch

    from fairseq_rope.hub import load_translator
    from fairseq_rope_cli.common import AVERAGED

    threads = args.threads or max(1, (os.cpu_count() or 2) - 1)  # the server's default
    if args.threads:
        torch.set_num_threads(args.threads)
    flat = [s for q in requests for s in q]
    # the checkpoint the server takes (the recipe's average where it exists)
    checkpoint = {} if len(args.model) == 1 else {"checkpoint_file": AVERAGED if os.path.isfile(
        os.path.join(args.model[0], AVERAGED)) else "checkpoint_best.pt"}
    figures = {"requests": len(requests), "sentences": sentences, "clients": args.clients, "backends": {}}
    for name in args.backends:
        serve_flags, load_args = BACKENDS[name]
        found = load([*flags, *serve_flags], args.model, requests, args.clients)
        mt = load_translator(*args.model, device="cpu", threads=threads, **load_args, **checkpoint)
        started = time.perf_counter()
        for i in range(0, len(flat), args.api_batch):
            mt.translate(flat[i:i + args.api_batch])
        found["api_sentences_per_s"] = sentences / (time.perf_counter() - started)
        found["ratio"] = found["server_sentences_per_s"] / found["api_sentences_per_s"]
        figures["backends"][name] = found
        print(f"{name}: {len(requests)} requests ({sentences} sentences) from {args.clients} clients: "
              f"{found['failed']} failed, p50 {found['p50_s']:.2f} s, p95 {found['p95_s']:.2f} s, "
              f"{found['server_sentences_per_s']:.1f} sentences/s; {found['beam_searches']} beam searches, translating "
              f"{100 * found['translating_share']:.0f}% of the time; in-process API, batches of {args.api_batch}: "
              f"{found['api_sentences_per_s']:.1f} sentences/s; server / API = {found['ratio']:.2f}", flush=True)

    process, url = start(args.model, *flags, "--queue-size", "64")
    try:
        long_text = " ".join(pool[:40])
        with concurrent.futures.ThreadPoolExecutor(16) as clients:
            burst = list(clients.map(lambda _: post(url, long_text), range(16)))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(120)
    refused = [t for status, t in burst if status == 503]
    served = [t for status, t in burst if status == 200]
    figures.update(burst_503=len(refused), burst_503_max_s=max(refused) if refused else None, burst_200=len(served),
                   burst_failed_otherwise=len(burst) - len(refused) - len(served))

    first = figures["backends"][args.backends[0]]["server_sentences_per_s"]
    print(f"\n| backend | requests failed | p50 latency | p95 latency | server sentences/s | vs {args.backends[0]} "
          f"| in-process API sentences/s | server / API |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, found in figures["backends"].items():
        print(f"| {name} | {found['failed']} | {found['p50_s']:.2f} s | {found['p95_s']:.2f} s | "
              f"{found['server_sentences_per_s']:.1f} | {found['server_sentences_per_s'] / first:.2f}x | "
              f"{found['api_sentences_per_s']:.1f} | {found['ratio']:.2f} |")
    print(f"\n16 requests of 40 sentences at once, a queue of 64 sentences (the default backend): {len(served)} "
          f"translated, {len(refused)} answered 503 (the slowest in {figures['burst_503_max_s'] or 0:.3f} s), "
          f"{figures['burst_failed_otherwise']} otherwise")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
