#!/usr/bin/env python3
"""Generates the bundled English-German sample corpus (recipes/wmt14_en_de/sample/).

The corpus is authored here, not taken from anywhere: a seeded template grammar builds an
English sentence and its German translation from the same abstract clause, so every pair is
a correct translation and the output is byte-for-byte reproducible from the seed.

What the grammar covers (enough that a German reader recognises real translations):
  * noun phrases: definite/indefinite articles, "this"/"these", possessives, numbers,
    "many"/"some", bare plurals; German gender, case (nom/acc/dat), plural and weak-noun
    forms (den Jungen, dem Studenten), dative plural -n;
  * attributive adjectives with weak/mixed/strong endings (ein alter Mann, dem alten Mann,
    alte Männer), optionally intensified by "very"/"sehr"; predicative adjectives;
  * verbs: intransitive, accusative, dative (helfen, folgen) and dative+accusative (geben)
    frames; present, past (English simple past = German Perfekt with haben/sein), future
    (werden) and "can" (können); negation (nicht / kein); yes/no questions;
  * prepositional phrases with the right case and contractions (im, am, zum), companions
    (mit + dat, für/ohne + acc), time adverbials (fronted with verb-second inversion);
  * clauses joined by und/aber/deshalb (verb second) and weil/obwohl/während/wenn/dass
    (verb final), fronted subordinate clauses (Weil ..., arbeite ich), relative clauses
    extraposed after the verb (Ich habe den Mann gesehen, der ein Buch liest.).
Lengths run from 2-3 words to 40+ (up to four clauses).

Usage: python recipes/wmt14_en_de/make_sample_corpus.py --out-dir DIR [--seed 1] [--train N] [--valid N] [--test N]
Writes DIR/{train,valid,test}.{en,de}; no sentence of valid/test occurs in train.
"""

import argparse
import os
import random
import sys
from dataclasses import dataclass, field, replace

from fairseq_rope_cli.common import write_lines  # atomic: tmp file, then rename

PERSONS = ("1sg", "2sg", "3sg", "1pl", "3pl")
CASES = ("nom", "acc", "dat")

# --------------------------------------------------------------------------- lexicon


@dataclass(frozen=True)
class Noun:
    en: str
    en_pl: str
    de: str
    de_pl: str
    gender: str  # m, f, n
    tags: frozenset
    de_obl: str = ""  # weak nouns: acc/dat singular (den Jungen)

    def de_form(self, number, case):
        if number == "sg":
            return self.de_obl if (self.de_obl and case != "nom") else self.de
        if case == "dat" and not self.de_pl.endswith(("n", "s")):
            return self.de_pl + "n"
        return self.de_pl


def _nouns(spec):
    out = []
    for line in spec.strip().splitlines():
        en, en_pl, de, de_pl, gender, tags, *obl = line.split("|")
        out.append(Noun(en, en_pl, de, de_pl, gender, frozenset(tags.split()), obl[0] if obl else ""))
    return out


# en | en plural | de | de plural | gender | tags [| weak oblique singular]
NOUNS = _nouns(
    """
man|men|Mann|Männer|m|person noposs
woman|women|Frau|Frauen|f|person noposs
child|children|Kind|Kinder|n|person
teacher|teachers|Lehrer|Lehrer|m|person
doctor|doctors|Arzt|Ärzte|m|person
friend|friends|Freund|Freunde|m|person
girl|girls|Mädchen|Mädchen|n|person
boy|boys|Junge|Jungen|m|person|Jungen
student|students|Student|Studenten|m|person|Studenten
police officer|police officers|Polizist|Polizisten|m|person|Polizisten
sister|sisters|Schwester|Schwestern|f|person
brother|brothers|Bruder|Brüder|m|person
mother|mothers|Mutter|Mütter|f|person
father|fathers|Vater|Väter|m|person
grandmother|grandmothers|Großmutter|Großmütter|f|person
cook|cooks|Koch|Köche|m|person
baker|bakers|Bäcker|Bäcker|m|person
king|kings|König|Könige|m|person
queen|queens|Königin|Königinnen|f|person
dog|dogs|Hund|Hunde|m|animal
cat|cats|Katze|Katzen|f|animal
horse|horses|Pferd|Pferde|n|animal
bird|birds|Vogel|Vögel|m|animal
cow|cows|Kuh|Kühe|f|animal
mouse|mice|Maus|Mäuse|f|animal
book|books|Buch|Bücher|n|thing read write carry open give
letter|letters|Brief|Briefe|m|thing read write open give send
newspaper|newspapers|Zeitung|Zeitungen|f|thing read carry give
story|stories|Geschichte|Geschichten|f|read write hear
poem|poems|Gedicht|Gedichte|n|read write
song|songs|Lied|Lieder|n|write hear sing
car|cars|Auto|Autos|n|thing wash landmark
house|houses|Haus|Häuser|n|landmark build
table|tables|Tisch|Tische|m|thing carry build landmark
chair|chairs|Stuhl|Stühle|m|thing carry build landmark
door|doors|Tür|Türen|f|open landmark
window|windows|Fenster|Fenster|n|open wash landmark
bag|bags|Tasche|Taschen|f|thing carry open give
key|keys|Schlüssel|Schlüssel|m|thing give
picture|pictures|Bild|Bilder|n|thing paint give send
ball|balls|Ball|Bälle|m|thing give
computer|computers|Computer|Computer|m|thing
bicycle|bicycles|Fahrrad|Fahrräder|n|thing wash
box|boxes|Kiste|Kisten|f|thing carry open build
bottle|bottles|Flasche|Flaschen|f|thing carry open give
ticket|tickets|Fahrkarte|Fahrkarten|f|thing give
hat|hats|Hut|Hüte|m|thing give
coat|coats|Mantel|Mäntel|m|thing wash give
flower|flowers|Blume|Blumen|f|thing paint give send
tree|trees|Baum|Bäume|m|landmark paint
church|churches|Kirche|Kirchen|f|landmark paint
apple|apples|Apfel|Äpfel|m|food give
bread||Brot||n|food bake
cake|cakes|Kuchen|Kuchen|m|food give bake
soup||Suppe||f|food cook
egg|eggs|Ei|Eier|n|food cook
banana|bananas|Banane|Bananen|f|food give
"""
)

# place nouns with their own preposition (English, German); all take the dative
PLACES = [
    (n, en_p, de_p)
    for n, en_p, de_p in [
        (Noun("garden", "", "Garten", "", "m", frozenset()), "in", "in"),
        (Noun("park", "", "Park", "", "m", frozenset()), "in", "in"),
        (Noun("city", "", "Stadt", "", "f", frozenset()), "in", "in"),
        (Noun("kitchen", "", "Küche", "", "f", frozenset()), "in", "in"),
        (Noun("school", "", "Schule", "", "f", frozenset()), "in", "in"),
        (Noun("office", "", "Büro", "", "n", frozenset()), "in", "in"),
        (Noun("village", "", "Dorf", "", "n", frozenset()), "in", "in"),
        (Noun("library", "", "Bibliothek", "", "f", frozenset()), "in", "in"),
        (Noun("restaurant", "", "Restaurant", "", "n", frozenset()), "in", "in"),
        (Noun("forest", "", "Wald", "", "m", frozenset()), "in", "in"),
        (Noun("hotel", "", "Hotel", "", "n", frozenset()), "in", "in"),
        (Noun("station", "", "Bahnhof", "", "m", frozenset()), "at", "an"),
        (Noun("lake", "", "See", "", "m", frozenset()), "at", "an"),
        (Noun("beach", "", "Strand", "", "m", frozenset()), "on", "an"),
        (Noun("market", "", "Markt", "", "m", frozenset()), "at", "auf"),
        (Noun("mountain", "", "Berg", "", "m", frozenset()), "on", "auf"),
        (Noun("bridge", "", "Brücke", "", "f", frozenset()), "on", "auf"),
        (Noun("street", "", "Straße", "", "f", frozenset()), "on", "auf"),
    ]
]
# relational locations around a landmark noun: all dative
RELATIONS = [("behind", "hinter"), ("in front of", "vor"), ("next to", "neben"), ("near", "bei")]
CONTRACTIONS = {("in", "dem"): "im", ("an", "dem"): "am", ("bei", "dem"): "beim", ("zu", "dem"): "zum",
                ("zu", "der"): "zur", ("von", "dem"): "vom"}


@dataclass(frozen=True)
class Adj:
    en: str
    de: str  # predicative form
    stem: str  # attributive stem (teuer -> teur)
    tags: frozenset


def _adjs(spec):
    out = []
    for line in spec.strip().splitlines():
        en, de, stem, tags = line.split("|")
        out.append(Adj(en, de, stem or de, frozenset(tags.split())))
    return out


ADJS = _adjs(
    """
old|alt||person animal thing landmark place food
young|jung||person animal
big|groß||person animal thing landmark place
small|klein||person animal thing landmark place
new|neu||thing read write landmark place
beautiful|schön||person animal thing landmark place read hear
red|rot||thing landmark
blue|blau||thing landmark
green|grün||thing landmark place
black|schwarz||animal thing
white|weiß||animal thing landmark
friendly|freundlich||person animal
tired|müde|müd|person animal
happy|glücklich||person animal
hungry|hungrig||person animal
clever|klug||person animal
fast|schnell||animal
long|lang||read write hear
short|kurz||read write hear
interesting|interessant||person read write place
expensive|teuer|teur|thing landmark
cheap|billig||thing food
fresh|frisch||food
warm|warm||food
famous|berühmt||person place
quiet|ruhig||person animal place
dark|dunkel|dunkl|thing place landmark
"""
)


@dataclass(frozen=True)
class Verb:
    en: tuple  # base, 3sg, past
    de: str  # infinitive
    part: str  # past participle
    aux: str  # haben / sein
    frame: str  # intr, acc, dat, dat_acc
    subj: frozenset
    obj: frozenset = frozenset()  # tags of the accusative (or dative-only) object
    dat: frozenset = frozenset()  # tags of the dative object of dat_acc verbs
    comp: tuple = ("with",)  # companion phrases that fit
    du: str = ""  # irregular 2sg / 3sg present
    er: str = ""
    ich: str = ""
    en_prep: str = ""  # "look for"
    loc: bool = True  # takes a location phrase

    def present(self, person):
        stem = self.de[:-1] if self.de.endswith(("ern", "eln")) else self.de[:-2]
        if person == "1sg":
            return self.ich or stem + "e"
        if person in ("1pl", "3pl"):
            return self.de
        if self.du and person == "2sg":
            return self.du
        if self.er and person == "3sg":
            return self.er
        if stem.endswith(("t", "d")) or (stem.endswith(("n", "m")) and stem[-2] not in "aeiouäöülrhmn"):
            return stem + ("est" if person == "2sg" else "et")
        if stem.endswith(("s", "ß", "z", "x")):
            return stem + "t"
        return stem + ("st" if person == "2sg" else "t")


P, A, ANY = frozenset({"person"}), frozenset({"person", "animal"}), frozenset({"person", "animal", "thing", "food"})
VERBS = [
    Verb(("sleep", "sleeps", "slept"), "schlafen", "geschlafen", "haben", "intr", A, du="schläfst", er="schläft"),
    Verb(("laugh", "laughs", "laughed"), "lachen", "gelacht", "haben", "intr", P),
    Verb(("work", "works", "worked"), "arbeiten", "gearbeitet", "haben", "intr", P, comp=("with", "without")),
    Verb(("wait", "waits", "waited"), "warten", "gewartet", "haben", "intr", A, comp=("with",)),
    Verb(("run", "runs", "ran"), "laufen", "gelaufen", "sein", "intr", A, du="läufst", er="läuft", comp=("with", "without")),
    Verb(("come", "comes", "came"), "kommen", "gekommen", "sein", "intr", A, comp=("with", "without")),
    Verb(("play", "plays", "played"), "spielen", "gespielt", "haben", "intr", A),
    Verb(("swim", "swims", "swam"), "schwimmen", "geschwommen", "sein", "intr", A),
    Verb(("dance", "dances", "danced"), "tanzen", "getanzt", "haben", "intr", P),
    Verb(("travel", "travels", "travelled"), "reisen", "gereist", "sein", "intr", P, comp=("with", "without")),
    Verb(("cry", "cries", "cried"), "weinen", "geweint", "haben", "intr", P),
    Verb(("sing", "sings", "sang"), "singen", "gesungen", "haben", "intr", P),
    Verb(("see", "sees", "saw"), "sehen", "gesehen", "haben", "acc", A, ANY | {"landmark"}, du="siehst", er="sieht"),
    Verb(("buy", "buys", "bought"), "kaufen", "gekauft", "haben", "acc", P, frozenset({"thing", "food", "animal"}), comp=("for", "with")),
    Verb(("find", "finds", "found"), "finden", "gefunden", "haben", "acc", A, frozenset({"thing", "animal", "food"})),
    Verb(("read", "reads", "read"), "lesen", "gelesen", "haben", "acc", P, frozenset({"read"}), du="liest", er="liest", comp=("for", "with")),
    Verb(("write", "writes", "wrote"), "schreiben", "geschrieben", "haben", "acc", P, frozenset({"write"}), comp=("for",)),
    Verb(("visit", "visits", "visited"), "besuchen", "besucht", "haben", "acc", P, P, comp=("with", "without")),
    Verb(("need", "needs", "needed"), "brauchen", "gebraucht", "haben", "acc", P, frozenset({"thing", "food"}), comp=()),
    Verb(("carry", "carries", "carried"), "tragen", "getragen", "haben", "acc", P, frozenset({"carry"}), du="trägst", er="trägt", comp=("for", "with")),
    Verb(("open", "opens", "opened"), "öffnen", "geöffnet", "haben", "acc", P, frozenset({"open"}), comp=("for",)),
    Verb(("eat", "eats", "ate"), "essen", "gegessen", "haben", "acc", A, frozenset({"food"}), du="isst", er="isst"),
    Verb(("love", "loves", "loved"), "lieben", "geliebt", "haben", "acc", A, A, comp=()),
    Verb(("know", "knows", "knew"), "kennen", "gekannt", "haben", "acc", P, frozenset({"person", "hear"}), comp=()),
    Verb(("paint", "paints", "painted"), "malen", "gemalt", "haben", "acc", P, frozenset({"paint", "animal"}), comp=("for", "with")),
    Verb(("sell", "sells", "sold"), "verkaufen", "verkauft", "haben", "acc", P, frozenset({"thing", "food", "animal"})),
    Verb(("hear", "hears", "heard"), "hören", "gehört", "haben", "acc", A, frozenset({"hear", "animal", "person"}), comp=()),
    Verb(("take", "takes", "took"), "nehmen", "genommen", "haben", "acc", P, frozenset({"thing", "food"}), du="nimmst", er="nimmt", comp=("for",)),
    Verb(("look", "looks", "looked"), "suchen", "gesucht", "haben", "acc", A, ANY, en_prep="for"),
    Verb(("wash", "washes", "washed"), "waschen", "gewaschen", "haben", "acc", P, frozenset({"wash", "animal"}), du="wäschst", er="wäscht"),
    Verb(("build", "builds", "built"), "bauen", "gebaut", "haben", "acc", P, frozenset({"build"}), comp=("for", "with"),
         loc=False),
    Verb(("cook", "cooks", "cooked"), "kochen", "gekocht", "haben", "acc", P, frozenset({"cook"}), comp=("for", "with")),
    Verb(("bake", "bakes", "baked"), "backen", "gebacken", "haben", "acc", P, frozenset({"bake"}), comp=("for", "with")),
    Verb(("like", "likes", "liked"), "mögen", "gemocht", "haben", "acc", A, ANY, ich="mag", du="magst", er="mag", comp=()),
    Verb(("feed", "feeds", "fed"), "füttern", "gefüttert", "haben", "acc", P, frozenset({"animal"})),
    Verb(("sing", "sings", "sang"), "singen", "gesungen", "haben", "acc", P, frozenset({"sing"}), comp=("for", "with")),
    Verb(("help", "helps", "helped"), "helfen", "geholfen", "haben", "dat", A, A, du="hilfst", er="hilft"),
    Verb(("thank", "thanks", "thanked"), "danken", "gedankt", "haben", "dat", P, P, comp=()),
    Verb(("follow", "follows", "followed"), "folgen", "gefolgt", "sein", "dat", A, A, comp=()),
    Verb(("answer", "answers", "answered"), "antworten", "geantwortet", "haben", "dat", P, P, comp=()),
    Verb(("give", "gives", "gave"), "geben", "gegeben", "haben", "dat_acc", P, frozenset({"give"}), A, du="gibst", er="gibt", comp=()),
    Verb(("show", "shows", "showed"), "zeigen", "gezeigt", "haben", "dat_acc", P, frozenset({"thing", "paint"}), P, comp=()),
    Verb(("bring", "brings", "brought"), "bringen", "gebracht", "haben", "dat_acc", P, frozenset({"give", "food"}), P, comp=()),
    Verb(("send", "sends", "sent"), "schicken", "geschickt", "haben", "dat_acc", P, frozenset({"send"}), P, comp=()),
]
REPORTERS = [  # verb + "that" clause, always present tense
    (("say", "says"), "sagen", None),
    (("think", "thinks"), "glauben", None),
    (("know", "knows"), "wissen", ("weiß", "weißt", "weiß", "wissen", "wissen")),
    (("hope", "hopes"), "hoffen", None),
]

GERMAN_AUX = {
    "haben": ("habe", "hast", "hat", "haben", "haben"),
    "sein": ("bin", "bist", "ist", "sind", "sind"),
    "werden": ("werde", "wirst", "wird", "werden", "werden"),
    "können": ("kann", "kannst", "kann", "können", "können"),
    "war": ("war", "warst", "war", "waren", "waren"),
}
EN_BE = {"pres": ("am", "are", "is", "are", "are"), "past": ("was", "were", "was", "were", "were")}

# pronouns: English subject/object, German nom/acc/dat, person
PRONOUNS = {
    "1sg": ("I", "me", "ich", "mich", "mir"),
    "2sg": ("you", "you", "du", "dich", "dir"),
    "3sg_m": ("he", "him", "er", "ihn", "ihm"),
    "3sg_f": ("she", "her", "sie", "sie", "ihr"),
    "1pl": ("we", "us", "wir", "uns", "uns"),
    "3pl": ("they", "them", "sie", "sie", "ihnen"),
}
POSSESSIVES = [("my", "mein"), ("your", "dein"), ("his", "sein"), ("her", "ihr"), ("our", "unser"), ("their", "ihr")]
TIMES = {
    "pres": [("today", "heute"), ("every day", "jeden Tag"), ("now", "jetzt"), ("in the morning", "am Morgen"),
             ("in the evening", "am Abend"), ("on Sunday", "am Sonntag")],
    "past": [("yesterday", "gestern"), ("last week", "letzte Woche"), ("last year", "letztes Jahr"),
             ("in the morning", "am Morgen"), ("in the evening", "am Abend"), ("on Sunday", "am Sonntag")],
    "fut": [("tomorrow", "morgen"), ("next week", "nächste Woche"), ("next year", "nächstes Jahr"), ("soon", "bald"),
            ("on Sunday", "am Sonntag")],
}
TIMES["can"] = TIMES["pres"][:3] + TIMES["fut"][:2]

# German determiner and adjective endings by (case, gender or "pl")
DEF = {"nom": dict(m="der", f="die", n="das", pl="die"), "acc": dict(m="den", f="die", n="das", pl="die"),
       "dat": dict(m="dem", f="der", n="dem", pl="den")}
DIES = {"nom": dict(m="er", f="e", n="es", pl="e"), "acc": dict(m="en", f="e", n="es", pl="e"),
        "dat": dict(m="em", f="er", n="em", pl="en")}
EIN = {"nom": dict(m="", f="e", n="", pl="e"), "acc": dict(m="en", f="e", n="", pl="e"),
       "dat": dict(m="em", f="er", n="em", pl="en")}
WEAK = {"nom": dict(m="e", f="e", n="e", pl="en"), "acc": dict(m="en", f="e", n="e", pl="en"),
        "dat": dict(m="en", f="en", n="en", pl="en")}
MIXED = {"nom": dict(m="er", f="e", n="es", pl="en"), "acc": dict(m="en", f="e", n="es", pl="en"),
         "dat": dict(m="en", f="en", n="en", pl="en")}
STRONG_PL = {"nom": "e", "acc": "e", "dat": "en"}
NUMBERS = [("two", "zwei"), ("three", "drei"), ("four", "vier"), ("five", "fünf")]
QUANTS = [("many", "viel"), ("some", "einig")]


def a_or_an(word):
    return "an" if word[0] in "aeiou" else "a"


def cap(text):
    return text[0].upper() + text[1:]


# --------------------------------------------------------------------------- noun phrases


@dataclass
class NP:
    en: str
    de: dict  # case -> German string
    person: str  # 3sg / 3pl / pronoun persons
    definite: bool = True  # for negation: definite -> "nicht", indefinite sg -> "kein"
    noun: Noun = None
    pronoun: bool = False
    neg_de: dict = None  # kein- form for indefinite singulars


def noun_phrase(rng, tags, number=None, dets=None, adj_p=0.35, noun=None):
    if noun is None:
        noun = rng.choice([n for n in NOUNS if n.tags & tags])
    number = number or ("pl" if rng.random() < 0.3 else "sg")
    if not noun.en_pl:  # mass nouns (bread, soup) stay singular
        number = "sg"
    g = "pl" if number == "pl" else noun.gender
    adj = None
    cands = [a for a in ADJS if a.tags & (noun.tags | ({"place"} if not noun.tags else set()))]
    if cands and rng.random() < adj_p:
        adj = rng.choice(cands)
    very = adj is not None and rng.random() < 0.12
    if dets is None:
        dets = ["def", "indef", "this", "poss"] if number == "sg" else ["def", "bare", "num", "quant", "this", "poss"]
    if "noposs" in noun.tags:  # "my woman" / "meine Frau" (= my wife) is not what we mean
        dets = [d for d in dets if d != "poss"] or ["def"]
    det = rng.choice(dets)
    en_noun = noun.en if number == "sg" else noun.en_pl
    en_adj = ("very " if very else "") + adj.en if adj else ""
    en_rest = f"{en_adj} {en_noun}".strip()

    def de_np(det_word, endings, case):
        parts = [det_word] if det_word else []
        if adj:
            if very:
                parts.append("sehr")
            parts.append(adj.stem + endings[case][g] if isinstance(endings[case], dict) else adj.stem + endings[case])
        parts.append(noun.de_form(number, case))
        return " ".join(parts)

    de, neg_de, definite = {}, None, True
    if det == "def":
        en = f"the {en_rest}"
        de = {c: de_np(DEF[c][g], WEAK, c) for c in CASES}
    elif det == "this":
        en = f"{'this' if number == 'sg' else 'these'} {en_rest}"
        de = {c: de_np("dies" + DIES[c][g], WEAK, c) for c in CASES}
    elif det == "indef":
        en = f"{a_or_an(en_rest)} {en_rest}"
        de = {c: de_np("ein" + EIN[c][g], MIXED, c) for c in CASES}
        neg_de = {c: de_np("kein" + EIN[c][g], MIXED, c) for c in CASES}
        definite = False
    elif det == "poss":
        en_p, de_p = rng.choice(POSSESSIVES)
        en = f"{en_p} {en_rest}"
        # unser + e -> unsere; the -er stem keeps its e before endings
        de = {c: de_np(de_p + EIN[c][g], MIXED, c) for c in CASES}
    elif det == "bare":
        en = en_rest
        de = {c: de_np("", STRONG_PL, c) for c in CASES}
        definite = False
    elif det == "num":
        en_n, de_n = rng.choice(NUMBERS)
        en = f"{en_n} {en_rest}"
        de = {c: de_np(de_n, STRONG_PL, c) for c in CASES}
        definite = False
    else:  # quant
        en_q, de_q = rng.choice(QUANTS)
        en = f"{en_q} {en_rest}"
        de = {c: de_np(de_q + STRONG_PL[c], STRONG_PL, c) for c in CASES}
        definite = False
    return NP(en, de, "3pl" if number == "pl" else "3sg", definite, noun, neg_de=neg_de)


def pronoun(key, case_en="subj"):
    en_s, en_o, nom, acc, dat = PRONOUNS[key]
    return NP(en_s if case_en == "subj" else en_o, dict(nom=nom, acc=acc, dat=dat), key[:3], True, None, True)


def subject(rng, tags):
    if "person" in tags and rng.random() < 0.35:
        return pronoun(rng.choice(list(PRONOUNS)))
    return noun_phrase(rng, tags)


def object_np(rng, tags, subj, allow_pronoun=True):
    if allow_pronoun and "person" in tags and rng.random() < 0.2:
        keys = [k for k in PRONOUNS if not (k[:3] == subj.person and k[:1] in "12")]
        return pronoun(rng.choice(keys), "obj")
    return noun_phrase(rng, tags)


def prep_phrase(en_prep, de_prep, np, case):
    de = np.de[case]
    first, _, rest = de.partition(" ")
    if (de_prep, first) in CONTRACTIONS and not np.pronoun and np.de["nom"].split(" ")[0] in ("der", "die", "das"):
        return f"{en_prep} {np.en}", f"{CONTRACTIONS[(de_prep, first)]} {rest}"
    return f"{en_prep} {np.en}", f"{de_prep} {de}"


def location(rng):
    if rng.random() < 0.6:
        noun, en_p, de_p = rng.choice(PLACES)
        np = noun_phrase(rng, frozenset(), number="sg", dets=["def", "def", "def", "this", "poss"], adj_p=0.25, noun=noun)
        return prep_phrase(en_p, de_p, np, "dat")
    en_p, de_p = rng.choice(RELATIONS)
    np = noun_phrase(rng, frozenset({"landmark"}), number="sg", dets=["def", "def", "this", "poss"], adj_p=0.25)
    return prep_phrase(en_p, de_p, np, "dat")


def companion(rng, kind, subj):
    if kind == "with":
        np = object_np(rng, frozenset({"person", "animal"}), subj)
        return prep_phrase("with", "mit", np, "dat")
    if kind == "for":
        np = object_np(rng, frozenset({"person"}), subj)
        return prep_phrase("for", "für", np, "acc")
    np = noun_phrase(rng, frozenset({"thing", "person"}), number="sg", dets=["poss", "def"])
    return prep_phrase("without", "ohne", np, "acc")


# --------------------------------------------------------------------------- clauses


@dataclass
class Clause:
    subj: NP
    tense: str  # pres, past, fut, can
    verb: Verb = None  # None: predicative "be + adjective"
    adj: Adj = None
    very: bool = False
    neg: bool = False
    en_objs: list = field(default_factory=list)
    de_pron: list = field(default_factory=list)  # pronoun objects, first in the middle field
    de_objs: list = field(default_factory=list)
    en_tail: list = field(default_factory=list)  # companion, location (English order)
    de_comp: list = field(default_factory=list)
    de_loc: list = field(default_factory=list)
    time: tuple = None
    rel: tuple = None  # (English, German) relative clause on the last object
    neg_in_np: bool = False  # negation expressed by "kein" in an object

    # ---- English
    def en_words(self, question=False, time_front=False):
        """The clause in English; with ``time_front`` the time adverbial comes first."""
        if time_front:
            return f"{self.time[0]} {replace(self, time=None).en_words(question)}"
        p = PERSONS.index(self.subj.person)
        s = self.subj.en
        rest = " ".join(self.en_objs + self.en_tail + ([self.time[0]] if self.time else []))
        if self.rel:
            rest = rest + " " + self.rel[0]
        if self.verb is None:
            be = EN_BE[self.tense][p]
            adj = ("very " if self.very else "") + self.adj.en
            core = f"{be} {s} {adj}" if question else f"{s} {be}{' not' if self.neg else ''} {adj}"
            return f"{core} {rest}".strip()
        base, third, past = self.verb.en
        if self.verb.en_prep:
            base, third, past = (f"{w} {self.verb.en_prep}" for w in (base, third, past))
        third_person = self.subj.person == "3sg"
        if question:
            aux = {"pres": "does" if third_person else "do", "past": "did", "fut": "will", "can": "can"}[self.tense]
            return f"{aux} {s} {base} {rest}".strip()
        if self.neg:
            aux = {"pres": "does not" if third_person else "do not", "past": "did not", "fut": "will not",
                   "can": "cannot"}[self.tense]
            return f"{s} {aux} {base} {rest}".strip()
        verb = {"pres": third if third_person else base, "past": past, "fut": f"will {base}",
                "can": f"can {base}"}[self.tense]
        return f"{s} {verb} {rest}".strip()

    # ---- German
    def de_parts(self, with_time=True):
        """(finite verb, middle field without subject, non-finite verbs, extraposed relative clause)"""
        p = PERSONS.index(self.subj.person)
        middle = list(self.de_pron)
        if self.time and with_time:
            middle.append(self.time[1])
        middle += self.de_objs + self.de_comp
        if self.neg and not self.neg_in_np:
            middle.append("nicht")
        middle += self.de_loc
        if self.verb is None:
            middle += (["sehr"] if self.very else []) + [self.adj.de]
            finite = GERMAN_AUX["sein" if self.tense == "pres" else "war"][p]
            return finite, middle, [], None
        if self.tense == "pres":
            finite, nonfinite = self.verb.present(self.subj.person), []
        elif self.tense == "past":
            finite, nonfinite = GERMAN_AUX[self.verb.aux][p], [self.verb.part]
        else:
            finite, nonfinite = GERMAN_AUX["werden" if self.tense == "fut" else "können"][p], [self.verb.de]
        return finite, middle, nonfinite, (self.rel[1] if self.rel else None)

    def de_main(self, front=None):
        """Verb-second main clause; ``front`` (a German string) takes the first position."""
        finite, middle, nonfinite, rel = self.de_parts()
        if front is None:
            words = [self.subj.de["nom"], finite] + middle + nonfinite
        else:
            words = [front, finite, self.subj.de["nom"]] + middle + nonfinite
        return " ".join(words) + (f", {rel}" if rel else "")

    def de_main_time_front(self):
        finite, middle, nonfinite, rel = self.de_parts(with_time=False)
        return " ".join([self.time[1], finite, self.subj.de["nom"]] + middle + nonfinite) + (f", {rel}" if rel else "")

    def de_question(self):
        finite, middle, nonfinite, rel = self.de_parts()
        return " ".join([finite, self.subj.de["nom"]] + middle + nonfinite) + (f", {rel}" if rel else "")

    def de_sub(self):
        finite, middle, nonfinite, rel = self.de_parts()
        return " ".join([self.subj.de["nom"]] + middle + nonfinite + [finite]) + (f", {rel}" if rel else "")


def relative_clause(rng, antecedent):
    """English and German relative clause whose subject is ``antecedent`` (already extraposed in German)."""
    noun = antecedent.noun
    tags = frozenset({"person"}) if "person" in noun.tags else frozenset({"animal"})
    rel_subj = NP("", {}, antecedent.person)
    verbs = [v for v in VERBS if v.subj & tags and v.frame in ("intr", "acc")]
    verb = rng.choice(verbs)
    tense = rng.choice(["pres", "pres", "past"])
    c = Clause(rel_subj, tense, verb)
    if verb.frame == "acc":
        obj = noun_phrase(rng, verb.obj, adj_p=0.2)
        c.en_objs.append(obj.en)
        c.de_objs.append(obj.de["acc"])
    elif rng.random() < 0.4:
        en, de = location(rng)
        c.en_tail.append(en)
        c.de_loc.append(de)
    g = "pl" if antecedent.person == "3pl" else noun.gender
    en_rel = "who" if "person" in noun.tags else "that"
    c.subj = NP(en_rel, dict(nom=DEF["nom"][g]), antecedent.person)
    return c.en_words(), c.de_sub()


def time_phrase(rng, tense, negated):
    """A time adverbial for ``tense``; "every day" does not combine with negation (nicht jeden Tag)."""
    return rng.choice([t for t in TIMES[tense] if not (negated and t[0] == "every day")])


def make_clause(rng, tenses=("pres", "pres", "past", "past", "fut", "can"), allow_neg=True, allow_rel=True,
                allow_time=True):
    tense = rng.choice(tenses)
    if rng.random() < 0.12 and tense in ("pres", "past"):  # "the house is old"
        subj_np = subject(rng, frozenset({"person", "animal", "thing", "landmark"}))
        tags = subj_np.noun.tags if subj_np.noun else {"person"}
        c = Clause(subj_np, tense, adj=rng.choice([a for a in ADJS if a.tags & tags]))
        c.very = rng.random() < 0.15
        c.neg = allow_neg and rng.random() < 0.15
        if subj_np.noun is None or subj_np.noun.tags & {"person", "animal"}:
            if rng.random() < 0.25:  # "the dog was tired yesterday", not "the car was red yesterday"
                c.time = time_phrase(rng, tense, c.neg)
        return c
    verb = rng.choice(VERBS)
    subj = subject(rng, verb.subj)
    c = Clause(subj, tense, verb)
    neg = allow_neg and verb.frame != "dat_acc" and rng.random() < 0.15
    last_obj = None
    if verb.frame == "dat_acc":
        dat = object_np(rng, verb.dat, subj)
        acc = noun_phrase(rng, verb.obj, adj_p=0.3)
        c.en_objs += [dat.en, acc.en]
        (c.de_pron if dat.pronoun else c.de_objs).append(dat.de["dat"])
        c.de_objs.append(acc.de["acc"])
        last_obj = acc
    elif verb.frame in ("acc", "dat"):
        case = "acc" if verb.frame == "acc" else "dat"
        obj = object_np(rng, verb.obj, subj)
        c.en_objs.append(obj.en)
        if obj.pronoun:
            c.de_pron.append(obj.de[case])
        elif neg and obj.neg_de is not None:
            c.de_objs.append(obj.neg_de[case])
            c.neg_in_np = True
        elif neg and not obj.definite:
            neg = False  # "does not see two dogs": leave such negations out
            c.de_objs.append(obj.de[case])
        else:
            c.de_objs.append(obj.de[case])
        last_obj = obj
    c.neg = neg
    tail_free = True
    if not neg and verb.comp and rng.random() < 0.2:
        en, de = companion(rng, rng.choice(verb.comp), subj)
        c.en_tail.append(en)
        c.de_comp.append(de)
        tail_free = False
    if not neg and verb.loc and rng.random() < 0.35:
        en, de = location(rng)
        c.en_tail.append(en)
        c.de_loc.append(de)
        tail_free = False
    if allow_time and rng.random() < 0.3:
        c.time = time_phrase(rng, tense, neg)
        tail_free = False
    if (allow_rel and tail_free and last_obj is not None and not last_obj.pronoun and last_obj.noun is not None
            and last_obj.noun.tags & {"person", "animal"} and rng.random() < 0.35):
        c.rel = relative_clause(rng, last_obj)
    return c


SUBORDINATORS = [("because", "weil"), ("although", "obwohl"), ("while", "während"), ("if", "wenn")]
COORDINATORS = [("and", "und"), ("but", "aber"), ("so", "deshalb")]


def sentence(rng):
    """One (English, German) sentence pair."""
    r = rng.random()
    if r < 0.08:  # yes/no question
        c = make_clause(rng, allow_neg=False)
        return cap(c.en_words(question=True)) + "?", cap(c.de_question()) + "?"
    if r < 0.18:  # "The woman says that ..."
        (en_base, en_3), de_inf, forms = rng.choice(REPORTERS)
        subj = subject(rng, frozenset({"person"}))
        if forms:
            verb = forms[PERSONS.index(subj.person)]
        else:
            verb = Verb(("", "", ""), de_inf, "", "", "intr", P).present(subj.person)
        last = make_clause(rng)
        en = f"{subj.en} {en_3 if subj.person == '3sg' else en_base} that {last.en_words()}"
        de = f"{subj.de['nom']} {verb}, dass {last.de_sub()}"
        de_ends_sub = True
    elif r < 0.30:  # fronted subordinate clause: "Because ..., I work." / "Weil ..., arbeite ich."
        en_c, de_c = rng.choice(SUBORDINATORS[:3])
        sub, last = make_clause(rng, allow_rel=False), make_clause(rng)
        en = f"{en_c} {sub.en_words()}, {last.en_words()}"
        de = f"{de_c} {sub.de_sub()}, {last.de_question()}"  # the clause fills the first position
        de_ends_sub = last.rel is not None
    else:
        last = make_clause(rng)
        if last.time and rng.random() < 0.3:  # "Yesterday the man ..." / "Gestern hat der Mann ..."
            en, de = last.en_words(time_front=True), last.de_main_time_front()
        else:
            en, de = last.en_words(), last.de_main()
        de_ends_sub = last.rel is not None
    for _ in range(rng.choices([0, 1, 2, 3], weights=[50, 30, 14, 6])[0]):
        if rng.random() < 0.5:
            # "if" only after a clause that is not in the past
            en_c, de_c = rng.choice(SUBORDINATORS if last.tense != "past" else SUBORDINATORS[:3])
            tenses = ("pres", "pres", "fut") if en_c == "if" else ("pres", "pres", "past", "past", "fut", "can")
            c = make_clause(rng, tenses=tenses)
            en += f"{',' if en_c in ('although', 'while') else ''} {en_c} {c.en_words()}"
            de += f", {de_c} {c.de_sub()}"
            de_ends_sub = True
        else:
            en_c, de_c = rng.choice(COORDINATORS)
            c = last = make_clause(rng)
            if en_c == "so":
                en += f", so {c.en_words()}"
                de += f", deshalb {c.de_question()}"  # adverb first, then the verb
            elif en_c == "but":
                en += f", but {c.en_words()}"
                de += f", aber {c.de_main()}"
            else:  # a comma closes a preceding subordinate or relative clause
                en += f" and {c.en_words()}"
                de += f"{',' if de_ends_sub else ''} und {c.de_main()}"
            de_ends_sub = c.rel is not None
    return cap(en) + ".", cap(de) + "."


def generate(seed, n_train, n_valid, n_test):
    rng = random.Random(seed)
    seen, pairs = set(), []
    total = n_train + n_valid + n_test
    attempts = 0
    while len(pairs) < total:
        attempts += 1
        if attempts > 20 * total:
            raise RuntimeError(f"could only make {len(pairs)} distinct sentences of {total} requested")
        en, de = sentence(rng)
        if en in seen:
            continue
        seen.add(en)
        pairs.append((en, de))
    return {"test": pairs[:n_test], "valid": pairs[n_test:n_test + n_valid], "train": pairs[n_test + n_valid:]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train", type=int, default=20000)
    ap.add_argument("--valid", type=int, default=300)
    ap.add_argument("--test", type=int, default=500)
    args = ap.parse_args(argv)
    for name in ("train", "valid", "test"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    os.makedirs(args.out_dir, exist_ok=True)
    splits = generate(args.seed, args.train, args.valid, args.test)
    for split, pairs in splits.items():
        for i, lang in enumerate(("en", "de")):
            write_lines(os.path.join(args.out_dir, f"{split}.{lang}"), [p[i] for p in pairs])
    n_words = [len(en.split()) for pairs in splits.values() for en, _ in pairs]
    print(f"[make_sample_corpus] seed {args.seed}: wrote {args.out_dir}/{{train,valid,test}}.{{en,de}} "
          f"({len(splits['train'])}/{len(splits['valid'])}/{len(splits['test'])} pairs, "
          f"{min(n_words)}-{max(n_words)} English words, mean {sum(n_words) / len(n_words):.1f})", file=sys.stderr)


if __name__ == "__main__":
    main()
