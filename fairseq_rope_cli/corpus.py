"""fairseq-rope-corpus: a parallel corpus from manuals translated page by page (Debian's .deb packages).

    fairseq-rope-corpus extract PACKAGE.deb DIR
    fairseq-rope-corpus pages --sources SOURCES.tsv --root DIR --out RAW_DIR [--src en --tgt de]
                              [--test-pairs 1200] [--valid-pairs 1000] [--seed 1] [--similarity 0.5]
                              [--max-cluster 10] [--min-words 3] [--max-ratio 2.0] [--max-code-share 0.5]
                              [--drop-pairs FLAGGED.tsv] [--sample 30]
    fairseq-rope-corpus overlap RAW_DIR [--src en]
    fairseq-rope-corpus lexical RAW_DIR [--src en --tgt de] [--controls 2000] [--control-quantile 0.1]
                                [--sample 100] [--seed 1] [--drop-flagged] [--write-flagged FLAGGED.tsv]

extract unpacks a Debian package's files and folders (its data.tar.*; the package's ar archive read here,
so that neither dpkg nor binutils is needed) into DIR; links are not unpacked.

pages reads SOURCES.tsv, one source per line: NAME <TAB> a regular expression matching the English pages'
paths under --root <TAB> the German page's path (the expression's replacement, \\1 for its first group)
[<TAB> KIND, the test set its held-out pages go to: test_KIND; every source names one, or none does].
For every English page with its German page it pairs the paragraphs of prose by the pages' structure,
then their sentences (fairseq_rope_text.parallel_pages: the project's splitter where both sides give as
many, Gale & Church otherwise), drops what is not a translation of prose (untranslated, mostly code, file
names, menu items or UI labels, under --min-words words, a character length ratio over --max-ratio,
duplicates), and holds whole pages out: in an order drawn with --seed, each kind's test set (--test-pairs
pairs from its pages) and then the valid set (--valid-pairs from all pages) take, source by source, its
share, with the pages that fit in what is left of it, then pages of any source fill what the set still
lacks; a page larger than that is never held out; the rest is training.

Held out means held out: two pairs are near copies when their English or their German (or a sentence joined
in one) have word sets (letters only, casefolded) of Jaccard similarity >= --similarity, and a template
is a connected cluster of near copies. A cluster on one page, or of at most --max-cluster pairs, may be held
out: it then lives in the first of its splits (the test sets, valid, train) and its copies in the others
are dropped. A larger cluster spread over pages is a template whose many variants stay in training, also
the variants on held-out pages, which are not counted in their page's size: no test or valid sentence has
a near copy in training, and no test sentence one in valid.

Writes RAW_DIR/{train,valid,test}.{SRC,TGT} (one sentence per line: prepare.sh's RAW_DIR; test is every
test set one after the other) and, with kinds, test_KIND.{SRC,TGT} for each, .docids (the page of each
pair: the document-level recipes' CONTEXT), report.json (pairs per source and split, what each filter
dropped, the near copies, the alignment's measures, test_lines: where each test set starts in test.*)
and alignment_sample.tsv (--sample random test pairs with both alignments' verdicts, to read). The
measures: the share of the structure's sentence pairs (all of them, and those kept) that Gale & Church
over the whole page (no paragraphs) also makes, and the kept pairs whose character lengths (ratio over
1.5), numbers or URLs disagree; and for each held-out set, by source, the share of its sentences whose
most similar training sentence is >= 0.5, 0.6, 0.7, 0.8 (what overlap measures).

lexical checks the alignment without looking at lengths: a word aligner (eflomal, Östling & Tiedemann
2016; trained here on the corpus itself, no model download) scores every pair of train, valid and the test
sets (its fast-align-style per-word negative log-probability, forward and backward, averaged: lower is a
likelier translation), beside --controls pairs that are surely not translations (an English sentence with
the German of another pair, drawn with --seed). A pair is flagged where it scores like the controls: at or
above their --control-quantile quantile. Writes RAW_DIR/lexical.json (the threshold, the share flagged by
split and source), lexical_scores.tsv (every pair's score and verdict) and lexical_sample.tsv (--sample
flagged and --sample unflagged pairs of any split, in a drawn order, to read). --drop-flagged then writes
the corpus again without the flagged pairs (every split, test.* as its test sets one after the other; the
count in report.json's "dropped" as "lexical"; lexical_scores.tsv keeps the lines as they were scored).
--write-flagged writes the flagged pairs as a list for pages --drop-pairs (a pair's key, pair_key: the first
16 hex digits of the sha256 of SOURCE<TAB>TARGET, and its page): eflomal draws its samplers' seeds from
/dev/urandom, so two runs flag slightly different pairs, and a corpus that drops a pinned list repeats.

overlap measures that on any RAW_DIR (train.SRC and, for test, test_*, valid, their SRC and .docids),
printed as JSON: {set: {source: {"sentences", ">=0.5", ...}, "all": ...}}.
"""

import hashlib
import io
import itertools
import json
import lzma
import os
import random
import re
import sys
import tarfile
import zlib
from typing import Dict, List, NamedTuple, Tuple

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


KIND = re.compile(r"[a-z][a-z0-9]*")


def read_sources(path: str):
    """SOURCES.tsv's lines as (name, compiled expression, replacement, kind or None)."""
    sources = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) not in (3, 4):
                raise InputError(PROG, f"{path}, line {number}: expected NAME<TAB>REGEX<TAB>REPLACEMENT[<TAB>KIND], "
                                       f"got {len(fields)} field(s)")
            kind = fields[3] if len(fields) == 4 else None
            if kind is not None and not KIND.fullmatch(kind):
                raise InputError(PROG, f"{path}, line {number}: KIND must be a lower-case word (letters and digits, "
                                       f"e.g. prose or help: it names the test set test_KIND), got {kind!r}")
            try:
                sources.append((fields[0], re.compile(fields[1]), fields[2], kind))
            except re.error as error:
                raise InputError(PROG, f"{path}, line {number}: bad regular expression {fields[1]!r}: {error}")
    if not sources:
        raise InputError(PROG, f"{path}: no sources")
    if len({kind is None for *_, kind in sources}) > 1:
        raise InputError(PROG, f"{path}: either every source names its KIND (a test set each) or none does")
    return sources


def pages_of(root: str, sources):
    """(source, page id, English path, German path, kind) of every English page whose German page exists;
    the page id is the source's name and the expression's first group (else the page's path)."""
    files = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
    found = []
    for name, expression, replacement, kind in sources:
        matches = [expression.fullmatch(rel) for rel in files]
        pages = [(m.group(0), m.expand(replacement), m.group(1) if expression.groups else m.group(0))
                 for m in matches if m]
        paired = [(name, f"{name}/{page}", os.path.join(root, en), os.path.join(root, de), kind)
                  for en, de, page in pages if os.path.isfile(os.path.join(root, de))]
        log(f"{name}: {len(pages)} English pages, {len(paired)} with a German page")
        if not paired:
            raise InputError(PROG, f"source {name}: no English page with its German page under {root} "
                                   f"(is its package extracted there?)")
        found.extend(paired)
    return found


def pair_key(source: str, target: str) -> str:
    return hashlib.sha256(f"{source}\t{target}".encode("utf-8")).hexdigest()[:16]


def read_pair_keys(path: str) -> set:
    """The keys of a --drop-pairs list (KEY<TAB>PAGE lines; # comments)."""
    keys = set()
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            key = line.split("\t")[0].strip()
            if not re.fullmatch(r"[0-9a-f]{16}", key):
                raise InputError(PROG, f"{path}, line {number}: expected a pair key (16 hex digits) first, got {key!r}")
            keys.add(key)
    return keys


def order_key(seed: int, page: str) -> str:
    return hashlib.sha256(f"{seed}:{page}".encode()).hexdigest()


class Row(NamedTuple):
    source: str
    target: str
    agrees: bool                   # the page-level alignment made the same pair
    source_parts: Tuple[str, ...]  # the sentences joined in each side (one each for a one-to-one bead)
    target_parts: Tuple[str, ...]


def read_page(path: str):
    from fairseq_rope_text.parallel_pages import page_blocks

    with open(path, "rb") as f:
        data = f.read()
    try:
        return page_blocks(data, path)
    except ValueError as error:
        raise InputError(PROG, str(error)) from None


def test_split(kind) -> str:
    return "test" if kind is None else f"test_{kind}"


def hold_out(pairs_of, source_of, kind_of, kinds, order, test_pairs: int, valid_pairs: int) -> Dict[str, str]:
    """Each page's split. Whole pages, in ``order``: for each kind's test set (test_KIND; one set, test,
    where the sources name no kind) and then the valid set, each source fills its share of the set with
    the pages that fit in what is left of it; then pages of any source that fit in what the set still
    lacks; the rest is training. ``pairs_of[page]``: the page's pairs that may be held out (duplicates
    count once). (A page larger than a set's quota is never held out.)"""
    split_of: Dict[str, str] = {}
    distinct: Dict[str, set] = {}

    def fill(split, pages, quota):
        taken = set()
        for page in pages:
            new = pairs_of[page] - distinct[split]
            if page in split_of or not new or len(taken) + len(new) > quota:
                continue
            split_of[page] = split
            taken |= new
            distinct[split] |= new

    plans = [(test_split(k), [p for p in order if kind_of[p] == k], test_pairs) for k in kinds]
    for split, pages, wanted in plans + [("valid", order, valid_pairs)]:
        distinct[split] = set()
        total = sum(len(pairs_of[p]) for p in pages)
        for source in dict.fromkeys(source_of[p] for p in pages):
            mine = [p for p in pages if source_of[p] == source]
            fill(split, mine, round(wanted * sum(len(pairs_of[p]) for p in mine) / max(total, 1)))
        fill(split, pages, wanted - len(distinct[split]))
    return {page: split_of.get(page, "train") for page in order}


def template_clusters(rows, threshold: float) -> List[int]:
    """Each row's cluster: the connected components of "a near copy of": two rows whose English or whose
    German, or one of the sentences joined in either, have word sets of Jaccard similarity >= ``threshold``
    (fairseq_rope_text.parallel_pages.similar_pairs)."""
    from fairseq_rope_text import parallel_pages as pp

    edges = []
    for side in ("source", "target"):
        owner, sets = [], []
        for k, row in enumerate(rows):
            texts = {getattr(row, side), *getattr(row, f"{side}_parts")}
            owner += [k] * len(texts)
            sets += [pp.word_set(t) for t in texts]
        edges += [(owner[i], owner[j]) for i, j, _ in pp.similar_pairs(sets, threshold) if owner[i] != owner[j]]
    return pp.clusters(len(rows), edges)


OVERLAP_BANDS = (0.5, 0.6, 0.7, 0.8)


def overlap(held_out: List[str], docids: List[str], training: List[str], threshold: float = min(OVERLAP_BANDS)):
    """How close each held-out sentence comes to the training sentences, by source (the page id's first
    part) and in all: the share of held-out sentences whose most similar training sentence (Jaccard of
    word sets, parallel_pages.word_set) is at least each of OVERLAP_BANDS."""
    from fairseq_rope_text import parallel_pages as pp

    near = pp.nearest_similarity([pp.word_set(x) for x in held_out], [pp.word_set(x) for x in training], threshold)
    groups: Dict[str, List[float]] = {}
    for page, similarity in zip(docids, near):
        groups.setdefault(page.split("/")[0], []).append(similarity)
    groups["all"] = near
    return {name: {"sentences": len(values), **{f">={band}": round(sum(v >= band - 1e-9 for v in values) / len(values), 4)
                                                for band in OVERLAP_BANDS}}
            for name, values in groups.items() if values}


def measure_overlap(raw_dir: str, src: str):
    """``overlap`` of every held-out set in RAW_DIR (test, test_*, valid) against its training set."""
    from .common import read_lines

    train = os.path.join(raw_dir, f"train.{src}")
    if not os.path.isfile(train):
        raise InputError(PROG, f"{raw_dir}: no train.{src} (expected a corpus directory: train/valid/test.{src})")
    held = sorted(name[:-len(src) - 1] for name in os.listdir(raw_dir)
                  if name.endswith(f".{src}") and (name.startswith("test") or name == f"valid.{src}"))
    training = read_lines(train, PROG)
    result = {}
    for split in held:
        docids = os.path.join(raw_dir, f"{split}.docids")
        if not os.path.isfile(docids):
            raise InputError(PROG, f"{docids} not found: overlap reports by source, the first part of each page id")
        lines, ids = read_lines(os.path.join(raw_dir, f"{split}.{src}"), PROG), read_lines(docids, PROG)
        if len(lines) != len(ids):
            raise InputError(PROG, f"{docids}: {len(ids)} lines, {split}.{src} has {len(lines)}")
        result[split] = overlap(lines, ids, training)
    return result


WORD_OR_MARK = re.compile(r"\w+|[^\w\s]")


def aligner_tokens(line: str) -> str:
    return " ".join(WORD_OR_MARK.findall(line.casefold()))


def lexical_scores(source: List[str], target: List[str]) -> List[float]:
    """eflomal's score of each pair (forward and backward averaged; lower: a likelier translation)."""
    import tempfile

    import eflomal

    with tempfile.TemporaryDirectory() as tmp:
        fwd, rev = os.path.join(tmp, "fwd"), os.path.join(tmp, "rev")
        eflomal.Aligner().align(io.StringIO("".join(aligner_tokens(x) + "\n" for x in source)),
                                io.StringIO("".join(aligner_tokens(x) + "\n" for x in target)),
                                scores_filename_fwd=fwd, scores_filename_rev=rev)
        with open(fwd) as f, open(rev) as r:
            scores = [(float(a) + float(b)) / 2 for a, b in zip(f, r)]
    if len(scores) != len(source):
        raise InputError(PROG, f"eflomal scored {len(scores)} of {len(source)} pairs")
    return scores


def lexical(args):
    from .common import read_lines

    names = {name[:-len(args.src) - 1] for name in os.listdir(args.raw_dir) if name.endswith(f".{args.src}")}
    if "train" not in names:
        raise InputError(PROG, f"{args.raw_dir}: no train.{args.src} (expected a corpus directory)")
    tests = sorted(name for name in names if name.startswith("test_")) or sorted(names & {"test"})
    report_path = os.path.join(args.raw_dir, "report.json")
    if os.path.isfile(report_path):  # the test sets in the order test.* has them
        with open(report_path, encoding="utf-8") as f:
            starts = json.load(f).get("test_lines", {})
        tests.sort(key=lambda split: (starts.get(split, float("inf")), split))
    splits = ["train"] + sorted(names & {"valid"}) + tests  # test.* is the test_* sets together: scored once
    rows = []  # (split, line, page, source, target)
    for split in splits:
        src, tgt = (read_lines(os.path.join(args.raw_dir, f"{split}.{lang}"), PROG) for lang in (args.src, args.tgt))
        docids_path = os.path.join(args.raw_dir, f"{split}.docids")
        docids = read_lines(docids_path, PROG) if os.path.isfile(docids_path) else ["-"] * len(src)
        if not len(src) == len(tgt) == len(docids):
            raise InputError(PROG, f"{args.raw_dir}/{split}: {len(src)} {args.src}, {len(tgt)} {args.tgt} and "
                                   f"{len(docids)} docids lines")
        rows += [(split, k + 1, page, s, t) for k, (s, t, page) in enumerate(zip(src, tgt, docids))]
    if len(rows) < 2:
        raise InputError(PROG, f"{args.raw_dir}: {len(rows)} pair(s); the controls pair one pair's English with "
                               f"another's German, so at least two are needed")
    rng = random.Random(args.seed)
    controls = []
    for _ in range(args.controls):
        a, b = rng.sample(range(len(rows)), 2)
        controls.append((rows[a][3], rows[b][4]))
    log(f"eflomal: scoring {len(rows)} pairs and {len(controls)} mismatched controls")
    scores = lexical_scores([r[3] for r in rows] + [c[0] for c in controls], [r[4] for r in rows] + [c[1] for c in controls])
    pair_scores, control_scores = scores[:len(rows)], sorted(scores[len(rows):])
    threshold = control_scores[min(len(control_scores) - 1, int(args.control_quantile * len(control_scores)))]
    flagged = [score >= threshold for score in pair_scores]
    by: Dict[str, Dict[str, List[bool]]] = {}
    for (split, _, page, _, _), flag in zip(rows, flagged):
        for source in (page.split("/")[0], "all"):
            by.setdefault(split, {}).setdefault(source, []).append(flag)
    report = {"aligner": "eflomal (model 3), trained on these pairs and the controls; score: mean of forward and "
                         "backward per-word negative log-probability",
              "controls": len(controls), "control_quantile": args.control_quantile, "threshold": round(threshold, 4),
              "flagged": {split: {source: {"pairs": len(v), "flagged": round(sum(v) / len(v), 4)}
                                  for source, v in sources.items()} for split, sources in by.items()}}
    write_json(os.path.join(args.raw_dir, "lexical.json"), report)
    drawn = list(range(len(rows)))
    rng.shuffle(drawn)
    chosen = [k for k in drawn if flagged[k]][:args.sample] + [k for k in drawn if not flagged[k]][:args.sample]
    rng.shuffle(chosen)
    with atomic_output(os.path.join(args.raw_dir, "lexical_sample.tsv")) as f:
        f.write("split\tline\tpage\tscore\tflagged\tsource\ttarget\n")
        for k in chosen:
            split, line, page, s, t = rows[k]
            f.write(f"{split}\t{line}\t{page}\t{pair_scores[k]:.3f}\t{'yes' if flagged[k] else 'no'}\t{s}\t{t}\n")
    with atomic_output(os.path.join(args.raw_dir, "lexical_scores.tsv")) as f:
        f.write("split\tline\tscore\tflagged\n")
        for (split, line, *_), score, flag in zip(rows, pair_scores, flagged):
            f.write(f"{split}\t{line}\t{score:.4f}\t{'yes' if flag else 'no'}\n")
    if args.write_flagged:
        with atomic_output(args.write_flagged) as f:
            f.write(f"# pairs flagged by fairseq-rope-corpus lexical (eflomal; threshold {threshold:.4f}, the "
                    f"{args.control_quantile} quantile of {len(controls)} mismatched controls): KEY<TAB>PAGE\n")
            for key, page in sorted({(pair_key(r[3], r[4]), r[2]) for r, flag in zip(rows, flagged) if flag}):
                f.write(f"{key}\t{page}\n")
    if args.drop_flagged:
        drop_flagged(args, splits, rows, flagged)
    return report


def drop_flagged(args, splits, rows, flagged):
    """The corpus in RAW_DIR written again without the flagged pairs (see the module's docstring)."""
    kept: Dict[str, List[tuple]] = {split: [] for split in splits}
    for row, flag in zip(rows, flagged):
        if not flag:
            kept[row[0]].append(row)
    written = dict(kept)
    tests = [split for split in splits if split.startswith("test_")]
    if tests:
        written["test"] = [row for split in tests for row in kept[split]]
    has_docids = {split: os.path.isfile(os.path.join(args.raw_dir, f"{split}.docids")) for split in splits}
    has_docids["test"] = all(has_docids[split] for split in tests)
    for split, split_rows in written.items():
        for suffix, column in ((args.src, 3), (args.tgt, 4)) + ((("docids", 2),) if has_docids[split] else ()):
            write_lines(os.path.join(args.raw_dir, f"{split}.{suffix}"), [row[column] for row in split_rows])
    report_path = os.path.join(args.raw_dir, "report.json")
    if os.path.isfile(report_path):
        with open(report_path, encoding="utf-8") as f:
            report = json.load(f)
        report["dropped"]["lexical"] = sum(flagged)
        report["pairs"] = {split: len(kept[split]) for split in splits}
        if tests:
            report["test_lines"] = dict(zip(tests, itertools.accumulate((len(kept[s]) for s in tests), initial=0)))
        for stats in report["sources"].values():
            for split in splits:
                stats[split] = 0
        for split, split_rows in kept.items():
            for row in split_rows:
                if row[2].split("/")[0] in report["sources"]:
                    report["sources"][row[2].split("/")[0]][split] += 1
        report["pages"] = {split: len({row[2] for row in kept[split]}) for split in splits}
        for stats in report["sources"].values():
            stats["kept"] = sum(stats[split] for split in splits)
        write_json(report_path, report)
    log(f"dropped the {sum(flagged)} flagged pairs: " + ", ".join(f"{s} {len(kept[s])} pairs" for s in splits))


def build(args):
    from fairseq_rope_text import parallel_pages as pp

    pages = pages_of(args.root, read_sources(args.sources))
    flt = pp.Filter(args.min_words, args.max_ratio, args.max_code_share)
    listed = read_pair_keys(args.drop_pairs) if args.drop_pairs else set()
    kept: Dict[str, List[Row]] = {}
    source_of: Dict[str, str] = {}
    kind_of: Dict[str, object] = {}
    by_source: Dict[str, dict] = {}
    dropped: Dict[str, int] = {}  # pairs not kept, by reason
    made = agreeing = 0
    for k, (source, page, en, de, kind) in enumerate(pages, 1):
        en_blocks, de_blocks = read_page(en), read_page(de)
        aligned = pp.page_pairs(en_blocks, de_blocks, args.src, args.tgt)
        other = set(pp.page_level_pairs(aligned))
        stats = by_source.setdefault(source, {"kind": kind, "pages": 0, "paragraphs": [0, 0], "paired_paragraphs": 0,
                                              "sentence_pairs": 0, "kept": 0, "train": 0, "valid": 0})
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
            why = flt.reason(src, tgt, code) or ("listed" if listed and pair_key(src, tgt) in listed else None)
            if why:
                dropped[why] = dropped.get(why, 0) + 1
                continue
            rows.append(Row(src, tgt, agrees, tuple(aligned.source_sentences[i] for i in bead[0]),
                            tuple(aligned.target_sentences[i] for i in bead[1])))
        kept[page] = rows
        source_of[page] = source
        kind_of[page] = kind
        if k % 50 == 0 or k == len(pages):
            log(f"{k}/{len(pages)} pages read")

    # near copies: a cluster on one page, or of at most --max-cluster rows, may be held out (its rows on
    # the other splits' pages are then dropped); a larger one spread over pages is a template: its rows
    # stay in training, also those of a held-out page
    order = sorted(kept, key=lambda page: order_key(args.seed, page))
    flat = [(page, row) for page in order for row in kept[page]]
    log(f"near copies: word-set Jaccard >= {args.similarity} among {len(flat)} pairs")
    cluster = template_clusters([row for _, row in flat], args.similarity)
    members: Dict[int, List[int]] = {}
    for k, c in enumerate(cluster):
        members.setdefault(c, []).append(k)
    movable = {c for c, ks in members.items() if len(ks) <= args.max_cluster or len({flat[k][0] for k in ks}) == 1}
    pairs_of = {page: set() for page in order}
    for k, (page, row) in enumerate(flat):
        if cluster[k] in movable:
            pairs_of[page].add((row.source, row.target))
    kinds = list(dict.fromkeys(kind for *_, kind in pages))  # in the order of the sources
    split_of = hold_out(pairs_of, source_of, kind_of, kinds, order, args.test_pairs, args.valid_pairs)
    test_splits = [test_split(k) for k in kinds]
    splits = test_splits + ["valid", "train"]
    # a row's split: its page's, if its cluster may be held out, else training; then every cluster keeps its
    # rows in the first of its splits in the order test sets, valid, train, and loses the others
    row_split = [split_of[page] if cluster[k] in movable else "train" for k, (page, _) in enumerate(flat)]
    rank = {split: i for i, split in enumerate(splits)}
    home: Dict[int, str] = {}
    for k, split in enumerate(row_split):
        if cluster[k] not in home or rank[split] < rank[home[cluster[k]]]:
            home[cluster[k]] = split
    out = {s: ([], [], [], []) for s in splits}  # src, tgt, docid, agrees
    dropped.update(duplicate=0, near_copy_of_held_out=0)
    moved = 0  # template pairs of held-out pages, kept in training
    seen = {s: set() for s in splits}
    for k, (page, row) in enumerate(flat):
        split = row_split[k]
        if split_of[page] != "train" and split == "train":
            moved += 1
        if home[cluster[k]] != split:
            dropped["near_copy_of_held_out"] += 1
            continue
        if (row.source, row.target) in seen[split]:
            dropped["duplicate"] += 1
            continue
        seen[split].add((row.source, row.target))
        for values, value in zip(out[split], (row.source, row.target, page, row.agrees)):
            values.append(value)
        by_source[source_of[page]][split] = by_source[source_of[page]].get(split, 0) + 1
    for stats in by_source.values():
        stats["kept"] = sum(stats.get(split, 0) for split in splits)
    for split in splits:
        if not out[split][0]:
            raise InputError(PROG, f"the {split} set is empty: {len(flat)} pairs in all; lower --test-pairs/"
                                   f"--valid-pairs or add sources")

    disagreements = {"length": 0, "numbers": 0, "urls": 0}
    pairs_all = [(s, t) for split in splits for s, t in zip(out[split][0], out[split][1])]
    for s, t in pairs_all:
        why = pp.disagreement(s, t, 1.5)
        if why:
            disagreements[why] += 1
    tests = {split: out[split] for split in test_splits}
    test_all = [sum((list(tests[split][i]) for split in test_splits), []) for i in range(4)]
    rng = random.Random(args.seed)
    sample = rng.sample(range(len(test_all[0])), min(args.sample, len(test_all[0])))
    sizes = [c for c, ks in members.items() if len(ks) > 1]
    report = {
        "sources": by_source,
        "pairs": {s: len(out[s][0]) for s in splits},
        "pages": {s: len(set(out[s][2])) for s in splits},
        "test_lines": dict(zip(test_splits, itertools.accumulate((len(tests[s][0]) for s in test_splits), initial=0))),
        "dropped": dropped,
        "near_copies": {
            "rule": f"word-set Jaccard >= {args.similarity} (English or German side, or a sentence joined in one)",
            "clusters_of_two_or_more": len(sizes),
            "largest_cluster": max((len(members[c]) for c in sizes), default=1),
            "template_pairs_of_held_out_pages_kept_in_training": moved,
            "held_out_to_training": {split: overlap(out[split][0], out[split][2], out["train"][0])
                                     for split in test_splits + ["valid"]},
            "test_to_valid": {split: overlap(out[split][0], out[split][2], out["valid"][0]) for split in test_splits},
        },
        "alignment": {
            "sentence_pairs": made,
            "also_made_by_gale_church_over_the_page": agreeing,
            "agreement": round(agreeing / max(made, 1), 4),
            "kept_pairs_agreement": {s: round(sum(out[s][3]) / len(out[s][3]), 4) for s in splits},
            "kept_pairs": len(pairs_all),
            "disagreeing_kept_pairs": disagreements,
        },
        "settings": {k: getattr(args, k) for k in ("src", "tgt", "test_pairs", "valid_pairs", "seed", "min_words",
                                                   "max_ratio", "max_code_share", "similarity", "max_cluster",
                                                   "drop_pairs")},
    }
    os.makedirs(args.out, exist_ok=True)
    written = dict(out, test=test_all) if test_splits != ["test"] else out
    for split, (src, tgt, docids, _) in written.items():
        write_lines(os.path.join(args.out, f"{split}.{args.src}"), src)
        write_lines(os.path.join(args.out, f"{split}.{args.tgt}"), tgt)
        write_lines(os.path.join(args.out, f"{split}.docids"), docids)
    with atomic_output(os.path.join(args.out, "alignment_sample.tsv")) as f:
        f.write("page\tpage_alignment_agrees\tdisagreement\tsource\ttarget\n")
        for i in sorted(sample):
            s, t = test_all[0][i], test_all[1][i]
            f.write(f"{test_all[2][i]}\t{'yes' if test_all[3][i] else 'no'}\t"
                    f"{pp.disagreement(s, t, 1.5) or '-'}\t{s}\t{t}\n")
    write_json(os.path.join(args.out, "report.json"), report)
    return report


def main(argv=None):
    ap = argument_parser(PROG, __doc__)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    p = sub.add_parser("extract", help="unpack a Debian package's files")
    p.add_argument("deb", metavar="PACKAGE.deb")
    p.add_argument("out_dir", metavar="DIR")
    p = sub.add_parser("overlap", help="how near each held-out sentence comes to the training sentences")
    p.add_argument("raw_dir", metavar="RAW_DIR")
    p.add_argument("--src", default="en")
    p = sub.add_parser("lexical", help="every pair scored by a word aligner trained on the corpus (eflomal)")
    p.add_argument("raw_dir", metavar="RAW_DIR")
    p.add_argument("--src", default="en")
    p.add_argument("--tgt", default="de")
    p.add_argument("--controls", type=int, default=2000, help="mismatched pairs scored beside the corpus")
    p.add_argument("--control-quantile", type=float, default=0.1,
                   help="a pair scoring at or above this quantile of the controls' scores is flagged")
    p.add_argument("--sample", type=int, default=100, help="flagged and unflagged pairs to read")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--drop-flagged", action="store_true", help="write the corpus again without the flagged pairs")
    p.add_argument("--write-flagged", metavar="FLAGGED.tsv", help="the flagged pairs' keys, for pages --drop-pairs")
    p = sub.add_parser("pages", help="the parallel corpus from English pages and their German translations")
    p.add_argument("--sources", required=True, metavar="SOURCES.tsv")
    p.add_argument("--root", required=True, metavar="DIR", help="where the packages are extracted")
    p.add_argument("--out", required=True, metavar="RAW_DIR")
    p.add_argument("--src", default="en")
    p.add_argument("--tgt", default="de")
    p.add_argument("--test-pairs", type=int, default=1200, help="pairs of each test set")
    p.add_argument("--valid-pairs", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--min-words", type=int, default=3)
    p.add_argument("--max-ratio", type=float, default=2.0)
    p.add_argument("--max-code-share", type=float, default=0.5)
    p.add_argument("--similarity", type=float, default=0.5,
                   help="near copies: word-set Jaccard similarity at or above which two sentences are one template")
    p.add_argument("--max-cluster", type=int, default=10,
                   help="a cluster of near copies spread over pages may be held out when it has at most this many "
                        "pairs (its copies elsewhere are dropped); a larger one stays in training")
    p.add_argument("--drop-pairs", metavar="FLAGGED.tsv",
                   help="pairs to leave out (counted as 'listed'): a list lexical --write-flagged wrote")
    p.add_argument("--sample", type=int, default=30, help="test pairs written to alignment_sample.tsv")
    args = ap.parse_args(argv)

    if args.cmd == "extract":
        if not os.path.isfile(args.deb):
            raise InputError(PROG, f"PACKAGE.deb not found: {args.deb}")
        n = extract(args.deb, args.out_dir)
        log(f"{args.deb}: {n} files extracted into {args.out_dir}")
        return 0
    if args.cmd == "lexical":
        if not os.path.isdir(args.raw_dir):
            raise InputError(PROG, f"RAW_DIR is not a directory: {args.raw_dir}")
        if args.controls < 1 or not 0 < args.control_quantile < 1 or args.sample < 0:
            raise InputError(PROG, f"--controls must be >= 1, --control-quantile in (0, 1), --sample >= 0; got "
                                   f"{args.controls}, {args.control_quantile}, {args.sample}")
        report = lexical(args)
        log(f"lexical check: threshold {report['threshold']}; flagged: " + ", ".join(
            f"{split} {v['all']['flagged']:.1%}" for split, v in report["flagged"].items()))
        return 0
    if args.cmd == "overlap":
        print(json.dumps(measure_overlap(args.raw_dir, args.src), indent=1))
        return 0
    for flag, value, low in (("--test-pairs", args.test_pairs, 1), ("--valid-pairs", args.valid_pairs, 1),
                             ("--min-words", args.min_words, 1), ("--sample", args.sample, 0)):
        if value < low:
            raise InputError(PROG, f"{flag} must be >= {low}, got {value}")
    if not 0 < args.similarity <= 1:
        raise InputError(PROG, f"--similarity must be in (0, 1], got {args.similarity}")
    if args.max_cluster < 1:
        raise InputError(PROG, f"--max-cluster must be >= 1, got {args.max_cluster}")
    if args.max_ratio < 1:
        raise InputError(PROG, f"--max-ratio must be >= 1, got {args.max_ratio}")
    if not 0 <= args.max_code_share <= 1:
        raise InputError(PROG, f"--max-code-share must be between 0 and 1, got {args.max_code_share}")
    if not os.path.isfile(args.sources):
        raise InputError(PROG, f"--sources not found: {args.sources}")
    if args.drop_pairs and not os.path.isfile(args.drop_pairs):
        raise InputError(PROG, f"--drop-pairs not found: {args.drop_pairs}")
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
