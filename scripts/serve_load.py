"""fairseq-rope-serve under load, on loopback, against the in-process API on the same model.

    python -m scripts.serve_load --model work/sample/checkpoints/rope_transformer work/sample/data-bin \
        --text recipes/wmt14_en_de/sample/test.en --clients 32 --requests 2000

Starts the server (its defaults, --threads as given), sends --requests requests from --clients
concurrent clients, each of 1 to 4 sentences of --text (mixed lengths), and prints: requests that
failed (none should below the limits), p50/p95 latency, sentences/s; then the in-process API's
throughput on the same sentences (``translate`` in batches of --api-batch), and the ratio. Last, a burst
past a small queue (a second server with --queue-size 64) to time the 503s. JSON with --json.
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", nargs="+", required=True)
    ap.add_argument("--text", required=True, help="sentences, one a line")
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

    process, url = start(args.model, *flags)
    try:
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(args.clients) as clients:
            results = list(clients.map(lambda q: post(url, " ".join(q)), requests))
        wall = time.perf_counter() - started
        with urllib.request.urlopen(url + "/health", timeout=30) as r:
            translated = next(iter(json.load(r)["translated"].values()))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(120)
    latencies = sorted(t for _, t in results)
    failed = sum(status != 200 for status, _ in results)

    import torch

    from fairseq_rope.hub import load_translator

    if args.threads:
        torch.set_num_threads(args.threads)
    mt = load_translator(args.model[0], args.model[1], device="cpu") if len(args.model) == 2 else \
        load_translator(args.model[0], backend="ctranslate2", device="cpu")
    flat = [s for q in requests for s in q]
    started = time.perf_counter()
    for i in range(0, len(flat), args.api_batch):
        mt.translate(flat[i:i + args.api_batch])
    api_wall = time.perf_counter() - started

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

    figures = {"requests": len(requests), "sentences": sentences, "clients": args.clients, "failed": failed,
               "p50_s": statistics.median(latencies), "p95_s": latencies[int(0.95 * (len(latencies) - 1))],
               "server_sentences_per_s": sentences / wall, "api_sentences_per_s": sentences / api_wall,
               "ratio": (sentences / wall) / (sentences / api_wall), "burst_503": len(refused),
               "beam_searches": translated["batches"], "translating_share": translated["seconds"] / wall,
               "burst_503_max_s": max(refused) if refused else None, "burst_200": len(served),
               "burst_failed_otherwise": len(burst) - len(refused) - len(served)}
    print(f"server: {len(requests)} requests ({sentences} sentences) from {args.clients} clients: {failed} failed, "
          f"p50 {figures['p50_s']:.2f} s, p95 {figures['p95_s']:.2f} s, {figures['server_sentences_per_s']:.1f} "
          f"sentences/s; {translated['batches']} beam searches, translating {100 * figures['translating_share']:.0f}% "
          f"of the time")
    print(f"in-process API, batches of {args.api_batch}: {figures['api_sentences_per_s']:.1f} sentences/s; "
          f"server / API = {figures['ratio']:.2f}")
    print(f"16 requests of 40 sentences at once, a queue of 64 sentences: {len(served)} translated, {len(refused)} "
          f"answered 503 (the slowest in {figures['burst_503_max_s'] or 0:.3f} s), "
          f"{figures['burst_failed_otherwise']} otherwise")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
