#!/usr/bin/env python
"""Beam-4 translation speed and BLEU: CTranslate2 (float32 and int8) against fairseq-generate, same weights.

    scripts/ct2_benchmark.py --checkpoint work/sample/checkpoints/rope_transformer/checkpoint_avg_last5.pt \
        --data-bin work/sample/data-bin --ref recipes/wmt14_en_de/sample/test.de --threads 2 \
        --out-json benchmarks/ct2_sample.json --out-md benchmarks/ct2_sample.md

The checkpoint is exported with fairseq-rope-ct2 (float32 weights, and int8 weights run as
int8_float32); the binarized test set of --data-bin is translated by fairseq-generate (--cpu, torch
limited to --threads by OMP_NUM_THREADS) and by fairseq-rope-ct2-generate (--threads), both with beam
4, length penalty 0.6, --batch-size sentences per batch and fairseq-generate's default maximum
length. Speed is each tool's own "Translated N sentences ... in Xs" figure, which excludes loading
the model; the runs are interleaved (fairseq, ct2 float32, ct2 int8, then again) --repeats times and
the median sentences/s of each is reported with its ratio to fairseq's. BLEU is sacreBLEU of each
tool's detokenized output against --ref (fairseq-rope-score, as the recipe scores), and the number
of translations identical to fairseq's.

--forced-length L is for weights that are not trained enough to translate (a base-size model
trained briefly on a CPU stops after a token or two, which would time the encoder only): every
hypothesis is made exactly L subwords long, EOS forbidden before and forced after, so both engines
do the same L + 1 beam-search steps per sentence. fairseq-generate gets --min-len L --max-len-a 0
--max-len-b L; CTranslate2 is called directly (min_decoding_length L, max_decoding_length L + 1, on
the same binarized subwords in batches of --batch-size), timed around translate_batch. No BLEU then.
"""

import argparse
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

BIN = os.path.dirname(sys.executable)
SPEED = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s \(([\d.]+) sentences/s")


def tool(name, *args, env=None):
    done = subprocess.run([os.path.join(BIN, name), *map(str, args)], capture_output=True, text=True, env=env)
    if done.returncode:
        sys.exit(f"{name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done


def sentences_per_second(output, name):
    match = SPEED.search(output)
    if not match:
        sys.exit(f"no 'Translated N sentences' line in the output of {name}")
    return float(match.group(4))


def hypotheses(output):
    found = {}
    for line in output.splitlines():
        if line.startswith("H-"):
            head, _score, *text = line.split("\t")
            found[int(head[2:])] = text[0] if text else ""
    return [found[i] for i in sorted(found)]


def ctranslate2_forced(model, data_bin, threads, batch_size, beam, length, inter_threads=1):
    """CTranslate2 beam search of exactly `length` subwords per sentence, its batches translated by
    `inter_threads` workers of threads / inter_threads threads each; returns (sentences/s, tokens)."""
    import ctranslate2
    from fairseq.data import Dictionary

    from fairseq_rope_cli.ct2_generate import binarized_subset

    with open(os.path.join(model, "fairseq_rope_ct2.json"), encoding="utf-8") as f:
        meta = json.load(f)
    dictionary = Dictionary.load(os.path.join(model, f"dict.{meta['source_lang']}.txt"))
    sources = binarized_subset(data_bin, "test", meta["source_lang"], meta["target_lang"], dictionary)
    translator = ctranslate2.Translator(model, device="cpu", intra_threads=max(1, threads // inter_threads),
                                        inter_threads=inter_threads)
    start = time.perf_counter()
    outputs = translator.translate_batch(sources, max_batch_size=batch_size, beam_size=beam, return_end_token=True,
                                         min_decoding_length=length, max_decoding_length=length + 1,
                                         max_input_length=0)
    seconds = time.perf_counter() - start
    return len(sources) / seconds, sum(len(o.hypotheses[0]) for o in outputs)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--data-bin", required=True)
    p.add_argument("--ref", required=True, help="raw reference of the test set, for sacreBLEU")
    p.add_argument("--lang", default="de", help="target language (default: de)")
    p.add_argument("--name", default="", help="what the table calls the model (default: the checkpoint path)")
    p.add_argument("--threads", type=int, default=2, help="CPU threads of each tool (default: 2)")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch, both tools (default: 64)")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--lenpen", type=float, default=0.6)
    p.add_argument("--repeats", type=int, default=3, help="interleaved timed rounds (default: 3)")
    p.add_argument("--ct2-batch-size", type=int, help="CTranslate2's sentences per batch with --forced-length "
                                                      "(default: --batch-size)")
    p.add_argument("--inter-threads", type=int, default=1,
                   help="with --forced-length: CTranslate2's batches translated by this many workers, each with "
                        "--threads / N threads (default: 1)")
    p.add_argument("--forced-length", type=int, metavar="L",
                   help="make every hypothesis L subwords long, for weights that do not translate yet (no BLEU)")
    p.add_argument("--work-dir", help="where the exported models go (default: a temporary directory)")
    p.add_argument("--out-json")
    p.add_argument("--out-md")
    args = p.parse_args(argv)

    work = args.work_dir or tempfile.mkdtemp(prefix="ct2-bench-")
    remove_bpe = "@@ "
    decode = ["--beam", args.beam, "--lenpen", args.lenpen, "--remove-bpe", remove_bpe]
    forced = args.forced_length
    if forced:
        decode += ["--min-len", forced, "--max-len-a", 0, "--max-len-b", forced]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    runs = {
        "fairseq-generate": lambda: tool("fairseq-generate", args.data_bin, "--user-dir",
                                         os.path.join(os.path.dirname(__file__), "..", "fairseq_rope"),
                                         "--path", args.checkpoint, "--cpu", "--gen-subset", "test",
                                         "--batch-size", args.batch_size, "--required-batch-size-multiple", 1,
                                         *decode, env=env),
    }
    for weights in ("float32", "int8"):
        model = os.path.join(work, weights)
        tool("fairseq-rope-ct2", "--checkpoint", args.checkpoint, "--data-bin", args.data_bin, "--output-dir", model,
             "--quantization", weights, "--force")
        if forced:
            runs[f"ctranslate2 {weights}"] = lambda model=model: ctranslate2_forced(
                model, args.data_bin, args.threads, args.ct2_batch_size or args.batch_size, args.beam, forced,
                args.inter_threads)
        else:
            runs[f"ctranslate2 {weights}"] = (lambda model=model: tool(
                "fairseq-rope-ct2-generate", model, "--data-bin", args.data_bin, "--threads", args.threads,
                "--batch-size", args.batch_size, *decode, env=env))

    speeds = {name: [] for name in runs}
    outputs = {}
    for _ in range(args.repeats):
        for name, run in runs.items():
            done = run()
            if isinstance(done, tuple):  # --forced-length: CTranslate2 called in this process
                speed, outputs[name] = done
            else:
                speed = sentences_per_second(done.stdout + done.stderr, name)
                outputs[name] = int(SPEED.search(done.stdout + done.stderr).group(2).replace(",", "")) if forced \
                    else done.stdout
            speeds[name].append(speed)
            print(f"[ct2-benchmark] {name}: {speeds[name][-1]:.2f} sentences/s", file=sys.stderr)

    rows = []
    if forced:
        rows = [dict(tool=name, sentences_per_s=round(statistics.median(speeds[name]), 2),
                     runs=[round(s, 2) for s in speeds[name]],
                     speedup=round(statistics.median(speeds[name]) / statistics.median(speeds["fairseq-generate"]), 2),
                     tokens_with_eos=outputs[name]) for name in runs]
    reference = [] if forced else hypotheses(outputs["fairseq-generate"])
    for name, output in ([] if forced else outputs.items()):
        gen = os.path.join(work, f"{name.replace(' ', '_')}.out")
        with open(gen, "w", encoding="utf-8") as f:
            f.write(output)
        score_dir = os.path.join(work, f"score_{name.replace(' ', '_')}")
        tool("fairseq-rope-score", "--generate-output", gen, "--ref", args.ref, "--lang", args.lang,
             "--out-dir", score_dir)
        with open(os.path.join(score_dir, "result.json"), encoding="utf-8") as f:
            bleu = json.load(f)["sacrebleu"]
        hyps = hypotheses(output)
        median = statistics.median(speeds[name])
        rows.append(dict(tool=name, sentences_per_s=round(median, 2), runs=[round(s, 2) for s in speeds[name]],
                         speedup=round(median / statistics.median(speeds["fairseq-generate"]), 2), sacrebleu=bleu,
                         identical_to_fairseq=sum(a == b for a, b in zip(hyps, reference)), sentences=len(hyps)))

    import ctranslate2
    import torch

    report = dict(model=args.name or args.checkpoint, checkpoint=os.path.abspath(args.checkpoint), threads=args.threads,
                  forced_length=forced, ct2_batch_size=args.ct2_batch_size or args.batch_size,
                  inter_threads=args.inter_threads, ct2_force_cpu_isa=os.environ.get("CT2_FORCE_CPU_ISA"),
                  batch_size=args.batch_size, beam=args.beam, lenpen=args.lenpen, repeats=args.repeats,
                  cpu=platform.processor() or platform.machine(), torch=torch.__version__,
                  ctranslate2=ctranslate2.__version__, command=shlex.join([*([f"CT2_FORCE_CPU_ISA={os.environ['CT2_FORCE_CPU_ISA']}"] if os.environ.get(
                      "CT2_FORCE_CPU_ISA") else []), "scripts/ct2_benchmark.py", *(argv or sys.argv[1:])]),
                  results=rows)
    try:
        with open("/proc/cpuinfo") as f:
            report["cpu"] = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    what = f"exactly {forced} subwords per hypothesis" if forced else f"{rows[0]['sentences']} sentences"
    ct2_setting = ""
    if forced and (args.ct2_batch_size or args.inter_threads != 1 or report["ct2_force_cpu_isa"]):
        ct2_setting = (f"; CTranslate2: batches of {report['ct2_batch_size']}, {args.inter_threads} worker(s) of "
                       f"{max(1, args.threads // args.inter_threads)} thread(s), ISA "
                       f"{report['ct2_force_cpu_isa'] or 'its choice'}")
    lines = [f"Beam-{args.beam} translation, {what}, {report['model']}, {args.threads} CPU "
             f"threads, batches of {args.batch_size}{ct2_setting} ({report['cpu']}; torch {report['torch']}, "
             f"CTranslate2 {report['ctranslate2']}; median of {args.repeats} interleaved runs)", ""]
    if forced:
        lines += ["| tool | sentences/s | vs fairseq-generate | generated tokens (EOS included) |",
                  "| --- | ---: | ---: | ---: |"]
        lines += [f"| {r['tool']} | {r['sentences_per_s']:.2f} | {r['speedup']:.2f}x | {r['tokens_with_eos']} |"
                  for r in rows]
    else:
        lines += ["| tool | sentences/s | vs fairseq-generate | sacreBLEU | identical to fairseq |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        lines += [f"| {r['tool']} | {r['sentences_per_s']:.2f} | {r['speedup']:.2f}x | {r['sacrebleu']:.2f} | "
                  f"{r['identical_to_fairseq']}/{r['sentences']} |" for r in rows]
    lines += ["", f"Command: `{report['command']}`"]
    markdown = "\n".join(lines) + "\n"
    print(markdown)
    if args.out_json:
        with open(args.out_json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
    if args.out_md:
        with open(args.out_md, "w", encoding="utf-8") as f:
            f.write(markdown)


if __name__ == "__main__":
    main()
