"""fairseq-rope-corpus: a parallel corpus from manuals translated page by page (Debian's .deb packages).

    fairseq-rope-corpus extract PACKAGE.deb DIR
    fairseq-rope-corpus pages --sources SOURCES.tsv --root DIR --out RAW_DIR [--src en --tgt de]
                              [--test-pairs 1500] [--valid-pairs 1000] [--seed 1]
                              [--min-words 3] [--max-ratio 2.0] [--max-code-share 0.5] [--sample 30]

extract unpacks a Debian package's files and folders (its data.tar.*; the package's ar archive read here,
so that neither dpkg nor binutils is needed) into DIR; links are not unpacked.

pages reads SOURCES.tsv, one source per line: NAME <TAB> a regular expression matching the English pages'
paths under --root <TAB> the German page's path (the expression's replacement, \\1 for its first group).
For every English page with its German page it pairs the paragraphs of prose by the pages' structure,
then their sentences (fairseq_rope_text.parallel_pages: the project's splitter where both sides give as
many, Gale & Church otherwise), drops what is not a translation of prose (untranslated, mostly code or
file names, under --min-words words, a character length ratio over --max-ratio, duplicates), and holds
whole pages out: in an order drawn with --seed, each source gives the test set (--test-pairs pairs) and
then the valid set (--valid-pairs) its share, with the pages that fit in what is left of it, then pages of
any source fill what the sets still lack; a page larger than that is never held out; the rest is
training. A training pair is dropped when its English or German, or one of the sentences joined in it, is
a near copy of a held-out one or of a sentence joined in one (the same letters, case, digits and
punctuation aside); so is a valid pair against the test set.

Writes RAW_DIR/{train,valid,test}.{SRC,TGT} (one sentence per line: prepare.sh's RAW_DIR), .docids (the
page of each pair: the document-level recipes' CONTEXT), report.json (pairs per source and split, what
each filter dropped, the alignment's measures) and alignment_sample.tsv (--sample random test pairs
with both alignments' verdicts, to read). The measures: the share of the structure's sentence pairs
(all of them, and those kept) that Gale & Church over the whole page (no paragraphs) also makes, and the
kept pairs whose character lengths (ratio over 1.5), numbers or URLs disagree.
"""

import hashlib
import io
import json
import lzma
import os
import random
import re
import sys
import tarfile
import zlib
from typing import Dict, FrozenSet, List, NamedTuple

from .common import InputError, argument_parser, atomic_output, write_json, write_lines

PROG = "fairseq-rope-corpus"
SPLITS = ("test", "valid", "train")


def log(message: str):
    print(f"[{PROG}] {message}", file=sys.stderr, flush=True)


def ar_members(data: bytes, name: str):
    """The members of an ar archive (a .deb) as (name, bytes)."""
    if not data.startswith(b"!<arch>\n"):
        raise InputError(PROG, f"{name}: not a Debian package (no ar archive header)")
    at = 8
    while at < len(data):
        header = data[at:at + 60]
        member = header[:16].decode("ascii", "replace").strip().rstrip("/")
        try:
            size = int(header[48:58].decode("ascii").strip())
        except ValueError:
            raise InputError(PROG, f"{name}: damaged ar header at byte {at}") from None
        if len(header) < 60 or at + 60 + size > len(data):
            raise InputError(PROG, f"{name}: truncated ({member or 'a member'} at byte {at} runs past the end, "
                                   f"{len(data)} bytes; download it again)")
        yield member, data[at + 60:at + 60 + size]
        at += 60 + size + (size % 2)


def extract(deb: str, out_dir: str) -> int:
    """Unpacks the files of ``deb`` into ``out_dir``; the number of files."""
    with open(deb, "rb") as f:
        data = f.read()
    for member, content in ar_members(data, deb):
        if member.startswith("data.tar"):
            if member.endswith(".zst"):
                raise InputError(PROG, f"{deb}: {member} is zstd-compressed; unpack it with dpkg-deb -x")
            try:
                with tarfile.open(fileobj=io.BytesIO(content)) as tar:
                    # files and folders only: links are not followed by the pages step, and an absolute
                    # one (common in Debian's documentation packages) would stop the "data" filter
                    files = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
                    tar.extractall(out_dir, members=files, filter="data")
                    return len([m for m in files if m.isfile()])
            except tarfile.FilterError as error:  # a path outside out_dir
                raise InputError(PROG, f"{deb}: refused to unpack {error.tarinfo.name} ({error})") from None
            except (tarfile.TarError, EOFError, OSError, lzma.LZMAError, zlib.error) as error:
                raise InputError(PROG, f"{deb}: {member} is damaged ({type(error).__name__}: {error})") from None
    raise InputError(PROG, f"{deb}: no data.tar member (not a Debian binary package)")


def read_sources(path: str):
    """SOURCES.tsv's lines as (name, compiled expression, replacement)."""
    sources = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 3:
                raise InputError(PROG, f"{path}, line {number}: expected NAME<TAB>REGEX<TAB>REPLACEMENT, "
                                       f"got {len(fields)} field(s)")
            try:
                sources.append((fields[0], re.compile(fields[1]), fields[2]))
            except re.error as error:
                raise InputError(PROG, f"{path}, line {number}: bad regular expression {fields[1]!r}: {error}")
    if not sources:
        raise InputError(PROG, f"{path}: no sources")
    return sources


def pages_of(root: str, sources):
    """(source, page id, English path, German path) of every English page whose German page exists; the
    page id is the source's name and the expression's first group (else the page's path)."""
    files = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
    found = []
    for name, expression, replacement in sources:
        matches = [expression.fullmatch(rel) for rel in files]
        pages = [(m.group(0), m.expand(replacement), m.group(1) if expression.groups else m.group(0))
                 for m in matches if m]
        paired = [(name, f"{name}/{page}", os.path.join(root, en), os.path.join(root, de))
                  for en, de, page in pages if os.path.isfile(os.path.join(root, de))]
        log(f"{name}: {len(pages)} English pages, {len(paired)} with a German page")
        if not paired:
            raise InputError(PROG, f"source {name}: no English page with its German page under {root} "
                                   f"(is its package extracted there?)")
        found.extend(paired)
    return found


def order_key(seed: int, page: str) -> str:
    return hashlib.sha256(f"{seed}:{page}".encode()).hexdigest()


class Row(NamedTuple):
    source: str
    target: str
    agrees: bool                # the page-level alignment made the same pair
    keys: FrozenSet[str]        # near-copy keys of both sides, whole and sentence by sentence


def read_page(path: str):
    from fairseq_rope_text.parallel_pages import page_blocks

    with open(path, "rb") as f:
        data = f.read()
    try:
        return page_blocks(data, path)
    except ValueError as error:
        raise InputError(PROG, str(error)) from None


def hold_out(kept, source_of, order, args) -> Dict[str, str]:
    """Each page's split. Whole pages, in ``order``: each source fills its share of the test and valid
    sets with the pages that fit in what is left of it; then pages of any source that fit in what the
    sets still lack; the rest is training. (A page larger than a set's quota is never held out.)"""
    total = sum(len(rows) for rows in kept.values())
    split_of: Dict[str, str] = {}
    distinct = {"test": set(), "valid": set()}  # the pairs a held-out set has (duplicates count once)

    def fill(split, pages, quota):
        taken = set()
        for page in pages:
            new = {(r.source, r.target) for r in kept[page]} - distinct[split]
            if page in split_of or not new or len(taken) + len(new) > quota:
                continue
            split_of[page] = split
            taken |= new
            distinct[split] |= new

    for split, wanted in (("test", args.test_pairs), ("valid", args.valid_pairs)):
        for source in dict.fromkeys(source_of.values()):
            pages = [p for p in order if source_of[p] == source]
            fill(split, pages, round(wanted * sum(len(kept[p]) for p in pages) / max(total, 1)))
        fill(split, order, wanted - len(distinct[split]))
    return {page: split_of.get(page, "train") for page in order}


def build(args):
    from fairseq_rope_text import parallel_pages as pp

    pages = pages_of(args.root, read_sources(args.sources))
    flt = pp.Filter(args.min_words, args.max_ratio, args.max_code_share)
    kept: Dict[str, List[Row]] = {}
    source_of: Dict[str, str] = {}
    by_source: Dict[str, dict] = {}
    dropped: Dict[str, int] = {}  # pairs not kept, by reason
    made = agreeing = 0
    for k, (source, page, en, de) in enumerate(pages, 1):
        en_blocks, de_blocks = read_page(en), read_page(de)
        aligned = pp.page_pairs(en_blocks, de_blocks, args.src, args.tgt)
        other = set(pp.page_level_pairs(aligned))
        stats = by_source.setdefault(source, {"pages": 0, "paragraphs": [0, 0], "paired_paragraphs": 0,
                                              "sentence_pairs": 0, "kept": 0, "test": 0, "valid": 0, "train": 0})
        stats["pages"] += 1
        stats["paragraphs"][0] += len(en_blocks)
        stats["paragraphs"][1] += len(de_blocks)
        stats["paired_paragraphs"] += aligned.paired_paragraphs
        stats["sentence_pairs"] += len(aligned.pairs)
        rows = []
        for (src, tgt, code), bead in zip(aligned.pairs, aligned.beads):
            agrees = bead in other
            made += 1
            agreeing += agrees
            why = flt.reason(src, tgt, code)
            if why:
                dropped[why] = dropped.get(why, 0) + 1
                continue
            parts = [aligned.source_sentences[i] for i in bead[0]] + [aligned.target_sentences[i] for i in bead[1]]
            rows.append(Row(src, tgt, agrees, frozenset(pp.near_copy_key(x) for x in [src, tgt, *parts]) - {""}))
        kept[page] = rows
        source_of[page] = source
        if k % 50 == 0 or k == len(pages):
            log(f"{k}/{len(pages)} pages read")

    order = sorted(kept, key=lambda page: order_key(args.seed, page))
    split_of = hold_out(kept, source_of, order, args)
    out = {s: ([], [], []) for s in SPLITS}  # src, tgt, docid
    agree = {s: [] for s in SPLITS}
    held_keys: set = set()
    dropped.update(duplicate=0, near_copy_of_held_out=0)  # (duplicates: split by split)
    for split in SPLITS:  # test first: its keys are known before valid and train are written
        seen, split_keys = set(), set()
        for page in order:
            if split_of[page] != split:
                continue
            for row in kept[page]:
                if (row.source, row.target) in seen:
                    dropped["duplicate"] += 1
                    continue
                if row.keys & held_keys:  # a near copy of a held-out sentence, or one inside a held-out pair
                    dropped["near_copy_of_held_out"] += 1
                    continue
                seen.add((row.source, row.target))
                split_keys |= row.keys
                out[split][0].append(row.source)
                out[split][1].append(row.target)
                out[split][2].append(page)
                agree[split].append(row.agrees)
                by_source[source_of[page]][split] += 1
        if split != "train":
            held_keys |= split_keys
    for stats in by_source.values():
        stats["kept"] = sum(stats[split] for split in SPLITS)
    for split in SPLITS:
        if not out[split][0]:
            raise InputError(PROG, f"the {split} set is empty: {sum(len(r) for r in kept.values())} pairs in all; "
                                   f"lower --test-pairs/--valid-pairs or add sources")

    disagreements = {"length": 0, "numbers": 0, "urls": 0}
    pairs_all = [(s, t) for split in SPLITS for s, t in zip(out[split][0], out[split][1])]
    for s, t in pairs_all:
        why = pp.disagreement(s, t, 1.5)
        if why:
            disagreements[why] += 1
    rng = random.Random(args.seed)
    sample = rng.sample(range(len(out["test"][0])), min(args.sample, len(out["test"][0])))
    report = {
        "sources": by_source,
        "pairs": {s: len(out[s][0]) for s in SPLITS},
        "pages": {s: len(set(out[s][2])) for s in SPLITS},
        "dropped": dropped,
        "alignment": {
            "sentence_pairs": made,
            "also_made_by_gale_church_over_the_page": agreeing,
            "agreement": round(agreeing / max(made, 1), 4),
            "kept_pairs_agreement": {s: round(sum(agree[s]) / len(agree[s]), 4) for s in SPLITS},
            "kept_pairs": len(pairs_all),
            "disagreeing_kept_pairs": disagreements,
        },
        "settings": {k: getattr(args, k) for k in ("src", "tgt", "test_pairs", "valid_pairs", "seed", "min_words",
                                                   "max_ratio", "max_code_share")},
    }
    os.makedirs(args.out, exist_ok=True)
    for split in SPLITS:
        write_lines(os.path.join(args.out, f"{split}.{args.src}"), out[split][0])
        write_lines(os.path.join(args.out, f"{split}.{args.tgt}"), out[split][1])
        write_lines(os.path.join(args.out, f"{split}.docids"), out[split][2])
    with atomic_output(os.path.join(args.out, "alignment_sample.tsv")) as f:
        f.write("page\tpage_alignment_agrees\tdisagreement\tsource\ttarget\n")
        for i in sorted(sample):
            s, t = out["test"][0][i], out["test"][1][i]
            f.write(f"{out['test'][2][i]}\t{'yes' if agree['test'][i] else 'no'}\t"
                    f"{pp.disagreement(s, t, 1.5) or '-'}\t{s}\t{t}\n")
    write_json(os.path.join(args.out, "report.json"), report)
    return report


def main(argv=None):
    ap = argument_parser(PROG, __doc__)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    p = sub.add_parser("extract", help="unpack a Debian package's files")
    p.add_argument("deb", metavar="PACKAGE.deb")
    p.add_argument("out_dir", metavar="DIR")
    p = sub.add_parser("pages", help="the parallel corpus from English pages and their German translations")
    p.add_argument("--sources", required=True, metavar="SOURCES.tsv")
    p.add_argument("--root", required=True, metavar="DIR", help="where the packages are extracted")
    p.add_argument("--out", required=True, metavar="RAW_DIR")
    p.add_argument("--src", default="en")
    p.add_argument("--tgt", default="de")
    p.add_argument("--test-pairs", type=int, default=1500)
    p.add_argument("--valid-pairs", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--min-words", type=int, default=3)
    p.add_argument("--max-ratio", type=float, default=2.0)
    p.add_argument("--max-code-share", type=float, default=0.5)
    p.add_argument("--sample", type=int, default=30, help="test pairs written to alignment_sample.tsv")
    args = ap.parse_args(argv)

    if args.cmd == "extract":
        if not os.path.isfile(args.deb):
            raise InputError(PROG, f"PACKAGE.deb not found: {args.deb}")
        n = extract(args.deb, args.out_dir)
        log(f"{args.deb}: {n} files extracted into {args.out_dir}")
        return 0
    for flag, value, low in (("--test-pairs", args.test_pairs, 1), ("--valid-pairs", args.valid_pairs, 1),
                             ("--min-words", args.min_words, 1), ("--sample", args.sample, 0)):
        if value < low:
            raise InputError(PROG, f"{flag} must be >= {low}, got {value}")
    if args.max_ratio < 1:
        raise InputError(PROG, f"--max-ratio must be >= 1, got {args.max_ratio}")
    if not 0 <= args.max_code_share <= 1:
        raise InputError(PROG, f"--max-code-share must be between 0 and 1, got {args.max_code_share}")
    if not os.path.isfile(args.sources):
        raise InputError(PROG, f"--sources not found: {args.sources}")
    if not os.path.isdir(args.root):
        raise InputError(PROG, f"--root is not a directory: {args.root}")
    report = build(args)
    log(f"wrote {args.out}: " + ", ".join(f"{s} {n} pairs" for s, n in report["pairs"].items()))
    log(f"alignment: {report['alignment']['agreement']:.1%} of the structure's sentence pairs also made by "
        f"Gale & Church over the whole page; dropped: {report['dropped']}")
    print(json.dumps(report["pairs"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
