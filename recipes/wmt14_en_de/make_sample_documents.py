#!/usr/bin/env python3
"""Generates a small English-German corpus of documents whose pronouns need the sentences before.

Each document is a few "episodes": a sentence introduces a thing (a table, a lamp, a book), then
0-2 sentences about people follow, then a sentence says something about the thing with "it". In
German "it" is er, sie or es, decided by the gender of the thing's noun (der Tisch -> er, die
Lampe -> sie, das Buch -> es), which only the sentence that introduced it shows: at antecedent
distance 0 (the same sentence: "..., and it was expensive."), 1, 2 or 3 sentences back, drawn
uniformly. Nothing else in the documents is a thing, so "it" always means the most recent one;
the three genders are drawn equally often, so a model without the context can only guess (about a
third right).

Written for this project from a seeded template grammar (no licence restrictions): the output is
byte-for-byte reproducible from the seed.

Usage: python recipes/wmt14_en_de/make_sample_documents.py --out-dir DIR [--seed 1]
           [--train-documents 3000] [--valid-documents 40] [--test-documents 120]
Writes DIR/{train,valid,test}.{en,de,docids} (one document id per sentence line) and the test
set's pronoun entries in ContraPro's format: DIR/pronouns.json (a list of entries with "src
pronoun", "ref pronoun", "ante distance", "document id", "segment id", "errors": [{"contrastive":
...}], ...), DIR/pronouns.text.{en,de} (for each entry its source and reference, then the source
and each contrastive translation) and DIR/pronouns.context.{en,de} (the 3 sentences before each
of those lines, oldest first, empty where the document has none), as ContraPro's
json2text_and_context.pl --context 3 writes them.
"""

import argparse
import json
import os
import random
import sys

from fairseq_rope_cli.common import atomic_output, write_lines

# things: English noun, German noun, gender
THINGS = [
    ("table", "Tisch", "m"), ("chair", "Stuhl", "m"), ("coat", "Mantel", "m"), ("key", "Schlüssel", "m"),
    ("letter", "Brief", "m"), ("ball", "Ball", "m"), ("computer", "Computer", "m"), ("suitcase", "Koffer", "m"),
    ("lamp", "Lampe", "f"), ("door", "Tür", "f"), ("bottle", "Flasche", "f"), ("bag", "Tasche", "f"),
    ("clock", "Uhr", "f"), ("cup", "Tasse", "f"), ("jacket", "Jacke", "f"), ("box", "Kiste", "f"),
    ("book", "Buch", "n"), ("picture", "Bild", "n"), ("bed", "Bett", "n"), ("car", "Auto", "n"),
    ("glass", "Glas", "n"), ("phone", "Telefon", "n"), ("bicycle", "Fahrrad", "n"), ("shirt", "Hemd", "n"),
]
PRONOUN = {"m": "er", "f": "sie", "n": "es"}
ARTICLE_ACC = {"m": ("einen", "den"), "f": ("eine", "die"), "n": ("ein", "das")}
ENDING_ACC = {"m": "en", "f": "e", "n": "es"}  # adjective after the indefinite article, accusative
ATTRIBUTIVE = [("old", "alt"), ("new", "neu"), ("small", "klein"), ("big", "groß"), ("red", "rot"),
               ("blue", "blau"), ("cheap", "billig"), ("beautiful", "schön")]
PREDICATIVE = [("expensive", "teuer"), ("broken", "kaputt"), ("very heavy", "sehr schwer"), ("too small", "zu klein"),
               ("dirty", "schmutzig"), ("clean", "sauber"), ("very old", "sehr alt"), ("too big", "zu groß")]
PLACES = [("in the garden", "im Garten"), ("in the kitchen", "in der Küche"), ("in the office", "im Büro"),
          ("in the school", "in der Schule"), ("in the shop", "im Laden"), ("in the hall", "im Flur")]
# people: English subject, German subject, German accusative
PEOPLE = [("My brother", "Mein Bruder", "meinen Bruder"), ("My sister", "Meine Schwester", "meine Schwester"),
          ("The teacher", "Der Lehrer", "den Lehrer"), ("The old woman", "Die alte Frau", "die alte Frau"),
          ("Our neighbour", "Unser Nachbar", "unseren Nachbarn"), ("Anna", "Anna", "Anna"), ("Tom", "Tom", "Tom"),
          ("The doctor", "Der Arzt", "den Arzt"), ("My father", "Mein Vater", "meinen Vater"),
          ("My mother", "Meine Mutter", "meine Mutter")]


def _object(rng, gender, noun):
    if rng.random() < 0.7:
        adj_en, adj_de = rng.choice(ATTRIBUTIVE)
        return f"a {adj_en} {{n}}", f"{ARTICLE_ACC[gender][0]} {adj_de}{ENDING_ACC[gender]} {noun}"
    return "the {n}", f"{ARTICLE_ACC[gender][1]} {noun}"


def antecedent(rng, thing):
    """A sentence introducing ``thing``, English and German, without the final full stop."""
    noun_en, noun_de, gender = thing
    who_en, who_de, _ = rng.choice(PEOPLE)
    obj_en, obj_de = _object(rng, gender, noun_de)
    obj_en = obj_en.format(n=noun_en)
    verb = rng.randrange(5)
    if verb == 0:
        return f"{who_en} bought {obj_en}", f"{who_de} kaufte {obj_de}"
    if verb == 1:
        place_en, place_de = rng.choice(PLACES)
        return f"{who_en} found {obj_en} {place_en}", f"{who_de} fand {obj_de} {place_de}"
    if verb == 2:
        return f"{who_en} saw {obj_en}", f"{who_de} sah {obj_de}"
    if verb == 3:
        return f"{who_en} wanted {obj_en}", f"{who_de} wollte {obj_de}"
    return f"{who_en} sold {obj_en}", f"{who_de} verkaufte {obj_de}"


def pronoun_sentence(rng):
    """A sentence about the thing with "it": English, and German with {P} (capitalised) or {p}."""
    adj_en, adj_de = rng.choice(PREDICATIVE)
    place_en, place_de = rng.choice(PLACES)
    return rng.choice([
        (f"It was {adj_en}.", f"{{P}} war {adj_de}."),
        (f"It is still {place_en}.", f"{{P}} ist noch {place_de}."),
        (f"Unfortunately it was {adj_en}.", f"Leider war {{p}} {adj_de}."),
        (f"I think it is {adj_en}.", f"Ich glaube, {{p}} ist {adj_de}."),
        ("It cost a lot of money.", "{P} kostete viel Geld."),
        (f"Yesterday it was {place_en}.", f"Gestern war {{p}} {place_de}."),
    ])


def filler(rng):
    who_en, who_de, _ = rng.choice(PEOPLE)
    whom_en, _, whom_de = rng.choice(PEOPLE)
    whom_en = whom_en if whom_en in ("Anna", "Tom") else whom_en[0].lower() + whom_en[1:]
    return rng.choice([
        (f"{who_en} was tired.", f"{who_de} war müde."),
        (f"{who_en} laughed.", f"{who_de} lachte."),
        (f"{who_en} went home.", f"{who_de} ging nach Hause."),
        (f"{who_en} worked all day.", f"{who_de} arbeitete den ganzen Tag."),
        (f"{who_en} was very happy.", f"{who_de} war sehr glücklich."),
        (f"{who_en} called {whom_en}.", f"{who_de} rief {whom_de} an."),
        (f"{who_en} visited {whom_en}.", f"{who_de} besuchte {whom_de}."),
    ])


def fill(template, pronoun):
    return template.replace("{P}", pronoun.capitalize()).replace("{p}", pronoun)


def document(rng, docid):
    """Sentences (en, de) and pronoun entries (segment index, distance, pronoun, German template)."""
    sentences, entries = [], []
    if rng.random() < 0.5:
        sentences.append(filler(rng))
    for _ in range(rng.choice((2, 3))):
        thing = rng.choice(THINGS)
        pronoun = PRONOUN[thing[2]]
        distance = rng.randrange(4)
        ante_en, ante_de = antecedent(rng, thing)
        if distance == 0:
            adj_en, adj_de = rng.choice(PREDICATIVE)
            conj_en, conj_de = rng.choice((("and", "und"), ("but", "aber")))
            template = f"{ante_de}, {conj_de} {{p}} war {adj_de}."
            entries.append((len(sentences), 0, pronoun, template))
            sentences.append((f"{ante_en}, {conj_en} it was {adj_en}.", fill(template, pronoun)))
        else:
            sentences.append((ante_en + ".", ante_de + "."))
            sentences.extend(filler(rng) for _ in range(distance - 1))
            en, template = pronoun_sentence(rng)
            entries.append((len(sentences), distance, pronoun, template))
            sentences.append((en, fill(template, pronoun)))
        if rng.random() < 0.3:
            sentences.append(filler(rng))
    return sentences, entries


def contrapro_entries(docid, sentences, entries):
    out = []
    for index, distance, pronoun, template in entries:
        en, de = sentences[index]
        out.append({
            "document id": docid, "segment id": index + 1, "source": en, "src segment": en, "ref segment": de,
            "src pronoun": "it", "ref pronoun": pronoun, "ante distance": distance, "intrasegmental": distance == 0,
            "errors": [{"contrastive": fill(template, other), "replacement": other}
                       for other in ("er", "sie", "es") if other != pronoun],
        })
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train-documents", type=int, default=3000)
    ap.add_argument("--valid-documents", type=int, default=40)
    ap.add_argument("--test-documents", type=int, default=120)
    ap.add_argument("--context-lines", type=int, default=3, help="sentences before each line in pronouns.context.*")
    args = ap.parse_args(argv)
    for name in ("train_documents", "valid_documents", "test_documents"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    rng = random.Random(args.seed)
    os.makedirs(args.out_dir, exist_ok=True)
    seen = set()
    for split in ("train", "valid", "test"):
        lines, docids, test_entries, documents = [], [], [], {}
        n = 0
        while n < getattr(args, f"{split}_documents"):
            docid = f"{split}-{n + 1:05d}"
            sentences, entries = document(rng, docid)
            key = tuple(sentences)
            if key in seen:  # no document of valid/test occurs in train
                continue
            seen.add(key)
            n += 1
            lines.extend(sentences)
            docids.extend([docid] * len(sentences))
            documents[docid] = sentences
            test_entries.extend(contrapro_entries(docid, sentences, entries))
        for i, lang in enumerate(("en", "de")):
            write_lines(os.path.join(args.out_dir, f"{split}.{lang}"), [pair[i] for pair in lines])
        write_lines(os.path.join(args.out_dir, f"{split}.docids"), docids)
        print(f"[make_sample_documents] {split}: {n} documents, {len(lines)} sentences, "
              f"{len(test_entries)} pronouns", file=sys.stderr)
    with atomic_output(os.path.join(args.out_dir, "pronouns.json")) as f:
        json.dump(test_entries, f, indent=1, ensure_ascii=False)
        f.write("\n")
    text = {"en": [], "de": []}
    context = {"en": [], "de": []}
    for entry in test_entries:
        sentences = documents[entry["document id"]]
        index = entry["segment id"] - 1
        before = [sentences[j] if j >= 0 else ("", "") for j in range(index - args.context_lines, index)]
        for target in [entry["ref segment"]] + [error["contrastive"] for error in entry["errors"]]:
            text["en"].append(entry["src segment"])
            text["de"].append(target)
            for i, lang in enumerate(("en", "de")):
                context[lang].extend(pair[i] for pair in before)
    for lang in ("en", "de"):
        write_lines(os.path.join(args.out_dir, f"pronouns.text.{lang}"), text[lang])
        write_lines(os.path.join(args.out_dir, f"pronouns.context.{lang}"), context[lang])
    print(f"[make_sample_documents] seed {args.seed}: {args.out_dir}: {{train,valid,test}}.{{en,de,docids}}; the test "
          f"set's {len(test_entries)} pronouns in ContraPro's format: pronouns.{{json,text.*,context.*}}", file=sys.stderr)


if __name__ == "__main__":
    main()
