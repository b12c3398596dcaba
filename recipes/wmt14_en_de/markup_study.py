#!/usr/bin/env python3
"""Inline markup through translation, measured on the bundled sample: a tag around a phrase whose
translation is certain, and where the translator puts it.

    python recipes/wmt14_en_de/markup_study.py --work-dir work/sample --runs rope_transformer transformer \
        --output docs/sample_markup.md

The sample's grammar (make_sample_corpus.py) translates each English noun by one German noun of its
lexicon. For every test sentence, each English noun that occurs once in it (a whole word, singular or
plural form) is put alone in ``<b>`` (one tagged copy of the sentence per noun), and the copy is
translated by ``translate_html`` (fairseq_rope_text.markup: detag, translate, project on the model's
attention). A tag counts where the model's plain translation holds exactly one German form of that noun
(so the right words are known): it is *right* when ``<b>`` encloses exactly that German word, *near*
when it encloses it with other words, *wrong* otherwise. Also counted: copies whose text without tags
is not the plain translation (expected: none).
"""

import argparse
import collections
import os
import re
import sys


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def lexicon():
    """{English noun form: set of its German forms} from the sample grammar's nouns."""
    import make_sample_corpus as grammar  # (beside this script, whose folder Python puts first on sys.path)

    forms = collections.defaultdict(set)
    for noun in grammar.NOUNS:
        german = {noun.de, noun.de_pl, noun.de_pl + "n"} | ({noun.de_obl} if noun.de_obl else set())
        for english in (noun.en, noun.en_pl):
            if " " not in english:
                forms[english] |= german
    return forms


def cases(sources, forms):
    """(sentence index, tagged HTML, English noun) for each noun that occurs once in a sentence."""
    out = []
    for i, sentence in enumerate(sources):
        words = re.findall(r"\w+|\S", sentence)
        for noun in sorted(set(words) & set(forms)):
            if words.count(noun) == 1:
                tagged = re.sub(rf"\b{re.escape(noun)}\b", f"<b>{noun}</b>", sentence, count=1)
                out.append((i, f"<p>{tagged}</p>", noun))
    return out


def judge(translation_html, plain, german_forms):
    """"right", "near", "wrong" or None (the plain translation does not hold exactly one German form)."""
    words = re.findall(r"\w+", plain)
    found = [w for w in words if w in german_forms]
    if len(found) != 1:
        return None
    inside = re.findall(r"<b>(.*?)</b>", translation_html)
    if len(inside) != 1:
        return "wrong"
    enclosed = re.findall(r"\w+", inside[0])
    if enclosed == found:
        return "right"
    return "near" if found[0] in enclosed else "wrong"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--runs", nargs="+", required=True)
    ap.add_argument("--checkpoint-file", default="checkpoint_avg_last5.pt")
    ap.add_argument("--backend", default="auto", choices=("auto", "fairseq", "ctranslate2"))
    ap.add_argument("--output", required=True, help="the .md table")
    args = ap.parse_args(argv)

    from fairseq_rope.hub import load_translator
    from fairseq_rope_text.preprocessing import recipe_env

    data_bin = os.path.join(args.work_dir, "data-bin")
    env = recipe_env(data_bin)
    sources = read_lines(os.path.join(env["RAW_DIR"], f"test.{env.get('SRC', 'en')}"))
    forms = lexicon()
    tagged = cases(sources, forms)
    rows, examples = [], []
    for run in args.runs:
        mt = load_translator(os.path.join(args.work_dir, "checkpoints", run), data_bin,
                             checkpoint_file=args.checkpoint_file, backend=args.backend)
        plain = mt.translate_texts(sources)[0]
        out = mt.translate_texts([html for _, html, _ in tagged], "html")[0]
        counts = collections.Counter()
        for (i, html, noun), translation in zip(tagged, out):
            text = re.sub(r"\s+", " ", re.sub(r"</?(b|p)>", "", translation)).strip()
            counts["text differs"] += text != plain[i]
            verdict = judge(translation, plain[i], forms[noun])
            counts[verdict or "not judged"] += 1
            if verdict and len(examples) < 12 and (verdict != "right" or len(examples) < 4) and run == args.runs[0]:
                examples.append((html, translation, verdict))
        judged = counts["right"] + counts["near"] + counts["wrong"]
        rows.append((run, mt.engine, len(tagged), judged, counts["right"], counts["near"], counts["wrong"],
                     counts["text differs"]))
        print(f"[markup_study] {run} ({mt.engine}): {judged} tags judged of {len(tagged)}: {counts['right']} right, "
              f"{counts['near']} near, {counts['wrong']} wrong; {counts['text differs']} texts differ from the plain "
              "translation", file=sys.stderr)
    lines = ["| model | engine | tagged copies | judged | right | near | wrong | text differs |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for run, engine, n, judged, right, near, wrong, differs in rows:
        lines.append(f"| {run} | {engine} | {n} | {judged} | {right} ({100 * right / max(judged, 1):.1f}%) | "
                     f"{near} | {wrong} | {differs} |")
    lines += ["", f"Examples ({args.runs[0]}):", ""]
    for html, translation, verdict in examples:
        lines.append(f"* {verdict}: `{html}` -> `{translation}`")
    with open(args.output + ".tmp", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(args.output + ".tmp", args.output)
    print(f"[markup_study] wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
