"""Documents as text: document ids, sentences joined with their context, ContraPro's decision rule.

A document-level example joins a sentence with up to ``k`` previous sentences of its own document,
on both sides, by one separator token (k-to-k; Tiedemann & Scherrer 2017, Junczys-Dowmunt 2019):

    source: s[i-k] <sep> ... <sep> s[i-1] <sep> s[i]
    target: t[i-k] <sep> ... <sep> t[i-1] <sep> t[i]

Documents are given by ids, one per sentence (a ``.docids`` file beside a text file, as
``sacrebleu --echo docid`` prints them for WMT test sets); a document's sentences are consecutive.
Only the standard library: the commands that read documents (fairseq-rope-prep, -score) start at
once; translation in context is fairseq_rope_translation.fairseq_engine, which reads this format from
here.
"""

from typing import Dict, List, Optional, Sequence, Tuple

SEPARATOR = "<sep>"


class DocumentError(ValueError):
    """Document ids that do not describe the text they belong to."""


def document_spans(docids: Sequence[str], where: str = "document ids") -> List[Tuple[int, int]]:
    """The ``[start, end)`` line ranges of the documents, in order. A document id that reappears
    after another document's is an error (its sentences would not be consecutive)."""
    spans, seen = [], set()
    for i, docid in enumerate(docids):
        if not docid:
            raise DocumentError(f"{where}: line {i + 1} has an empty document id")
        if i == 0 or docid != docids[i - 1]:
            if docid in seen:
                raise DocumentError(f"{where}: document id {docid!r} at line {i + 1} appeared before, "
                                    f"and another document lies between (a document's sentences must be consecutive)")
            seen.add(docid)
            spans.append((i, i + 1))
        else:
            spans[-1] = (spans[-1][0], i + 1)
    return spans


def read_documents(path: str, expected_lines: Optional[int] = None,
                   text: Optional[str] = None) -> Tuple[List[str], List[Tuple[int, int]]]:
    """The document ids of ``path``, one per line, and their documents' spans (document_spans);
    ``expected_lines`` (the lines of ``text``) must match."""
    with open(path, encoding="utf-8") as f:
        docids = [line.strip() for line in f]
    if expected_lines is not None and len(docids) != expected_lines:
        raise DocumentError(f"{path} has {len(docids)} document ids, but {text or 'its text'} has "
                            f"{expected_lines} lines: a .docids file holds one id per line of its text file")
    return docids, document_spans(docids, path)


def in_context(sentences: Sequence[str], spans: Sequence[Tuple[int, int]], k: int,
               separator: str = SEPARATOR) -> List[str]:
    """Each sentence joined with up to ``k`` previous sentences of its document (``spans``, as
    document_spans gives them; k = 0: as it is)."""
    out = []
    for start, end in spans:
        for i in range(start, end):
            out.append(f" {separator} ".join(sentences[max(start, i - k):i + 1]))
    return out


def without_padding(source_context: Sequence[str], target_context: Sequence[str]) -> Tuple[List[str], List[str]]:
    """The context sentences of a ContraPro line without the padding its context files begin with where a
    document has fewer previous sentences (json2text_and_context.pl writes empty lines there): leading
    pairs empty on both sides are no sentence. Any other empty line stays a sentence."""
    start = 0
    while start < min(len(source_context), len(target_context)) and not source_context[start].strip() \
            and not target_context[start].strip():
        start += 1
    return list(source_context[start:]), list(target_context[start:])


def distance_order(distances):
    """Antecedent distances as contrastive_accuracy names them ("0", "1", ..., ">3"), in order."""
    return sorted(distances, key=lambda d: (d == ">3", d))


def contrastive_accuracy(entries: Sequence[Dict], scores: Sequence[float]) -> Dict:
    """ContraPro's decision rule: an entry is correct when its reference translation scores higher
    (log-probability) than every one of its contrastive variants. ``scores`` holds, per entry, the
    reference's score followed by one per ``errors`` item (the order of ContraPro's text files).
    Returns counts and accuracy overall, by pronoun (``src pronoun:ref pronoun``, lowercased) and
    by antecedent distance (0, 1, 2, 3, >3)."""
    need = sum(1 + len(e["errors"]) for e in entries)
    if len(scores) != need:
        raise ValueError(f"{len(scores)} scores for {len(entries)} entries with {need} translations")

    def bucket():
        return {"correct": 0, "total": 0}

    result = {"total": bucket(), "by_pronoun": {}, "by_distance": {}}
    at = 0
    for entry in entries:
        reference, variants = scores[at], scores[at + 1:at + 1 + len(entry["errors"])]
        at += 1 + len(entry["errors"])
        correct = all(reference > v for v in variants)
        distance = entry["ante distance"]
        distance = ">3" if distance is not None and distance > 3 else str(distance)
        pronoun = f"{entry['src pronoun'].lower()}:{entry['ref pronoun'].lower()}"
        for table, key in ((result, "total"), (result["by_pronoun"], pronoun), (result["by_distance"], distance)):
            table.setdefault(key, bucket())
            table[key]["total"] += 1
            table[key]["correct"] += int(correct)
    for counts in [result["total"], *result["by_pronoun"].values(), *result["by_distance"].values()]:
        counts["accuracy"] = counts["correct"] / counts["total"]
    return result
