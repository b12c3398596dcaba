"""fairseq-rope-prep: the WMT14 recipe's text preparation, one subcommand per step.

    fairseq-rope-prep tokenize   --lang en -i IN [IN ...] -o OUT [OUT ...] [--workers N]
    fairseq-rope-prep detokenize --lang de -i IN [IN ...] -o OUT [OUT ...] [--workers N]
    fairseq-rope-prep clean      --src A.en --tgt A.de --out-src B.en --out-tgt B.de [--min 1] [--max 250] [--ratio 1.5]
    fairseq-rope-prep sgm        IN.sgm OUT.txt [--docids OUT.docids]
    fairseq-rope-prep spm-train  --inputs A.en A.de --model-prefix PREFIX [--vocab-size 37000] [--model-type unigram|bpe]
    fairseq-rope-prep subwords   --record DATA_BIN --lang en -i IN [IN ...] -o OUT [OUT ...] [--workers N]
    fairseq-rope-prep record     --dir DATA_BIN --source-lang en --target-lang de --pretokenizer moses|none
                                 [--bpe-codes CODES [--bpe-vocabulary VOCAB.en VOCAB.de --bpe-vocabulary-threshold 50]
                                  | --sentencepiece-model SPM.model] [--context K]
    fairseq-rope-prep concat-pairs --src A.en --tgt A.de --out-src B.en --out-tgt B.de -k 2 [--order consecutive|random]
    fairseq-rope-prep context    --src A.en --tgt A.de --docids A.docids --out-src B.en --out-tgt B.de -k 3 [--keep-sentences]

tokenize = the three Moses steps of fairseq's WMT14 recipe on every line: normalize-punctuation.perl,
remove-non-printing-char.perl, tokenizer.perl -a, i.e. sacremoses MosesPunctNormalizer (with its
unicode-punctuation pre-replacement and control-character removal) and
MosesTokenizer(aggressive_dash_splits=True, escape=False). escape=False keeps "&" and "<" as they
are (the Moses CLI would write &amp; and &lt;, which then end up in BPE codes and hypotheses).
Lines are processed in order-preserving chunks by a multiprocessing pool; several files (-i and -o
in the same order) by one pool, whose workers set up sacremoses once. detokenize is its
inverse (joins "@-@" splits, attaches punctuation; no unescaping).

clean drops sentence pairs by length and length ratio, like Moses' clean-corpus-n.perl; ours
because sacremoses has none and Moses is a Perl toolkit. Per line pair (tokens = words split on
whitespace): leading/trailing whitespace is stripped and inner runs become one space; the pair is
dropped when either side has fewer than --min or more than --max tokens, when
len(longer)/len(shorter) > --ratio, or when a token is longer than --max-word-length characters.
Unlike the Perl script: no factored-corpus handling ("|" is kept), no lowercasing. Both inputs
must have the same number of lines; output keeps input order.

sgm extracts the segments of a WMT "SGML" test file (newstest*.sgm), one per line: each line that
starts with "<seg " has its <seg ...>text</seg> element replaced by its text, is stripped and has
runs of whitespace collapsed, the rule sacrebleu applies to the same files (so the references
equal ``sacrebleu -t wmt14/full -l en-de --echo ref``); entities are left as they are. With
--docids, the docid attribute of each segment's <doc> is written beside, one per line (the ids
``sacrebleu --echo docid`` prints).

subwords applies the subword step of a preprocessing record (fairseq_rope_text.preprocessing: subword-nmt
codes with the vocabulary filter of --lang, or a sentencepiece model) to pretokenized text; record writes
that record, DIR/preprocessing.json, and copies the files it names into DIR. prepare.sh makes its text
with tokenize and subwords and records them in the data-bin, which every way into the model reads.

spm-train: a joint sentencepiece model for the recipe's TOKENIZER=spm variant, with the
sentencepiece Python API (its PyPI package has no spm_* commands), trained on the pretokenized text
of both languages; subwords then writes its space-separated pieces, which fairseq turns back into
tokenized text with ``--remove-bpe sentencepiece``.

concat-pairs writes every training pair, then concatenations of k pairs (Varis & Bojar, EMNLP
2021: longer training examples made from short ones, so that a model sees long inputs): pairs
1..k, k+1..2k, ... of the input order (--order consecutive) or of a permutation drawn with --seed
(--order random), the k sources joined by one space and the k targets likewise. With N pairs that
is N + floor(N / k) lines; the last N mod k pairs appear only on their own (said on stderr).

context writes each pair with up to k previous pairs of its document on both sides, joined by
" <sep> " (k-to-k; documents from --docids, one id per line, a document's lines consecutive);
--keep-sentences also writes every pair that had context on its own, after them. clean takes
--docids/--out-docids to keep the ids of the pairs it keeps.

Every output is written to a temporary file and renamed when complete, so an interrupted run
never leaves a partial file under its final name.
"""

import collections
import multiprocessing
import os
import re
import sys
from functools import lru_cache

from fairseq_rope_text import preprocessing
from fairseq_rope_text.documents import SEPARATOR, DocumentError, document_spans, in_context
from fairseq_rope_text.preprocessing import PreprocessingError, moses_detokenize, moses_tokenize

from .common import InputError, argument_parser, atomic_output, check_output_file, count_lines, decode_lines, documents_argument, write_lines

PROG = "fairseq-rope-prep"

CHUNK = 2000


def _work(job):
    mode, lang, lines, record = job
    if mode == "tokenize":
        return [moses_tokenize(line, lang) for line in lines]
    if mode == "detokenize":
        return [moses_detokenize(line, lang) for line in lines]
    pre = _read_record(record)  # subwords: the record's own step
    return [pre.split(line, lang) for line in lines]


@lru_cache(maxsize=None)
def _read_record(path):
    """The record, read once per worker process (not once per chunk of lines)."""
    return preprocessing.read(path)


def _chunks(path, mode, lang, record):
    with open(path, encoding="utf-8", newline="\n") as f:
        buf = []
        for line in f:
            buf.append(line.rstrip("\n"))
            if len(buf) == CHUNK:
                yield mode, lang, buf, record
                buf = []
        if buf:
            yield mode, lang, buf, record


def process_files(mode, lang, pairs, workers=1, record=None):
    """Applies tokenize, detokenize or (with a ``record``) subwords to every line of each ``src`` of
    ``pairs`` [(src, dst)], in order, with one pool of ``workers`` processes for all of them (each sets
    up its tokenizer or subword model once); writes each ``dst`` atomically; yields, as each is written,
    (src, dst, its number of lines, the numbers of its lines that came out empty)."""
    for src, _ in pairs:  # first, so that bytes that are not UTF-8 are named, not a traceback
        for _ in decode_lines(src, PROG):
            pass
    pool = multiprocessing.Pool(workers) if workers > 1 else None
    try:
        for src, dst in pairs:
            n, empty = 0, []
            jobs = _chunks(src, mode, lang, record)
            with atomic_output(dst) as out:
                for lines in (pool.imap(_work, jobs) if pool is not None else map(_work, jobs)):
                    for line in lines:
                        out.write(line + "\n")
                        n += 1
                        if not line:
                            empty.append(n)
                    if n % (CHUNK * 100) == 0:
                        print(f"[{PROG} {mode}] {src}: {n} lines", file=sys.stderr, flush=True)
            yield src, dst, n, empty
    finally:
        if pool is not None:
            pool.close()
            pool.join()


def drop_reason(src_tokens, tgt_tokens, min_len=1, max_len=250, ratio=1.5, max_word_length=1000):
    """Why the clean-corpus-n rules remove a pair of token lists, or None if it stays."""
    ns, nt = len(src_tokens), len(tgt_tokens)
    if ns == 0 or nt == 0:  # --min 0 still cannot keep an empty side
        return "an empty side"
    if ns < min_len or nt < min_len or ns > max_len or nt > max_len:
        return f"a side outside {min_len}-{max_len} tokens"
    if ns / nt > ratio or nt / ns > ratio:
        return f"a length ratio over {ratio:g}"
    if not all(len(tok) <= max_word_length for tok in src_tokens + tgt_tokens):
        return f"a token over {max_word_length} characters"
    return None


def keep_pair(*args, **kwargs):
    """True if the pair stays (see drop_reason)."""
    return drop_reason(*args, **kwargs) is None


SEG = re.compile(r"<seg[^>]*>(.*)</seg>")


DOC = re.compile(r'<doc\b[^>]*\bdocid="([^"]*)"')


def segments(lines):
    """(text, docid of its <doc>, or None) of each <seg> line."""
    docid = None
    for line in lines:
        if line.startswith("<doc"):
            match = DOC.match(line)
            docid = match.group(1) if match else None
        elif line.startswith("<seg "):
            yield re.sub(r"\s+", " ", SEG.sub(r"\1", line).strip()), docid


def need_file(path, flag):
    if not os.path.isfile(path):
        raise InputError(PROG, f"{flag} file not found: {path}")


def same_length(src, tgt):
    """The line count of two parallel files; an error naming both counts when they differ."""
    n_src, n_tgt = count_lines(src), count_lines(tgt)
    if n_src != n_tgt:
        raise InputError(PROG, f"parallel files differ in length: {src} has {n_src} lines, {tgt} has {n_tgt} lines")
    return n_src


def add_parallel_files(parser, src_help, tgt_help):
    """--src, --tgt (the inputs) and --out-src, --out-tgt of a subcommand on sentence pairs."""
    parser.add_argument("--src", required=True, help=src_help)
    parser.add_argument("--tgt", required=True, help=tgt_help)
    parser.add_argument("--out-src", required=True)
    parser.add_argument("--out-tgt", required=True)


def add_line_files(parser, input_help):
    """-i, -o and --workers of a subcommand that processes text files line by line (process_files)."""
    parser.add_argument("-i", "--input", required=True, nargs="+", metavar="IN",
                        help=f"{input_help}; several: each to the -o in the same place")
    parser.add_argument("-o", "--output", required=True, nargs="+", metavar="OUT",
                        help="output file (written atomically), one per -i")
    parser.add_argument("--workers", type=int, default=1, help="processes (default: %(default)s)")


def check_line_files(args):
    """add_line_files' options: an output for each input, the inputs exist, no output is an input or
    named twice, at least one worker. Returns [(input, output)]."""
    if len(args.input) != len(args.output):
        raise InputError(PROG, f"-o needs a file for each of the {len(args.input)} -i files, got {len(args.output)}")
    for path in args.input:
        need_file(path, "-i")
    inputs = {os.path.abspath(path) for path in args.input}
    seen = set()
    for path in args.output:
        if os.path.abspath(path) in inputs:
            raise InputError(PROG, f"-o must differ from -i ({path})")
        if os.path.abspath(path) in seen:
            raise InputError(PROG, f"-o names {path} twice")
        seen.add(os.path.abspath(path))
    if args.workers < 1:
        raise InputError(PROG, f"--workers must be >= 1, got {args.workers}")
    return list(zip(args.input, args.output))


def run_moses(args):
    for src, dst, n, empty in process_files(args.cmd, args.lang, check_line_files(args), args.workers):
        note = (f" ({len(empty)} empty, kept so that lines stay aligned: line {', '.join(map(str, empty[:5]))}"
                f"{', ...' if len(empty) > 5 else ''})") if empty else ""
        print(f"[{PROG} {args.cmd}] ({args.lang}) {src} -> {dst}: {n} lines{note}", file=sys.stderr)


def run_clean(args):
    need_file(args.src, "--src")
    need_file(args.tgt, "--tgt")
    if args.min < 0 or args.max < max(args.min, 1):
        raise InputError(PROG, f"need 0 <= --min <= --max and --max >= 1, got --min {args.min} --max {args.max}")
    if not args.ratio >= 1:
        raise InputError(PROG, f"--ratio must be >= 1, got {args.ratio}")
    n_src = same_length(args.src, args.tgt)
    if bool(args.docids) != bool(args.out_docids):
        raise InputError(PROG, "--docids and --out-docids go together")
    docids = documents_argument(PROG, "--docids", args.docids, n_src, args.src)[0] if args.docids else None
    kept, removed, kept_ids = 0, collections.Counter(), []
    with atomic_output(args.out_src) as out_src, atomic_output(args.out_tgt) as out_tgt:
        for i, (s, t) in enumerate(zip(decode_lines(args.src, PROG), decode_lines(args.tgt, PROG))):
            s_tok, t_tok = s.split(), t.split()
            reason = drop_reason(s_tok, t_tok, args.min, args.max, args.ratio, args.max_word_length)
            if reason is None:
                out_src.write(" ".join(s_tok) + "\n")
                out_tgt.write(" ".join(t_tok) + "\n")
                kept += 1
                if docids:
                    kept_ids.append(docids[i])
            else:
                removed[reason] += 1
    if docids:
        write_lines(args.out_docids, kept_ids)
    why = "; removed: " + ", ".join(f"{n} with {reason}" for reason, n in removed.most_common()) if removed else ""
    print(f"[{PROG} clean] {args.src} / {args.tgt}: kept {kept} of {n_src} pairs "
          f"(tokens {args.min}-{args.max}, ratio <= {args.ratio:g}){why} -> {args.out_src}, {args.out_tgt}",
          file=sys.stderr)


def run_sgm(args):
    need_file(args.input, "IN.sgm")
    with open(args.input, encoding="utf-8") as fin:
        texts, docids = [], []
        for text, docid in segments(fin):
            texts.append(text)
            docids.append(docid)
    if not texts:
        raise InputError(PROG, f"no <seg> lines in {args.input}: is it a WMT .sgm file?")
    if args.docids:
        if None in docids:
            raise InputError(PROG, f"{args.input}: segment {docids.index(None) + 1} is in no <doc docid=...>")
        try:
            document_spans(docids, args.input)
        except DocumentError as error:
            raise InputError(PROG, str(error)) from None
        write_lines(args.docids, docids)
    with atomic_output(args.output) as fout:
        fout.writelines(text + "\n" for text in texts)
    print(f"[{PROG} sgm] {args.input} -> {args.output}: {len(texts)} segments", file=sys.stderr)


def run_spm_train(args):
    import sentencepiece as spm

    for path in args.inputs:
        need_file(path, "--inputs")
    if args.vocab_size < 8:
        raise InputError(PROG, f"--vocab-size must be >= 8, got {args.vocab_size}")
    tmp_prefix = args.model_prefix + ".tmp"
    try:
        spm.SentencePieceTrainer.train(
            input=",".join(args.inputs),
            model_prefix=tmp_prefix,
            vocab_size=args.vocab_size,
            model_type=args.model_type,
            character_coverage=1.0,
            input_sentence_size=args.input_sentence_size,
            shuffle_input_sentence=True,
            # fairseq adds its own <s>, </s>, <pad>; keep only <unk> in the sentencepiece vocabulary
            bos_id=-1,
            eos_id=-1,
            unk_id=0,
            num_threads=args.threads,
            seed_sentencepiece_size=1000000,
            hard_vocab_limit=not args.soft_vocab_limit,
            minloglevel=1,
        )
    except RuntimeError as error:  # sentencepiece's own check, e.g. a vocabulary too large for the text
        message = " ".join(str(error).split()).split("] ", 1)[-1]
        raise InputError(PROG, f"spm-train: sentencepiece: {message}"
                         f"{' (or --soft-vocab-limit)' if 'Vocabulary size' in message else ''}") from None
    for ext in ("model", "vocab"):
        os.replace(f"{tmp_prefix}.{ext}", f"{args.model_prefix}.{ext}")
    print(f"[{PROG} spm-train] {args.model_type} model, vocab {args.vocab_size}: {args.model_prefix}.model",
          file=sys.stderr)


def run_subwords(args):
    pairs = check_line_files(args)
    try:
        record = preprocessing.read(args.record)
        record.split("", args.lang)  # a language the record has no vocabulary for is named now
    except PreprocessingError as error:
        raise InputError(PROG, str(error)) from None
    for src, dst, n, _ in process_files("subwords", args.lang, pairs, args.workers, record.origin):
        print(f"[{PROG} subwords] ({args.lang}) {src} -> {dst}: {n} lines; {record.describe()}", file=sys.stderr)


def run_record(args):
    for flag, path in (("--bpe-codes", args.bpe_codes), ("--sentencepiece-model", args.sentencepiece_model),
                       *(("--bpe-vocabulary", p) for p in args.bpe_vocabulary or [])):
        if path:
            need_file(path, flag)
    if args.bpe_vocabulary and not args.bpe_codes:
        raise InputError(PROG, "--bpe-vocabulary goes with --bpe-codes")
    if bool(args.bpe_vocabulary) != (args.bpe_vocabulary_threshold is not None):
        raise InputError(PROG, "--bpe-vocabulary and --bpe-vocabulary-threshold go together")
    if args.context < 0:
        raise InputError(PROG, f"--context must be >= 0, got {args.context}")
    subword = "subword_nmt" if args.bpe_codes else "sentencepiece" if args.sentencepiece_model else "none"
    vocabulary = dict(zip((args.source_lang, args.target_lang), map(os.path.abspath, args.bpe_vocabulary or [])))
    try:
        record = preprocessing.Preprocessing(
            source_lang=args.source_lang, target_lang=args.target_lang, pretokenizer=args.pretokenizer,
            subword=subword, codes=args.bpe_codes and os.path.abspath(args.bpe_codes), vocabulary=vocabulary,
            vocabulary_threshold=args.bpe_vocabulary_threshold,
            sentencepiece_model=args.sentencepiece_model and os.path.abspath(args.sentencepiece_model),
            context=args.context, origin="fairseq-rope-prep record")
        out = record.write(args.dir, force=args.force)
    except PreprocessingError as error:
        raise InputError(PROG, str(error)) from None
    print(f"[{PROG} record] {out}: {record.describe()}", file=sys.stderr)


def concatenated_pairs(pairs, k, order="consecutive", seed=1):
    """The pairs, then each group of ``k`` of them (in input order, or in a permutation drawn with
    ``seed``) joined by one space on each side; a trailing group of fewer than k is not joined."""
    import random

    index = list(range(len(pairs)))
    if order == "random":
        random.Random(seed).shuffle(index)
    groups = [index[i:i + k] for i in range(0, len(index) - k + 1, k)]
    joined = [(" ".join(pairs[i][0] for i in g), " ".join(pairs[i][1] for i in g)) for g in groups]
    return list(pairs) + joined


def run_concat_pairs(args):
    need_file(args.src, "--src")
    need_file(args.tgt, "--tgt")
    if args.k < 2:
        raise InputError(PROG, f"-k must be >= 2 (pairs per concatenation), got {args.k}")
    same_length(args.src, args.tgt)
    sources, targets = list(decode_lines(args.src, PROG)), list(decode_lines(args.tgt, PROG))
    out = concatenated_pairs(list(zip(sources, targets)), args.k, args.order, args.seed)
    with atomic_output(args.out_src) as out_src, atomic_output(args.out_tgt) as out_tgt:
        for s, t in out:
            out_src.write(s + "\n")
            out_tgt.write(t + "\n")
    rest = len(sources) % args.k
    note = f"; the last {rest} pair(s) of the {args.order} order only on their own" if rest else ""
    print(f"[{PROG} concat-pairs] {args.src} / {args.tgt}: {len(sources)} pairs + {len(out) - len(sources)} "
          f"concatenations of {args.k} ({args.order}{', seed %d' % args.seed if args.order == 'random' else ''})"
          f"{note} -> {args.out_src}, {args.out_tgt}", file=sys.stderr)


def run_context(args):
    need_file(args.src, "--src")
    need_file(args.tgt, "--tgt")
    if args.k < 1:
        raise InputError(PROG, f"-k must be >= 1 (previous sentences of context), got {args.k}")
    n = same_length(args.src, args.tgt)
    _, spans = documents_argument(PROG, "--docids", args.docids, n, args.src)
    sources, targets = list(decode_lines(args.src, PROG)), list(decode_lines(args.tgt, PROG))
    for side, lines in (("--src", sources), ("--tgt", targets)):
        for i, line in enumerate(lines):
            if SEPARATOR in line.split():
                raise InputError(PROG, f"{side} line {i + 1} holds the separator token {SEPARATOR!r} itself")
    src_out, tgt_out = in_context(sources, spans, args.k), in_context(targets, spans, args.k)
    firsts = {start for start, _ in spans}
    if args.keep_sentences:
        src_out += [s for i, s in enumerate(sources) if i not in firsts]
        tgt_out += [t for i, t in enumerate(targets) if i not in firsts]
    write_lines(args.out_src, src_out)
    write_lines(args.out_tgt, tgt_out)
    kept = f" + {n - len(spans)} pairs without context" if args.keep_sentences else ""
    print(f"[{PROG} context] {args.src} / {args.tgt}: {n} pairs in {len(spans)} documents, each with up to "
          f"{args.k} previous pairs of its document{kept} -> {args.out_src}, {args.out_tgt}", file=sys.stderr)


def main(argv=None):
    ap = argument_parser(PROG, __doc__)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for name, help in (("tokenize", "Moses normalisation + tokenization (-a), as fairseq's WMT14 recipe"),
                       ("detokenize", "Moses detokenization, the inverse of tokenize")):
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument("--lang", required=True, help="ISO code: en, de, ...")
        add_line_files(p, "text file, one sentence per line")
        p.set_defaults(run=run_moses)
    p = sub.add_parser("clean", help="drop pairs by length and length ratio (Moses clean-corpus-n)",
                       description="Drops sentence pairs by length and length ratio (Moses clean-corpus-n rules).")
    add_parallel_files(p, "source side, tokenized", "target side, tokenized, as many lines as --src")
    p.add_argument("--min", type=int, default=1, help="fewest tokens per side (default: %(default)s)")
    p.add_argument("--max", type=int, default=250, help="most tokens per side (default: %(default)s)")
    p.add_argument("--ratio", type=float, default=1.5, help="largest length ratio (default: %(default)s)")
    p.add_argument("--max-word-length", type=int, default=1000, help="longest token in characters (default: %(default)s)")
    p.add_argument("--docids", help="document ids of the input pairs, one per line")
    p.add_argument("--out-docids", help="writes the ids of the pairs kept")
    p.set_defaults(run=run_clean)
    p = sub.add_parser("sgm", help="segments of a WMT .sgm file as plain text",
                       description="Extracts the <seg> texts of a WMT .sgm file, one per line (sacrebleu's rule).")
    p.add_argument("input", metavar="IN.sgm")
    p.add_argument("output", metavar="OUT.txt")
    p.add_argument("--docids", metavar="OUT.docids", help="also write each segment's document id, one per line")
    p.set_defaults(run=run_sgm)
    p = sub.add_parser("spm-train", help="train a joint sentencepiece model",
                       description="Trains a joint sentencepiece model on the given tokenized files.")
    p.add_argument("--inputs", nargs="+", required=True, help="training text files (both languages)")
    p.add_argument("--model-prefix", required=True, help="writes PREFIX.model and PREFIX.vocab")
    p.add_argument("--vocab-size", type=int, default=37000, help="(default: %(default)s)")
    p.add_argument("--model-type", choices=["unigram", "bpe"], default="unigram", help="(default: %(default)s)")
    p.add_argument("--input-sentence-size", type=int, default=10000000,
                   help="sentences sampled for training, 0 = all (default: %(default)s)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="(default: all CPUs)")
    p.add_argument("--soft-vocab-limit", action="store_true",
                   help="allow a smaller vocabulary when the corpus is too small for --vocab-size")
    p.set_defaults(run=run_spm_train)
    p = sub.add_parser("subwords", help="apply a preprocessing record's subword model to tokenized text",
                       description="Splits every line into the subwords of a preprocessing record (its codes with "
                                   "the vocabulary filter of --lang, or its sentencepiece model).")
    p.add_argument("--record", required=True, help="a preprocessing.json, or the directory holding it")
    p.add_argument("--lang", required=True, help="the language of the text (its subword vocabulary)")
    add_line_files(p, "pretokenized text, one sentence per line")
    p.set_defaults(run=run_subwords)
    p = sub.add_parser("record", help="write a preprocessing record (preprocessing.json) and copy its files",
                       description="Writes DIR/preprocessing.json, the record every way into a model reads, and "
                                   "copies the files it names into DIR: what prepare.sh does for its data-bin, "
                                   "and how to add a record to a data-bin made without one.")
    p.add_argument("--dir", required=True, help="the data-bin (or any directory) to write the record into")
    p.add_argument("--source-lang", required=True)
    p.add_argument("--target-lang", required=True)
    p.add_argument("--pretokenizer", choices=preprocessing.PRETOKENIZERS, required=True,
                   help="prepare.sh's PRETOKENIZER: moses (normalize + tokenize -a, no escaping) or none")
    subword = p.add_mutually_exclusive_group()
    subword.add_argument("--bpe-codes", help="subword-nmt codes")
    subword.add_argument("--sentencepiece-model", help="sentencepiece model")
    p.add_argument("--bpe-vocabulary", nargs=2, metavar=("VOCAB.SRC", "VOCAB.TGT"),
                   help="subword-nmt vocabularies of the source and target training text (the filter)")
    p.add_argument("--bpe-vocabulary-threshold", type=int, help="subword-nmt --vocabulary-threshold")
    p.add_argument("--context", type=int, default=0,
                   help="sentences of context the data joins to each sentence (prepare.sh's CONTEXT; default 0)")
    p.add_argument("--force", action="store_true", help="replace a record or file with other content")
    p.set_defaults(run=run_record)
    p = sub.add_parser("concat-pairs", help="add concatenations of k training pairs",
                       description="Writes every pair, then concatenations of k pairs (consecutive or random).")
    add_parallel_files(p, "source side", "target side, as many lines as --src")
    p.add_argument("-k", type=int, required=True, help="pairs per concatenation (>= 2)")
    p.add_argument("--order", choices=["consecutive", "random"], default="consecutive",
                   help="which pairs are joined: consecutive lines, or a random permutation (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="seed of --order random (default: %(default)s)")
    p.set_defaults(run=run_concat_pairs)
    p = sub.add_parser("context", help="each pair with up to k previous pairs of its document",
                       description="Writes each pair joined with up to k previous pairs of its document "
                                   "(k-to-k, ' <sep> ' between sentences).")
    add_parallel_files(p, "source side", "target side, as many lines as --src")
    p.add_argument("--docids", required=True, help="document id of each line, one per line")
    p.add_argument("-k", type=int, required=True, help="previous sentences of context (>= 1)")
    p.add_argument("--keep-sentences", action="store_true",
                   help="also write every pair that had context on its own")
    p.set_defaults(run=run_context)
    args = ap.parse_args(argv)
    for name in ("output", "out_src", "out_tgt", "out_docids"):  # checked before the work starts
        flag = "OUT.txt" if args.cmd == "sgm" and name == "output" else "--" + name.replace("_", "-")
        paths = getattr(args, name, None)
        for path in paths if isinstance(paths, list) else [paths]:  # (-o of several files)
            check_output_file(PROG, flag, path)
    if args.cmd == "sgm":
        check_output_file(PROG, "--docids", args.docids)
    if args.cmd == "spm-train":
        check_output_file(PROG, "--model-prefix", args.model_prefix + ".model")
    args.run(args)


if __name__ == "__main__":
    main()
