"""Sentence splitters measured on real running prose with known sentence boundaries.

The prose: the Debian Edu Bookworm manual in English and German (Debian's packages
debian-edu-doc-en and debian-edu-doc-de, 2.12.23~deb12u1, GPL-2+; written and translated by the
Debian Edu project), its HTML paragraphs (<p>, code and all) as running text. The boundaries:
tests/data/sentence_boundaries.json, the character offsets where each paragraph's second, third, ...
sentence starts, keyed by a hash of the paragraph (the text itself is not copied here). They were
made by ``gold``: every offset where any of five splitters starts a sentence, and every sentence-final
mark followed by a space where none does, is a candidate; the candidates all five agree on keep their
verdict, the others were decided by reading them (ADJUDICATED below, one line each, with the words
around them). German paragraphs that are the same in the English manual (the untranslated GPL, a few
notes) are left out of German. A numbered item's label ("1. You may ...") is part of its sentence.

    python -m scripts.sentence_splitters table            # the table of docs/serving.md
    python -m scripts.sentence_splitters table --json     # the same as JSON
    python -m scripts.sentence_splitters gold             # rewrite the boundaries (needs all five)

Needs the two packages (``apt-get install debian-edu-doc-en debian-edu-doc-de``, or --manual-dir
with the two HTML files) and, for the table, the splitters to compare (pip install sentence-splitter
pysbd segtok blingfire; those missing are left out and named).
"""

import argparse
import hashlib
import json
import os
import re
import sys
from html.parser import HTMLParser
from typing import Callable, Dict, List, Set

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLD = os.path.join(REPO, "tests", "data", "sentence_boundaries.json")
MANUAL = "/usr/share/doc/debian-edu-doc-{lang}/debian-edu-bookworm-manual.html"
LANGS = ("en", "de")

# (paragraph's hash, offset): is a sentence boundary, for every candidate the five splitters did not
# agree on (and the one all five missed); the words around it as a comment
ADJUDICATED = {
    "en": {
        ("f0fe05f7bef1", 87): True,  # //wiki.debian.org/DebianEdu/Hardware/ . | This list is not nearly comple
        ("b796a7ee324c", 138): True,  #  by AMD, Intel and other manufacturers. | amd64 is a 64-bit architecture
        ("b796a7ee324c", 256): True,  # tions today should be done using amd64. | i386 should only be used for v
        ("de0d220bf1fc", 5): False,  # Back.| . brings back to the main menu
        ("de0d220bf1fc", 7): False,  # Back.. | brings back to the main menu.
        ("4694a92f4fbd", 288): False,  # ormation about students, teachers, etc. | only needs to be entered once.
        ("1f74af9db510", 202): True,  # ounts, groups, systems, netgroups, etc. | Depending on the structure of 
        ("c5d6db79d78f", 99): True,  # s, manage groups, manage systems, etc.) | GOsa² presents you with a diff
        ("535e425c8341", 58): False,  # s of /skole/tjener/home0, /etc/, /root/.| svk and LDAP are stored in the
        ("c5ee89d2d879", 167): False,  # . The git repository is stored in /etc/.| git/.
        ("973a52f52e5c", 73): True,  # -ROM to APTs list of available sources. | apt-cdrom takes care of determ
        ("2b3af4df1ee4", 321): False,  #  the howto and putting it under the GPL.| )
        ("265f93f151a3", 93): True,  #  elsewhere in Debian Edu will not work. | 192.168.0.0/24 and 192.168.1.0
        ("0b9c80ca66a4", 56): False,  # 89, 1991 Free Software Foundation, Inc. | 51 Franklin Street, Fifth Floo
        ("bf07ebccd25c", 3): False,  # 0. | This License applies to any pr
        ("bf07ebccd25c", 577): True,  # limitation in the term "modification".) | Each licensee is addressed as 
        ("25232542cfa2", 3): False,  # 1. | You may copy and distribute ve
        ("d9523b81ea52", 3): False,  # 2. | You may modify your copy or co
        ("9cfacf5e630a", 3): False,  # 3. | You may copy and distribute th
        ("012b4180bef7", 3): False,  # 4. | You may not copy, modify, subl
        ("ddf52236cb1d", 3): False,  # 5. | You are not required to accept
        ("0c0ecea3dca4", 3): False,  # 6. | Each time you redistribute the
        ("20afb584b643", 3): False,  # 7. | If, as a consequence of a cour
        ("3aacec8b7745", 3): False,  # 8. | If the distribution and/or use
        ("16eb6dac46aa", 3): False,  # 9. | The Free Software Foundation m
        ("69fb03d35ce0", 4): False,  # 10. | If you wish to incorporate par
        ("775a5ab0dc85", 4): False,  # 11. | BECAUSE THE PROGRAM IS LICENSE
        ("28f32b34de2d", 4): False,  # 12. | IN NO EVENT UNLESS REQUIRED BY
    },
    "de": {
        ("bd7a3f2213e1", 239): False,  # en aber. Die Bezeichnungen »Skole« bzw. | (Debian-)»Education« sind in b
        ("fc059ad6fdb2", 249): False,  # liert, der Rechner als Thin Client bzw. | als Diskless Workstation gesta
        ("e959cd470d03", 298): True,  # Maschinen und »Netgroups« bereitstellt. | Um eine Verwirrung des Benutze
        ("e959cd470d03", 414): True,  # n Dateigruppen und »Netgroups« gemacht. | Da Gruppen von Maschinen die g
        ("b6c3ff1da0d7", 240): True,  # er Voreinstellung vorhanden) angehören. | Benutzer müssen eine umask von
        ("6fa6ecdfe2a4", 142): True,  # von AMD, Intel und anderen Herstellern. | amd64 ist eine 64-Bit-Architek
        ("6fa6ecdfe2a4", 270): True,  # nen sollten heutzutage amd64 verwenden. | i386 sollte nur auf sehr alter
        ("9715df889056", 139): False,  #  nicht die Debian-Edu-Metapakete wie z. | B. education-desktop-mate (die
        ("9715df889056", 236): False,  # nen Pakete mitinstallieren), sondern z. | B. das Metapaket task-xfce-des
        ("f8e67b6ff642", 5): False,  # Back.| . führt zum Hauptmenü zurück.
        ("f8e67b6ff642", 7): False,  # Back.. | führt zum Hauptmenü zurück.
        ("4c70cc2c917f", 152): False,  # s von CD zu beschleunigen. Fügen Sie z. | B. mirror/http/proxy=http://10
        ("1c93ed7a6eed", 130): True,  # sind, damit diese sofort funktionieren. | Sie dürfen nur einen Hauptserv
        ("1c93ed7a6eed", 186): True,  # inen Hauptserver pro Schule einrichten! | Das Profil enthält keine graph
        ("1c93ed7a6eed", 239): True,  # thält keine graphische Arbeitsumgebung. | Um letztere zu erhalten, wähle
        ("dfd4be61807e", 376): True,  # en das Kapitel über Netzwerkrechner an. | Die Auswahl dieses Profils akt
        ("a3fc3e94ba21", 64): True,  # ur automatischen Partitionierung sagen. | Beachten Sie, dass Ihre Zustim
        ("a3fc3e94ba21", 147): True,  # lle Daten auf den Festplatten zerstört! | Andererseits erfordert die Abl
        ("7809cae0bb8f", 100): True,  # /debian-edu/www/debian-edu-install.dat. | Diese Datei kann geändert werd
        ("6b9f7f80f484", 310): False,  # Informationen über Schüler, Lehrer usw. | nur einmal eingegeben werden. 
        ("8aaf206aa60e", 153): True,  # s, sowie die Basisebene des LDAP-Baums. | Schülerkonten sollten zur »Stu
        ("a0a9c008eaab", 68): True,  # m Navigationsmenü auf der linken Seite. | Die rechte Seite des Fensters 
        ("21c34bb2f854", 62): True,  # -Feld ist das Menü »Aktionen« zu sehen. | Beim Überfahren mit der Maus e
        ("7eed77727ec6", 232): True,  # für die Suche bereitgestellte Werkzeug. | Wenn Sie nicht genau wissen, a
        ("acc0ba338be9", 123): True,  # h bei GOsa² mit ihrer Kennung anmelden. | Um das Auffinden der richtigen
        ("acc0ba338be9", 220): False,  # teht ein Menüeintrag »System/GOsa« bzw. | »Systemeinstellungen/GOsa« zur
        ("789ca3ab0e90", 115): True,  # esitzen spezielle Privilegien in GOsa². | Ihnen wird eine weitergehende 
        ("bc4ad24b0635", 152): False,  # asswörtern mittels einer CSV-Datei bzw. | das Generieren neuer Passwörte
        ("854fadd9797b", 41): False,  # enn die Maschinen als Thin Clients bzw. | Diskless Workstations gestarte
        ("854fadd9797b", 456): True,  # dapdhcp -h zeigt Hilfeinformationen an. | Beachten Sie bitte, dass die n
        ("988f50df1676", 72): False,  #  von /skole/tjener/home0, /etc/, /root/.| svk und LDAP im Verzeichnis /s
        ("5a579c263183", 349): True,  #  ein manuelles Eingreifen unnötig sein. | Auf Rechnern, die der »Netgrou
        ("5a579c263183", 481): True,  # rteschlangen während der Nacht geleert. | Sie könnten einen Rechner, der
        ("fcdb4a28ee79", 210): False,  # s Git-Repository befindet sich in /etc/.| git/.
        ("3be3553e0118", 96): True,  # e der verfügbaren Quellen hinzuzufügen. | apt-cdrom kümmert sich um die 
        ("afe7512aaaad", 270): True,  # group« »shutdown-at-night-hosts« hinzu. | Das Hinzufügen der Rechner zur
        ("afe7512aaaad", 393): False,  # e erfolgen. Für diese Rechner muss ggf. | im BIOS die Wake-On-Lan-Funkti
        ("6d9147905547", 199): False,  # P-Adresse, danach die MAC-Adresse (bzw. | Ethernet-Adresse), durch Leerz
        ("d2f5c4f5752b", 46): True,  #  Sie im Hauptmenü »Verzeichnistruktur«. | Klicken Sie auf die Abteilung 
        ("d2f5c4f5752b", 88): True,  # icken Sie auf die Abteilung »Students«. | Im Basis-Feld sollte »/Student
        ("d2f5c4f5752b", 139): True,  # ld sollte »/Students« angezeigt werden. | Wählen Sie aus der »Aktionen«-
        ("d2f5c4f5752b", 194): True,  # der »Aktionen«-Box »Anlegen/Abteilung«. | Geben Sie Werte in die Felder 
        ("d2f5c4f5752b", 363): True,  # rändert (es sollte »/Students« zeigen). | Klicken Sie zum Speichern auf 
        ("d2f5c4f5752b", 399): True,  # n). Klicken Sie zum Speichern auf »OK«. | Die neue Abteilung (2024) soll
        ("72d6ff4fddc2", 72): True,  # uppen«; dann »Aktionen/Anlegen/Gruppe«. | Geben Sie den Gruppennamen ein
        ("217eaf28dbe3", 41): True,  # ählen Sie aus dem Hauptmenü »Benutzer«. | Wechseln Sie im Basis-Feld zu 
        ("217eaf28dbe3", 84): True,  # hseln Sie im Basis-Feld zu »/Students«. | Es sollte dort ein Eintrag New
        ("217eaf28dbe3", 158): True,  # ent vorhanden sein: klicken Sie darauf. | Dies ist die Vorlage »NewStude
        ("217eaf28dbe3", 218): True,  #  »NewStudents«, kein normaler Benutzer. | Für den CSV-Import in Ihre Ver
        ("217eaf28dbe3", 327): True,  # orlage anlegen, die auf dieser basiert. | Notieren Sie sich deshalb alle
        ("dad7dfadd118", 218): False,  # ervers für die relevanten Subnetze bzw. | Rechner zur Verfügung stehen:
        ("7e9115cd058e", 82): True,  # k Zugang zum Export »/storage« gewährt. | (Um den NFS-Zugang einzuschrän
        ("5ebfb53f1b39", 81): True,  # a dort ein Modul für »automount« fehlt. | Verwenden Sie stattdessen »lda
        ("7807eaa920ef", 133): True,  # rmware aus »non-free« erforderlich ist. | Eine PXE-Installation könnte z
        ("cbd557dac613", 137): True,  #  das Profil »LTSP-Server« gewählt wird. | Falls sehr viele LTSP-Clients 
        ("cbd557dac613", 382): True,  # tzwerk 192.168.1.0/24 verwendet werden. | Öffnen Sie die Datei /etc/netw
        ("cbd557dac613", 488): True,  # nstellungen für »eth1« entsprechend an. | Verwenden Sie ldapvi oder eine
        ("4ca3f774b8f4", 205): True,  # bian-edu-config/tools/subnet-change an. | Dieses Skript sollte unmittelb
        ("024fb2a13a17", 118): True,  # zten Subnetze nicht funktionieren wird. | 192.168.0.0/24 und 192.168.1.0
        ("324e64c03ef6", 45): False,  # , was in Debian 12 Bookworm neu ist, z. | B.:
        ("324e64c03ef6", 47): False,  # was in Debian 12 Bookworm neu ist, z. B.| :
        ("8a9ded92f75c", 45): False,  # , was in Debian 11 Bullseye neu ist, z. | B.:
        ("8a9ded92f75c", 47): False,  # was in Debian 11 Bullseye neu ist, z. B.| :
        ("9e7931fa4d9c", 36): False,  # Debian Edu 2.0, freigegeben am14.3. | 2006. Basierend auf Debian-3.1
        ("9e7931fa4d9c", 42): True,  # bian Edu 2.0, freigegeben am14.3. 2006. | Basierend auf Debian-3.1, Code
        ("4baf59bd8e85", 166): True,  # verfügbar: i386- bzw. amd64. | Wie der Name schon sagt (all five miss it)
    },
}


class Paragraphs(HTMLParser):
    """The text of each <p> of an HTML file, its whitespace runs made one space."""

    def __init__(self):
        super().__init__()
        self.depth, self.parts, self.found = 0, [], []

    def handle_starttag(self, tag, attrs):
        if tag == "p":
            self.depth += 1
            self.parts = []

    def handle_endtag(self, tag):
        if tag == "p" and self.depth:
            self.depth -= 1
            text = " ".join("".join(self.parts).split())
            if text:
                self.found.append(text)

    def handle_data(self, data):
        if self.depth:
            self.parts.append(data)


def paragraphs(path: str) -> List[str]:
    reader = Paragraphs()
    with open(path, encoding="utf-8") as f:
        reader.feed(f.read())
    return reader.found


def key(paragraph: str) -> str:
    return hashlib.sha1(paragraph.encode("utf-8")).hexdigest()[:12]


def manual(lang: str, manual_dir: str = None) -> List[str]:
    """The paragraphs of the manual in ``lang`` (German without those that are the same in English)."""
    def path(code):
        if manual_dir:
            return os.path.join(manual_dir, os.path.basename(MANUAL.format(lang=code)).replace(
                ".html", f".{code}.html"))
        return MANUAL.format(lang=code)
    for code in LANGS:
        if not os.path.isfile(path(code)):
            sys.exit(f"{path(code)} not found: apt-get install debian-edu-doc-{code} (or --manual-dir)")
    found = paragraphs(path(lang))
    if lang != "en":
        english = set(paragraphs(path("en")))
        found = [p for p in found if p not in english]
    seen, unique = set(), []
    for p in found:  # a paragraph that is there twice counts once
        if p not in seen:
            seen.add(p)
            unique.append(p)
    return unique


def starts(paragraph: str, sentences: List[str]) -> Set[int]:
    """The offsets in ``paragraph`` where the second, third, ... of ``sentences`` start."""
    found, at = [], 0
    for sentence in sentences:
        sentence = sentence.strip()
        if not sentence:
            continue
        i = paragraph.find(sentence, at)
        if i < 0:
            raise ValueError(f"a splitter changed the text: {sentence[:60]!r} is not in {paragraph[:60]!r}")
        found.append(i)
        at = i + len(sentence)
    return set(found[1:])


def splitters(lang: str) -> Dict[str, Callable[[str], List[str]]]:
    """Every splitter that is installed, by name; the project's own as "fairseq-rope"."""
    from fairseq_rope_text.running_text import sentences_of

    found = {"fairseq-rope": lambda text: sentences_of(text, lang)}
    try:
        from sentencex import segment
        found["sentencex"] = lambda text: list(segment(lang, text))
    except ImportError:
        pass
    try:
        from sentence_splitter import SentenceSplitter
        moses = SentenceSplitter(language=lang)
        found["sentence-splitter (Moses)"] = moses.split
    except ImportError:
        pass
    try:
        import pysbd
        sbd = pysbd.Segmenter(language=lang, clean=False)
        found["pysbd"] = sbd.segment
    except ImportError:
        pass
    try:
        from segtok.segmenter import split_single
        found["segtok"] = lambda text: list(split_single(text))
    except ImportError:
        pass
    try:
        import blingfire
        found["blingfire"] = lambda text: blingfire.text_to_sentences(text).split("\n")
    except ImportError:
        pass
    return found


CANDIDATE = re.compile(r"[.!?…][\"'»«“”)\]]*\s+(?=\S)")


def make_gold(manual_dir=None) -> dict:
    gold = {}
    for lang in LANGS:
        found = splitters(lang)
        found.pop("fairseq-rope")
        if len(found) != 5:
            sys.exit(f"gold needs all five splitters; installed: {', '.join(found)}")
        decided, undecided = {}, []
        for paragraph in manual(lang, manual_dir):
            k = key(paragraph)
            proposed = {name: starts(paragraph, split(paragraph)) for name, split in found.items()}
            candidates = set().union(*proposed.values()) | {m.end() for m in CANDIDATE.finditer(paragraph)}
            boundaries = []
            for at in sorted(candidates):
                votes = sum(at in p for p in proposed.values())
                if (k, at) in ADJUDICATED[lang]:
                    verdict = ADJUDICATED[lang][(k, at)]
                elif votes in (0, len(found)):
                    verdict = votes > 0
                else:
                    undecided.append(f'("{k}", {at}): ?,  # {paragraph[max(0, at - 40):at]}| {paragraph[at:at + 30]}')
                    continue
                if verdict:
                    boundaries.append(at)
            decided[k] = boundaries
        if undecided:
            sys.exit(f"{lang}: {len(undecided)} candidates to decide in ADJUDICATED:\n" + "\n".join(undecided))
        gold[lang] = decided
    return gold


def score(lang: str, split: Callable[[str], List[str]], gold: Dict[str, List[int]], texts: List[str]) -> dict:
    """Boundary precision and recall, and the share of paragraphs split exactly right (of all, and of
    those with more than one sentence)."""
    true_pos = predicted = actual = exact = multi = multi_exact = 0
    for paragraph in texts:
        want = set(gold[key(paragraph)])
        got = starts(paragraph, split(paragraph))
        true_pos += len(want & got)
        predicted += len(got)
        actual += len(want)
        exact += want == got
        if want:
            multi += 1
            multi_exact += want == got
    return {"precision": true_pos / max(predicted, 1), "recall": true_pos / max(actual, 1),
            "paragraphs_exact": exact / len(texts), "paragraphs": len(texts), "boundaries": actual,
            "found": true_pos, "wrong": predicted - true_pos, "multi_sentence_exact": multi_exact / max(multi, 1),
            "multi_sentence_paragraphs": multi}


def table(manual_dir=None) -> dict:
    with open(GOLD, encoding="utf-8") as f:
        gold = json.load(f)
    results = {}
    for lang in LANGS:
        texts = [p for p in manual(lang, manual_dir) if key(p) in gold[lang]]
        missing = len(gold[lang]) - len(texts)
        if missing:
            sys.exit(f"{missing} paragraphs of the boundaries file are not in the {lang} manual installed "
                     "(another version of debian-edu-doc?)")
        results[lang] = {name: score(lang, split, gold[lang], texts) for name, split in splitters(lang).items()}
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["table", "gold"])
    ap.add_argument("--json", action="store_true", help="table: as JSON")
    ap.add_argument("--manual-dir", help="the two HTML files (debian-edu-bookworm-manual.{en,de}.html) "
                                         "instead of the installed packages")
    args = ap.parse_args(argv)
    if args.what == "gold":
        gold = make_gold(args.manual_dir)
        os.makedirs(os.path.dirname(GOLD), exist_ok=True)
        with open(GOLD + ".tmp", "w", encoding="utf-8") as f:
            json.dump(gold, f, indent=0, sort_keys=True)
        os.replace(GOLD + ".tmp", GOLD)
        print(f"wrote {GOLD}: " + ", ".join(f"{lang} {len(g)} paragraphs, {sum(map(len, g.values()))} boundaries"
                                          for lang, g in gold.items()))
        return
    results = table(args.manual_dir)
    if args.json:
        print(json.dumps(results, indent=1))
        return
    for lang, rows in results.items():
        first = next(iter(rows.values()))
        print(f"\n{lang}: {first['paragraphs']} paragraphs ({first['multi_sentence_paragraphs']} of more than one "
              f"sentence), {first['boundaries']} boundaries\n")
        print("| splitter | boundaries found | wrong boundaries | precision | recall | paragraphs exactly right "
              "| of those with several sentences |")
        print("|---|---|---|---|---|---|---|")
        for name, r in rows.items():
            print(f"| {name} | {r['found']} | {r['wrong']} | {100 * r['precision']:.1f} | {100 * r['recall']:.1f} | "
                  f"{100 * r['paragraphs_exact']:.1f} | {100 * r['multi_sentence_exact']:.1f} |")


if __name__ == "__main__":
    main()
