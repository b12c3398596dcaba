"""Sentence splitters measured on real running prose with known sentence boundaries, in two corpora.

The manual (``--corpus manual``, the default): the Debian Edu Bookworm manual in English and German
(Debian's packages debian-edu-doc-en and debian-edu-doc-de, 2.12.23~deb12u1, GPL-2+; written and
translated by the Debian Edu project), its HTML paragraphs (<p>, code and all) as running text;
technical prose. German paragraphs that are the same in the English manual (the untranslated GPL, a few
notes) are left out of German.

The fortunes (``--corpus fortunes``): narrative prose with dialogue and quotes, jokes, anecdotes and
quotations, from Debian's fortune cookie packages fortunes (1:1.99.1-7.3: English) and fortunes-de
(0.35-1: German), the files of FORTUNES_FILES; each cookie (between "%" lines) cut at its blank lines
into paragraphs, an attribution ("-- Mark Twain", to the paragraph's end) left out, the lines of a
paragraph joined (its whitespace runs made one space).

The boundaries: tests/data/sentence_boundaries.json (the manual's) and
tests/data/sentence_boundaries_fortunes.json, the character offsets where each paragraph's second,
third, ... sentence starts, keyed by a hash of the paragraph (the text itself is not copied here). They
were made by ``gold``: every offset where any of five splitters starts a sentence, and every
sentence-final mark followed by a space where none does, is a candidate; the candidates all five agree on
keep their verdict, the others were decided by reading them (ADJUDICATED below, one line each, with the
words around them). A numbered item's label ("1. You may ...") is part of its sentence; a closing quote
or bracket after a sentence's end belongs to that sentence.

    python -m scripts.sentence_splitters table                      # the manual's table of docs/serving.md
    python -m scripts.sentence_splitters table --corpus fortunes    # the fortunes' table
    python -m scripts.sentence_splitters table --json               # the same as JSON
    python -m scripts.sentence_splitters gold [--corpus fortunes]   # rewrite the boundaries (needs all five)

Needs the corpus's packages (``apt-get install debian-edu-doc-en debian-edu-doc-de``, or --source-dir
with the two HTML files; ``apt-get install fortunes fortunes-de``, or --source-dir with the fortunes
directory) and, for the table, the splitters to compare (pip install sentence-splitter pysbd segtok
blingfire; those missing are left out and named).
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
FORTUNES = "/usr/share/games/fortunes"
# the fortune files of each language (under FORTUNES): narrative prose, dialogue and quotes, not verse,
# lists or ASCII art
FORTUNES_FILES = {"en": ("humorists", "literature"),
                  "de": ("de/anekdoten", "de/kinderzitate", "de/letzteworte", "de/stilblueten")}

# corpus, language, (paragraph's hash, offset): is a sentence boundary, for every candidate the five
# splitters did not agree on (and those all five missed); the words around it as a comment
ADJUDICATED = {"manual": {
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
}, "fortunes": {
    "en": {
        ("11a7de8106b3", 730): True,  # aid, "Hold it, stupid, that's flypaper. | All those flies are trapped."
        ("11a7de8106b3", 760): True,  # flypaper. All those flies are trapped." | "Don't be silly," said the fly
        ("6fba998baa08", 47): True,  # f people are afraid of heights. Not me. | I'm afraid of widths.
        ("54d0cae50b89", 104): False,  # ust a burglar, come to ransack the flat.| "
        ("6d978bd0420d", 40): True,  # "But I don't want to go on the cart..." | "Oh, don't be such a baby!" "B
        ("6d978bd0420d", 68): True,  # he cart..." "Oh, don't be such a baby!" | "But I'm feeling much better..
        ("6d978bd0420d", 101): True,  # baby!" "But I'm feeling much better..." | "No you're not... in a moment
        ("6d978bd0420d", 119): False,  # eling much better..." "No you're not... | in a moment you'll be stone de
        ("67854d90c54f", 305): True,  # w about: Would you please take my wife? | No. How about: Here is my wife
        ("67854d90c54f", 309): True,  # out: Would you please take my wife? No. | How about: Here is my wife, pl
        ("67854d90c54f", 364): True,  #  is my wife, please take her right now. | No How about: Would you like t
        ("67854d90c54f", 412): True,  # bout: Would you like to take something? | My wife is available. No. How
        ("67854d90c54f", 434): True,  # o take something? My wife is available. | No. How about ..."
        ("67854d90c54f", 438): True,  # ke something? My wife is available. No. | How about ..."
        ("45e2fce06910", 58): True,  # got a humidifier and a de-humidifier... | I put them in the same room an
        ("df9cdc3b78f3", 75): False,  #  verses nine through twenty-seven: Bro. | Maynard: And Saint Attila rais
        ("df9cdc3b78f3", 540): True,  #  thou count to three. No more, no less. | *Three* shall be the number of
        ("df9cdc3b78f3", 632): True,  #  number of the counting shall be three. | *Four* shalt thou not count, a
        ("df9cdc3b78f3", 915): True,  # ng naughty in my sight, shall snuff it. | Amen. All: Amen.
        ("026ef8de3745", 61): True,  # ught never even crossed my mind, lord." | "Indeed? Then if I were you I'
        ("026ef8de3745", 70): True,  # r even crossed my mind, lord." "Indeed? | Then if I were you I'd sue my
        ("e427514c7076", 40): True,  # "I changed my headlights the other day. | I put in strobe lights instead
        ("e427514c7076", 72): True,  # er day. I put in strobe lights instead! | Now when I drive at night, it
        ("972fab9f9c6d", 69): True,  # rk and this man followed in after me... | I pushed '1' and he just stood
        ("972fab9f9c6d", 109): True,  # I pushed '1' and he just stood there... | I said 'Hi, where you going?'
        ("972fab9f9c6d", 139): True,  #  there... I said 'Hi, where you going?' | He said, 'Phoenix.' So I pushe
        ("972fab9f9c6d", 159): True,  # , where you going?' He said, 'Phoenix.' | So I pushed Phoenix. A few sec
        ("972fab9f9c6d", 180): True,  # e said, 'Phoenix.' So I pushed Phoenix. | A few seconds later the doors
        ("972fab9f9c6d", 245): False,  # oors opened, two tumbleweeds blew in... | we were in downtown Phoenix. I
        ("972fab9f9c6d", 274): True,  # blew in... we were in downtown Phoenix. | I looked at him and said 'You
        ("972fab9f9c6d", 362): True,  # ind of guy I want to hang around with.' | We got into his car and drove
        ("972fab9f9c6d", 424): True,  # d drove out to his shack in the desert. | Then the phone rang. He said '
        ("972fab9f9c6d", 445): True,  # ack in the desert. Then the phone rang. | He said 'You get it.' I picked
        ("972fab9f9c6d", 467): True,  # n the phone rang. He said 'You get it.' | I picked it up and said 'Hello
        ("972fab9f9c6d", 503): False,  # t.' I picked it up and said 'Hello?'... | the other side said 'Is this S
        ("972fab9f9c6d", 551): True,  # r side said 'Is this Steven Wright?'... | I said 'Yes...' The guy said '
        ("972fab9f9c6d", 567): True,  # this Steven Wright?'... I said 'Yes...' | The guy said 'Hi, I'm Mr. Jone
        ("972fab9f9c6d", 644): True,  # student loan director from your bank... | It seems you have missed your
        ("972fab9f9c6d", 785): False,  # ed none of the $17,000 we loaned you... | we would just like to know wha
        ("972fab9f9c6d", 841): True,  # ke to know what happened to the money?' | I said, 'Mr. Jones, I'll give
        ("972fab9f9c6d", 891): True,  # r. Jones, I'll give it to you straight. | I gave all of the money to my
        ("7e298993ca8f", 91): False,  # all him, I'd say, "Here, Stay, here..." | but he got wise to that. Now w
        ("ef14c9755910", 136): True,  #  a great idea he said, "Well first I... | I just... to make a long story
        ("ef14c9755910", 146): False,  # dea he said, "Well first I... I just... | to make a long story short..."
        ("33c39f9f66a0", 56): True,  #  morning cartoons, what classic humour! | This is what entertainment is
        ("33c39f9f66a0", 100): True,  #  is what entertainment is all about ... | Idiots, explosives and falling
        ("f455b43a379d", 157): True,  #  GO DOWNHILL VERY QUICKLY AT MIDNIGHT." | "Why?" "THAT'S WHEN THEY THINK
        ("f455b43a379d", 164): True,  # NHILL VERY QUICKLY AT MIDNIGHT." "Why?" | "THAT'S WHEN THEY THINK I'LL B
        ("615c499ae80f", 115): True,  # weatherman said "I don't understand it. | I was supposed to be 80 degree
        ("6fafe188e655", 67): False,  #  I have paintings of the rooms above... | so I never have to go upstairs
        ("2899a2c884ff", 55): True,  # st night, crawled home across the lawn. | By accident I put the car key
        ("2899a2c884ff", 103): True,  # ent I put the car key in the door lock. | The house started up. So I fig
        ("2899a2c884ff", 125): True,  # in the door lock. The house started up. | So I figured what the hell, an
        ("2899a2c884ff", 196): True,  #  drove it around the block a few times. | I thought I should go park it
        ("a89a4c6c6288", 433): True,  #  at the last second you catch yourself? | I feel like that all the time.
        ("582ea06a7a56", 163): True,  #  told my roommate, "Isn't this amazing? | Everything in the apartment ha
        ("da96e8287497", 21): False,  # In America today ... | we have Woody Allen, whose hum
        ("64a2f6e96b05", 71): False,  # ountry... We switched on the driving... | every half mile. We had one ca
        ("a85128d49c3f", 32): True,  # Q -- Is there life after death? | A -- Definitely. I speak from
        ("24cc89528281", 387): True,  # out eyes, and they are known as idio--" | The interruption was caused by
        ("24cc89528281", 622): True,  # sted aside and the apparition vanished. | There was a long silence. Then
        ("24cc89528281", 648): True,  # ion vanished. There was a long silence. | Then a slightly shorter silenc
        ("24cc89528281", 681): True,  # lence. Then a slightly shorter silence. | Then the old shaman said caref
        ("24cc89528281", 832): False,  # ng and screaming at each other, did you?| " The boy looked at him levell
        ("24cc89528281", 834): True,  #  and screaming at each other, did you?" | The boy looked at him levelly.
        ("24cc89528281", 865): True,  # id you?" The boy looked at him levelly. | "Certainly not," he said. The
        ("24cc89528281", 866): False,  # d you?" The boy looked at him levelly. "| Certainly not," he said. The o
        ("24cc89528281", 891): True,  #  him levelly. "Certainly not," he said. | The old man heaved a sigh of r
        ("24cc89528281", 928): True,  # d. The old man heaved a sigh of relief. | "Thank goodness for that," he
        ("24cc89528281", 929): False,  # . The old man heaved a sigh of relief. "| Thank goodness for that," he s
        ("24cc89528281", 964): True,  # ef. "Thank goodness for that," he said. | "Neither did I."
        ("24cc89528281", 965): False,  # f. "Thank goodness for that," he said. "| Neither did I."
        ("24cc89528281", 979): False,  # ness for that," he said. "Neither did I.| "
        ("db371064e3f7", 16): False,  # Some of you ... | may have decided that, this ye
        ("4c96ce8e5580", 156): True,  # s and crowded and difficult to park in. | Malls, on the other hand, have
        ("0f55340fa6b4", 364): True,  # ask, gnat spray, space suit, etc., etc. | Furthermore, the non-hitchhike
        ("87237caa9f0f", 19): False,  # The other day I... | uh, no, that wasn't me.
        ("8c54d4bf3e42", 26): True,  # "The pyramid is opening!" | "Which one?" "The one with the
        ("8c54d4bf3e42", 39): True,  # "The pyramid is opening!" "Which one?" | "The one with the ever-widenin
        ("9c0697208b7c", 31): True,  # This land is full of trousers! | this land is full of mausers!
        ("07d8d94387b3", 20): False,  # "What shall we do?" | said Twoflower. "Panic?" said
        ("07d8d94387b3", 45): False,  #  shall we do?" said Twoflower. "Panic?" | said Rincewind hopefully. He a
        ("07d8d94387b3", 329): False,  # here saying "What a magnificent brute!" | and "Here, pussy."
        ("980b7ae2b166", 86): True,  # ey asked if I had any firearms with me. | I said, "Well, what do you nee
        ("60931e6cba0b", 137): False,  # you had to rub balloons on your head... | if you wanted to cook, you had
        ("a5ec7c922591", 222): True,  # at my mother told me when I was young!" | "Why, what did she tell you?"
        ("a5ec7c922591", 252): True,  # s young!" "Why, what did she tell you?" | "I don't know, I didn't listen
        ("d747a65c0f9f", 48): False,  # S RANDOM QUOTES FROM MATCH GAME 75, NO. | 1:
        ("9f251c0ca233", 17): False,  # Gene Rayburn: ...| pithy, full of wisdom --- and
        ("498b22119c6b", 5): False,  # "... | all the modern inconveniences
        ("9e397bf70a2e", 5): False,  # "... | an experienced, industrious, a
        ("c53c88dadca3", 69): True,  # , mastery of fear--not absence of fear. | Except a creature be part cowa
        ("c53c88dadca3", 194): True,  # ely a loose misapplication of the word. | Consider the flea!--incomparab
        ("c53c88dadca3", 212): False,  # lication of the word. Consider the flea!| --incomparably the bravest of
        ("60f4c84c10d5", 5): False,  # F.S. | Fitzgerald to Hemingway: "Erne
        ("60f4c84c10d5", 89): True,  # re different from us." Hemingway: "Yes. | They have more money."
        ("8eac28e18f9d", 173): True,  # ts of all Three shall strive within me. | I will not shut out the lesson
        ("fc3fad20f5c1", 69): True,  # f, "what's in a book while it's closed. | Oh, I know it's full of letter
        ("162edefb4415", 134): False,  # dred and forty-two miles. Therefore ... | in the Old Silurian Period the
        ("162edefb4415", 247): False,  # n three hundred thousand miles long ... | seven hundred and forty-two ye
        ("162edefb4415", 351): True,  # be only a mile and three-quarters long. | ... There is something fascina
        ("4685ca8b5727", 20): False,  # question = ( to ) ? | be : ! be;
        ("bb9c30e9494c", 323): False,  # aircraft carrier in the Formosa Straits.| '
        ("87fe4cb2948a", 168): False,  # eet pops its head into the shop. "What! | no soap?" So he died, and she
        ("15b0cb559603", 207): True,  # ll us the secret thing that is in thee. | Of all divers, thou has dived
        ("15b0cb559603", 250): True,  # all divers, thou has dived the deepest. | That head upon which the upper
        ("15b0cb559603", 336): True,  # has moved amid the world's foundations. | Where unrecorded names and nav
        ("15b0cb559603", 576): True,  # land, there was thy most familiar home. | Thou hast been where bell or d
        ("15b0cb559603", 723): True,  # ould give their lives to lay them down. | Thou saw'st the locked lovers
        ("15b0cb559603", 897): True,  # ther, when heaven seemed false to them. | Thou saw'st the murdered mate
        ("15b0cb559603", 1211): True,  #  husband to outstretched, longing arms. | O head! thou has seen enough t
        ("15b0cb559603", 1219): False,  #  to outstretched, longing arms. O head! | thou has seen enough to split
        ("b44f3e41356c", 116): False,  # ing "It was a dark and stormy night..." | he is borrowing from Lord Bulw
        ("82aec3feacf6", 436): True,  # passage that does not quite please me." | Pope was rendered speechless,
        ("82aec3feacf6", 618): True,  # the place and consider at your leisure. | I'm sure you can give it a bet
        ("82aec3feacf6", 1002): True,  # , and then read them to him as altered. | I have known him much longer t
        ("82aec3feacf6", 1284): True,  # mmented, "now they are perfectly right. | Nothing can be better."
        ("a73d7c115f92", 54): True,  # f the song is called 'Haddocks' Eyes'!" | "Oh, that's the name of the so
        ("a73d7c115f92", 237): True,  # vexed. "That's what the name is called. | The name really is, 'The Aged
        ("a73d7c115f92", 279): True,  # e name really is, 'The Aged Aged Man.'" | "Then I ought to have said "Th
        ("a73d7c115f92", 339): False,  # e said "That's what the song is called'?| " Alice corrected herself. "No
        ("a73d7c115f92", 341): True,  # said "That's what the song is called'?" | Alice corrected herself. "No,
        ("a73d7c115f92", 366): True,  # g is called'?" Alice corrected herself. | "No, you oughtn't: that's quit
        ("a73d7c115f92", 367): False,  #  is called'?" Alice corrected herself. "| No, you oughtn't: that's quite
        ("a73d7c115f92", 493): False,  #  that's only what it is called you know!| " "Well, what is the song then
        ("a73d7c115f92", 495): True,  # hat's only what it is called you know!" | "Well, what is the song then?"
        ("a73d7c115f92", 524): False,  # you know!" "Well, what is the song then?| " said Alice, who was by this
        ("a73d7c115f92", 526): False,  # u know!" "Well, what is the song then?" | said Alice, who was by this ti
        ("a73d7c115f92", 582): True,  # was by this time completely bewildered. | "I was coming to that," the Kn
        ("a73d7c115f92", 583): False,  # as by this time completely bewildered. "| I was coming to that," the Kni
        ("a73d7c115f92", 623): True,  # I was coming to that," the Knight said. | "The song really is "A-sitting
        ("a73d7c115f92", 624): False,  #  was coming to that," the Knight said. "| The song really is "A-sitting
        ("a73d7c115f92", 698): False,  #  Gate": and the tune's my own invention.| "
        ("3c315f3e248d", 268): True,  # the manuscript of his forthcoming book. | No. 1 admits you to his respec
        ("b86ae10c8a0d", 170): True,  # le Haggard song at a French restaurant. | [...] I could not tell the gir
        ("b86ae10c8a0d", 176): False,  # gard song at a French restaurant. [...] | I could not tell the girl abou
        ("b86ae10c8a0d", 412): True,  # ne told him, "You ride the bull, senor. | You do not fight it." But he w
        ("b86ae10c8a0d", 603): True,  # nners, just men doing what men must do. | [...] "Stop the car," the girl
        ("b86ae10c8a0d", 609): False,  #  just men doing what men must do. [...] | "Stop the car," the girl said.
        ("b71cc86bdeff", 964): True,  # ome right out and say: "Is there a God? | It sure beats the heck out of
        ("b71cc86bdeff", 999): True,  # God? It sure beats the heck out of me." | Other famous works could easil
        ("4238703da8af", 102): True,  # hey symbolize nature and will kill you. | * "A Tale of Two Cities" -- Fr
        ("2e11c57d185a", 49): True,  #  heard me speak of Professor Moriarty?" | "The famous scientific crimina
        ("cb9042d9e7aa", 14): True,  # "What's this? | Trix? Aunt! Trix? You? You're
        ("cb9042d9e7aa", 20): True,  # "What's this? Trix? | Aunt! Trix? You? You're after
        ("cb9042d9e7aa", 26): True,  # "What's this? Trix? Aunt! | Trix? You? You're after the pr
        ("cb9042d9e7aa", 32): True,  # "What's this? Trix? Aunt! Trix? | You? You're after the prize! W
        ("cb9042d9e7aa", 37): True,  # "What's this? Trix? Aunt! Trix? You? | You're after the prize! What i
        ("cb9042d9e7aa", 61): True,  # unt! Trix? You? You're after the prize! | What is it?" He picked up the
        ("cb9042d9e7aa", 144): True,  # ed the back. "A glow-in-the-dark squid! | Have you got it out of there y
        ("4aa8aa75619f", 24): True,  # "Good afternoon, madam. | How may I help you?"
        ("e88ceb9d36e0", 17): True,  # "Good afternoon. | I'd like a FrintArms HandCanno
        ("fe5a3d26a6c6", 6): True,  # "A--? | Oh, now, that's an awfully big
        ("fe5a3d26a6c6", 65): True,  # awfully big gun for such a lovely lady. | I mean, not everybody thinks l
        ("fe5a3d26a6c6", 162): True,  # all, though I say they have a right to. | But I think... I might... Let'
        ("fe5a3d26a6c6", 177): True,  # ay they have a right to. But I think... | I might... Let's have a look d
        ("fe5a3d26a6c6", 188): True,  # e a right to. But I think... I might... | Let's have a look down here. I
        ("fe5a3d26a6c6", 217): True,  # I might... Let's have a look down here. | I might have just the thing fo
        ("fe5a3d26a6c6", 254): True,  # e. I might have just the thing for you. | Yes, here we are! Look at that
        ("fe5a3d26a6c6", 272): True,  # st the thing for you. Yes, here we are! | Look at that, isn't it neat? N
        ("fe5a3d26a6c6", 301): True,  # re we are! Look at that, isn't it neat? | Now that is a FrintArms produc
        ("fe5a3d26a6c6", 414): True,  # - a light-pistol some people call them. | Very small, as you see; fits e
        ("fe5a3d26a6c6", 578): True,  # g half a tonne of iron around with you. | We do a range of matching acce
        ("fe5a3d26a6c6", 680): True,  # ay so -- a rather saucy garter holster. | Wish I got to do the fitting f
        ("fe5a3d26a6c6", 719): True,  #  Wish I got to do the fitting for that! | Ha -- just my little joke. And
        ("fe5a3d26a6c6", 746): True,  # ng for that! Ha -- just my little joke. | And there's *even*... here we
        ("fe5a3d26a6c6", 768): False,  # t my little joke. And there's *even*... | here we are -- this special pr
        ("fe5a3d26a6c6", 976): True,  # g, and a discount on your next battery. | Full instructions, of course,
        ("fe5a3d26a6c6", 1070): True,  # essons at your local gun club or range. | Or there's the *special* prese
        ("fe5a3d26a6c6", 1202): True,  # arged batteries and a night-sight, too. | Here, feel that -- don't worry
        ("fe5a3d26a6c6", 1273): True,  #  it's a dummy battery -- isn't it neat? | Feel how light it is? Smooth,
        ("fe5a3d26a6c6", 1295): True,  # -- isn't it neat? Feel how light it is? | Smooth, see? No bits to stick
        ("fe5a3d26a6c6", 1308): True,  # eat? Feel how light it is? Smooth, see? | No bits to stick out and catch
        ("fe5a3d26a6c6", 1384): True,  # ur clothes, *and* beautifully balanced. | And of course the beauty of a
        ("fe5a3d26a6c6", 1443): True,  # eauty of a laser is, there's no recoil. | Because it's shooting light, y
        ("fe5a3d26a6c6", 1481): True,  # . Because it's shooting light, you see? | Beautiful gun, beautiful gun;
        ("fe5a3d26a6c6", 1528): True,  # ul gun, beautiful gun; my wife has one. | Really. That's not a line, she
        ("fe5a3d26a6c6", 1536): True,  # beautiful gun; my wife has one. Really. | That's not a line, she really
        ("fe5a3d26a6c6", 1571): True,  # lly. That's not a line, she really has. | Now, I can do you that one --
        ("e70078df650d", 38): True,  # "Sound choice, madam, *sound* choice. | Now, do--?"
        ("197b6f3b3c31", 238): True,  # he embedding rounds, not the signalers. | I assume the night-sight on th
        ("3230110953f3", 8): False,  # "Aah... | yes, And how does madam wish t
    },
    "de": {
        ("8ddabc07c208", 368): False,  # chtlich vergessen, es wieder abzusetzen.| "
        ("65e2f3d26569", 319): False,  # n war ich also noch nicht essen gewesen.| "
        ("d08c64d0d041", 458): False,  #  worauf er antwortete: "Ja, Officer ... | das ist sie. Das ist die Dame,
        ("d08c64d0d041", 471): True,  # twortete: "Ja, Officer ... das ist sie. | Das ist die Dame, der ich den
        ("d08c64d0d041", 527): False,  # , der ich den Geldbeutel gestohlen habe.| "
        ("c67b55bfa8f2", 66): False,  # n Ordnungskräften ein gewisser Rudolf R.| : Er klettert in einen Panzerw
        ("309cc7ca5b17", 296): False,  # gemaltes Pappschild "RADARFALLE VORAUS!!| !". Der führte die Polizisten
        ("d99d4a745a9e", 104): False,  # ügel, die die "Die Gleichen" heißen. C. | F. Gauss war einige Zeit Profe
        ("d99d4a745a9e", 107): False,  # l, die die "Die Gleichen" heißen. C. F. | Gauss war einige Zeit Professo
        ("d99d4a745a9e", 383): False,  # s von einem zum anderen gleich weit ist.| "
        ("508c62e9dcb2", 124): False,  # über der Tür hängen hatte. 'Professor!' | sagte er, 'Sie? Ein Hufeisen?
        ("508c62e9dcb2", 140): True,  # gen hatte. 'Professor!' sagte er, 'Sie? | Ein Hufeisen? Glauben Sie denn
        ("508c62e9dcb2", 154): True,  # ofessor!' sagte er, 'Sie? Ein Hufeisen? | Glauben Sie denn daran?' Worau
        ("508c62e9dcb2", 221): True,  # rauf Bohr antwortete: 'Natürlich nicht. | Aber wissen Sie, Herr Pauli, e
        ("8a8385e31f98", 378): False,  # ng: "Highway Patrolmen don't have balls.| " Es war einen Moment still, u
        ("8a8385e31f98", 380): True,  # : "Highway Patrolmen don't have balls." | Es war einen Moment still, und
        ("c49a7822d830", 51): True,  # d viele andere Fische legen Leichen ab. | Nur so können sie sich vermehr
        ("36c1f8df9ef9", 43): False,  #  geht nicht", sagte Papst Impotenz III. | und lehnte händeringend die Bi
        ("17cb99d8f508", 78): False,  # ämpchen da blinkt - ach vergessen wir's.| "
        ("4a67d407686d", 76): False,  # "Die paar Terroristen sind keine Gefahr.| "
        ("192c183bbd7f", 75): False,  # hefs: "Bei uns kann da nichts passieren.| "
        ("3a822cadfb3f", 98): False,  # euch nicht drum, das war schon immer so.| "
        ("5f30352aed5a", 55): False,  # nes Anglers: "Die Sache hat einen Haken.| "
        ("0663a4ee614f", 66): False,  # ers: "Aber sicher ist das Gerüst stabil.| "
        ("37493f7ce05e", 59): False,  # Architekten: "Da fällt mir noch was ein.| "
        ("344884b4f3d2", 86): False,  # eine Luft reicht noch 'ne Viertelstunde.| "
        ("4880b4b2ebf3", 52): True,  #  eines Atomphysikers: "Kritische Masse? | Nie gehört."
        ("4880b4b2ebf3", 63): False,  # physikers: "Kritische Masse? Nie gehört.| "
        ("e3a9919ae8f8", 61): False,  # sbrechers: "Die Leiter hängt jetzt fest.| "
        ("d9f046eefee4", 81): False,  # s: "Scheiß Baum, weich doch endlich aus.| "
        ("3af9a9ec24ed", 55): False,  # nes Autofahrers: "Die Kurve schaffe ich.| "
        ("a8c0840074e0", 87): False,  #  nicht abblendet, ich tue es auch nicht.| "
        ("9c64282facb4", 73): False,  # "Laß mal die Hebebühne ein Stück runter.| "
        ("20112a19dbfa", 46): True,  #  Worte eines Bademeisters: "Halt durch. | Ich rette dich."
        ("20112a19dbfa", 61): False,  # demeisters: "Halt durch. Ich rette dich.| "
        ("3d1bc7229236", 65): False,  # eschädigten Baumes: "It's raining again.| "
        ("7b4e1f48667a", 82): False,  # be da habe ich mich irgendwo verrechnet.| "
        ("186cfbcd0338", 62): False,  # tterers im Auto als Beifahrer: "Frei... | frei... frei... frei... freili
        ("186cfbcd0338", 70): False,  # im Auto als Beifahrer: "Frei... frei... | frei... frei... freilich kommt
        ("186cfbcd0338", 78): False,  # als Beifahrer: "Frei... frei... frei... | frei... freilich kommt was!"
        ("186cfbcd0338", 86): False,  # ahrer: "Frei... frei... frei... frei... | freilich kommt was!"
        ("f01122300006", 55): False,  # nes Beifahrers: "Grün ist der Lastwagen.| "
        ("18f8934f4428", 56): False,  # es Beifahrers: "Rechts ist (alles) frei.| "
        ("5ac5a4bc0a80", 80): False,  # st frei, links bezahlt die Versicherung.| "
        ("92698ac6489a", 50): False,  # te eines Bekloppten: "Ich bin ein Vogel.| "
        ("4df87ec5140b", 49): False,  # rte eines Bergsteigers: "Der Haken hält.| "
        ("c885d2656d0d", 48): False,  # orte eines Bergsteigers: "Das Seil hält.| "
        ("4f68e4dcf3b8", 78): False,  #  Du, genau so muß man den Knoten machen.| "
        ("3c50e2c522a0", 82): False,  # r nicht mal teuer, diese Karabinerhaken.| "
        ("32fee30442cf", 59): False,  # Bettnässers: "Mach mal die Heizdecke an.| "
        ("0b8988e93cae", 74): False,  # Schlange kenn ich, die ist nicht giftig.| "
        ("dbf04e11b8e4", 52): False,  #  eines Blinden: "Ich hab's kommen sehen.| "
        ("957ea0b83e6f", 52): False,  #  eines Börsianers: "Sofort alles kaufen.| "
        ("20a1165c291a", 66): False,  # ntschärfers: "Ich nehm' den roten Draht.| "
        ("22c1b55d8c0a", 91): False,  # "Klar kannst Du das Kabeldurchschneiden.| "
        ("0224716b9dff", 50): False,  # te eines Briefträgers: "Braves Hundchen.| "
        ("72d1ec9629a4", 77): False,  # chenk, so ein Feuerzeug in Revolverform.| "
        ("91b9bbd75653", 74): False,  #  das Reagenzglas bitte in _Ruhe_ stehen.| "
        ("bd4600517a26", 81): False,  # für Stickstoff - und das brennt *nicht*.| "
        ("ee2c5bd85411", 66): False,  # rs: "Also irgendetwas stimmt hier nicht.| "
        ("3769718ce69b", 74): False,  #  Feuerlöscher wurde gerade erst geprüft.| "
        ("b544dc2ec142", 61): False,  # emikers: "Die Säure ist absolut harmlos.| "
        ("991547c6c455", 76): False,  # ist ein völlig harmloser Versuchsaufbau.| "
        ("4741364ee035", 74): False,  # se Verbindung nur ganz leicht schütteln.| "
        ("b42ccd20535e", 75): False,  # annst die Schutzscheibe schon entfernen.| "
        ("f2f2fd3110a8", 62): False,  # mikers: "Erst die Säure dann das Wasser.| "
        ("83e2f8e66146", 80): False,  # es im Gefühl, wie lang 15 Sekunden sind.| "
        ("708e01e5ea80", 74): True,  # zt bei konstant 24 Grad Celsius halten. | 25 26... 27..."
        ("708e01e5ea80", 81): False,  # konstant 24 Grad Celsius halten. 25 26..| . 27..."
        ("708e01e5ea80", 83): False,  # nstant 24 Grad Celsius halten. 25 26... | 27..."
        ("708e01e5ea80", 87): False,  # nt 24 Grad Celsius halten. 25 26... 27..| ."
        ("47f83c0b4f85", 60): False,  # hemikers: "Jetzt noch ein wenig hiervon.| "
        ("e58d425500ea", 65): False,  # ers: "Jetzt nur noch den Geschmackstest.| "
        ("56e2c997a7c9", 57): False,  # s Chemikers: "Mist, falsches Becherglas.| "
        ("bc723f417060", 58): False,  #  Chemikers: "Noch einmal kurz schütteln.| "
        ("9fb6595cce92", 68): False,  # : "Oh, jetzt habe ich etwas verschüttet.| "
        ("0cd83db9730c", 59): False,  # Chemikers: "So, jetzt die Knallgasprobe.| "
        ("a50331147fa6", 68): False,  # : "Vertrau' mir - ich weiß, was ich tue.| "
        ("2bcfb96ec361", 53): False,  # eines Chemikers: "Wie das wohl schmeckt.| "
        ("0ce6d089d6ef", 80): False,  # st Du mit: 'Ich hab vergessen zu tanken.| '"
        ("32f40d71208f", 77): False,  # "Auf meinem Rechner gibt es keine Viren.| "
        ("499cd5e80893", 48): False,  # orte eines Computers: "Sind Sie sicher? | (J/N)"
        ("6e8a8f9702f8", 77): True,  #  der Estonia: "Hier ist schlechte Luft. | Ich mach mal die Klappe auf."
        ("6e8a8f9702f8", 105): False,  # echte Luft. Ich mach mal die Klappe auf.| "
        ("b8b0bc08419d", 60): False,  # achdeckers: "Eigentlich recht windstill.| "
        ("24189d41c3e8", 70): False,  # : "Jetzt schnell noch die Leiter runter.| "
        ("28fc6512fc74", 65): False,  # ives: "Klarer Fall, sie sind der Mörder.| "
        ("24837f4c2590", 64): False,  # renspielers: "Gib noch etwas Saft drauf.| "
        ("76dcaef488c7", 34): False,  # Letzte Worte eines Ehemannes: "OK.| " (Auf die Frage: Reparierst D
        ("76dcaef488c7", 36): True,  # Letzte Worte eines Ehemannes: "OK." | (Auf die Frage: Reparierst Du
        ("344927f30375", 47): False,  # Worte eines Elches: "Verdammte A-Klasse.| "
        ("2c279e5091ec", 62): False,  # rikers: "Alles klar, kannst einschalten.| "
        ("073e029985d7", 62): False,  # ktrikers: "Da kann kein Strom drin sein.| "
        ("2acb4240a26e", 70): False,  # : "Ich schalt jetzt eeeiiiiiiiiiiinnnnn.| "
        ("58d0cd84b8e4", 47): True,  # Worte eines Elektrikers: "Laß ruhig an. | Ich bin gleich fertig."
        ("58d0cd84b8e4", 69): False,  # s: "Laß ruhig an. Ich bin gleich fertig.| "
        ("121c3db1aea1", 69): False,  # s: "Klar hab ich den Strom abgeschaltet.| "
        ("7d48ab6138d4", 62): False,  # inders: "So, jetzt versuchen wir es mal.| "
        ("28a2f86204a2", 51): False,  # e eines Fahrlehrers: "Die Ampel ist rot.| "
        ("ce80e7e7e950", 61): False,  # hrlehrers: "Nun versuchen Sie's alleine.| "
        ("ccc107b81d68", 71): False,  #  "Parken Sie bitte dort an der Kaimauer.| "
        ("e75cf1311f73", 74): False,  #  "Guck' mal, ich kann freihändig fahren.| "
        ("7339a4f67e6e", 56): False,  # es Fahrstuhlpassagiers: "Abwärts, bitte.| "
        ("9b6c9bd0b3a2", 103): False,  # intaucht: "Die Wolke nehme ich noch mit.| "
        ("5be141fd0869", 48): False,  # orte eines Fallschirmspringers: "Und ab.| "
        ("b0c78399da53", 91): True,  # ben sehen die Menschen aus wie Ameisen. | Sch***! Das sind Ameisen!"
        ("b0c78399da53", 99): True,  # n die Menschen aus wie Ameisen. Sch***! | Das sind Ameisen!"
        ("84d6aaf26a1a", 88): False,  # auch freihändig auf eine Leiter steigen.| "
        ("bcad6db52712", 74): False,  # Wir landen in wenigen Minuten planmäßig.| "
        ("a02134217d42", 65): False,  # gers an der Ampel: "Das schaff ich noch.| "
        ("55600443e664", 67): False,  # m Restaurant: "Ich nehme das Pilzragout.| "
        ("8b7f4ed7e666", 64): False,  # l: "Du wirst niemals schießen, Feigling.| "
        ("cb93fd055235", 76): False,  # rs: "Und die Pistole ist auch gepfändet.| "
        ("8f04e9fd791c", 78): False,  # in, der Zug da fährt auf dem Nebengleis.| "
        ("5a8df00c8ce7", 68): False,  # ters: "Hein, gib mal den Spiritus rüber.| "
        ("13501998a21a", 63): False,  # wildjägers: "Eben war er noch da drüben.| "
        ("b0f39ad827a7", 79): False,  # Das Netzkabel lasse ich als Erdung dran.| "
        ("b55b5a3a7b47", 43): True,  # zte Worte des Hausgastes: "Hmmm, guuut. | Und du hast die Pilze selbst g
        ("0cb456c2fe44", 50): False,  # te eines Heimwerkers: "Das müßte halten.| "
        ("46f610316f27", 41): True,  # etzte Worte eines Helden: "Wieso Hilfe? | Es sind doch nur drei"
        ("cf6774f562c5", 50): True,  # te eines Henkers: "Das Fallbeil klemmt? | Kein Problem, ich schau mal na
        ("69772f67c6a1", 57): False,  # Henkers: "Ich öle noch mal das Fallbeil.| "
        ("80baacb22c72", 80): False,  # s: "Vorsicht, fall nicht über das Kabel.| "
        ("1a726bcbc2af", 81): False,  # ladecor - für Innen- und Außenanstriche.| "
        ("93863cd36fa8", 58): False,  #  Hundehalters: "Nein, der ist ganz zahm.| "
        ("55118bd10598", 79): False,  # bleibe hier, bis das Problem gelöst ist.| "
        ("2d4190ea291f", 55): False,  # nes Kapitäns: "Das Schiff ist unsinkbar.| "
        ("0e1a89955a44", 69): False,  # s: "Diese alten Holzbrücken halten ewig.| "
        ("a419d5987a27", 74): False,  # ieber draufhalten als Schwung verlieren.| "
        ("95b346bf247e", 67): True,  # pteurs: "Die Löwen haben sich beruhigt. | Ihr könnt sie jetzt reinlassen
        ("95b346bf247e", 98): False,  # eruhigt. Ihr könnt sie jetzt reinlassen.| "
        ("0dc215e30785", 46): True,  # tzten Worte zweier Löwenbändiger: "Wie? | - Ich dachte du hättest sie ge
        ("0dc215e30785", 84): False,  # ? - Ich dachte du hättest sie gefüttert.| "
        ("986c85c5c9fc", 63): False,  # a-Fahrers: "Da passe ich noch durch, ey.| "
        ("be30437eec8a", 61): False,  # nsakoches: "Merkwürdig ruhig da draußen.| "
        ("4e5dee9a19ec", 63): False,  # : "Ich hab mal deine Disketten sortiert.| "
        ("9842c7f00739", 54): False,  # ines Pilzessers: "Diese Art ist mir neu.| "
        ("b9ed51b3f84c", 93): False,  # t irgendeine Gefahr für die Bevölkerung.| "
        ("3e867bfe3328", 73): False,  # echs Schuß, der hat keine Munition mehr.| "
        ("89dbd1214add", 60): False,  # ostboten: "Du bist aber ein lieber Hund.| "
        ("2812056966d4", 76): False,  # tz' nur noch schnell das Balkongeländer.| "
        ("2ee31e6ba18f", 70): False,  #  "Der muß anhalten, ich hab ja Vorfahrt.| "
        ("f8676c5743ee", 108): False,  # : "Da kommen ein paar Pfeiler aus Beton.| "
        ("e9a3934631ab", 61): False,  # rters: "Das wird eine tolle Nahaufnahme.| "
        ("b2233ffea778", 79): False,  # Ich werde das Schutzgeld nicht bezahlen.| "
        ("f28ce37a8366", 59): False,  # Schiedsrichters: "Das ist kein Elfmeter.| "
        ("08859b568cad", 70): False,  # ster: "Ich zieh da mal den Stecker raus.| "
        ("4c9b908fae5c", 79): False,  # ier in den Gewässern gibt es keine Haie.| "
        ("7c0cd231d285", 87): False,  #  ich mit dem Kopf nicke, haust Du drauf.| "
        ("39d65540239c", 52): False,  #  eines Seiltänzers: "Starker Wind heute.| "
        ("df5f81b7a16e", 69): False,  # reporters: "Das wird 'ne tolle Aufnahme.| "
        ("84889a5634c3", 69): False,  # rs: "Ich glaube, ich habe mich vergeben.| "
        ("a98dfb08d5cf", 81): False,  # "Natürlich habe ich ein intaktes Backup.| "
        ("96dbb38fcb50", 63): False,  # tschützen: "Da klemmt doch was am Abzug.| "
        ("dede8c586891", 67): False,  # ützen: "Nur noch kurz den Lauf reinigen.| "
        ("6e634bab83a1", 62): False,  # rtschützen: "So, jetzt noch nachstopfen.| "
        ("1114eeea83db", 41): True,  # etzte Worte eines Stuntman: "Wie jetzt? | Reality-TV?"
        ("cc4d44554400", 61): False,  # nkwarts: "Sie dürfen hier nicht rauchen.| "
        ("0bfc46c38e14", 50): False,  # te eines Tauchers: "Scheiß Tiefenmesser.| "
        ("86c68fd91741", 71): False,  # ns: "Den Eisberg schaffen wir auch noch.| "
        ("8e281df00f3c", 58): False,  #  Trabbifahrers: "Aber ICH habe Vorfahrt.| "
        ("64f0077ab3a0", 73): False,  # s: "Wir werden das Ding schon schaukeln.| "
        ("65fbb25c889c", 66): False,  # ingers: "Heute ist das Wasser aber klar.| "
        ("a767b4e5a0dd", 42): False,  # tzte Worte eines U-Bootkapitäns: "Blubb.| "
        ("4570d9e496a8", 76): False,  # Hier müßte dringend mal gelüftet werden.| "
        ("a16d633c9575", 58): False,  #  U-Boot Fahrers: "Ich geh mal kurz raus.| "
        ("6e02dc189ed5", 72): False,  # s: "Ich schlafe nur bei offenem Fenster.| "
        ("b93848e57c91", 65): False,  # rs: "So, den hätten wir sicher am Haken.| "
        ("734cc2142100", 71): False,  # s: "Oh - meine Uhr ist stehen geblieben.| "
        ("3be1468cb10a", 64): False,  # rndarstellers: "Alles nur Platzpatronen.| "
        ("53d534caefb9", 59): False,  # Zoowärters: "Der Löwe ist nicht hungrig.| "
        ("f31f15ab79da", 71): False,  # rs: "Nimm vor dem Starten den Gang raus.| "
        ("68253f6d789f", 20): False,  # Letzte Worte von U. | Barschel: "Ich gebe mein Ehren
        ("68253f6d789f", 55): False,  # n U. Barschel: "Ich gebe mein Ehrenwort.| "
        ("015704e894ed", 57): False,  # Paul Bocuse: "Das schmeckt aber komisch.| "
        ("c162b83100a8", 20): False,  # Letzte Worte von A. | Senna: "Irgendetwas klappert d
        ("c162b83100a8", 52): False,  #  von A. Senna: "Irgendetwas klappert da.| "
        ("be67bf924a1b", 68): False,  # lmes: "Klare Sache, sie sind der Mörder.| "
        ("1862ff8c3277", 20): False,  # Letzte Worte von S. | Spielberg bei den Dreharbeiten
        ("1862ff8c3277", 104): False,  # ai': "Tolles Modell, sieht aus wie echt.| "
        ("e1cfd08663ea", 55): False,  # nes mutigen Mannes: "Feigling, Feigling.| "
        ("fd66cc649547", 69): False,  # erurteilten: "Die Woche fängt ja gut an.| "
        ("7c611645ef2d", 126): False,  # Herzogstr. Richtung Königsplatz mit ca. | 40 km/h Geschwindigkeit. Wegen
        ("d0c65e757d14", 98): True,  # chreibe ich zum ersten und letzten Mal. | Wenn Sie dann nicht antworten,
        ("e236906a003c", 125): False,  # d einen Hahn. Beim Hühnerfüttern am 24. | Februar in den Morgenstunden s
        ("c92f7e0f2adf", 79): False,  # ngsnehmern: In Ihrem Schreiben vom 26.6.| , über die neue Beitragsrechnu
        ("2e50ef0cd519", 272): False,  # mit einer Warntafel "Vorsicht, Gefahr!" | beschildert war. Die gut sicht
        ("2e50ef0cd519", 383): False,  #  Dämmerung aus einer Entfernung von ca. | 60cm sehen. Natürlich mußte de
        ("cddd23f32f78", 80): False,  # chtsverhandlungen: In der Nacht vom 24. | auf den 25.6.75 entwendete ein
        ("cf7ff493537a", 202): False,  #  weg. Der Wert dieser Dinge beträgt ca. | 520,- DM.
        ("79f19ae1604f", 114): False,  # Konrad F. unterhielt mit mir bis zum 7. | Monat einen intimen Kontakt un
        ("9319a6bcb046", 257): False,  # e manierliche Frage "Bumst hier einer?" | erscholl die ungebührliche Ant
        ("9319a6bcb046", 352): False,  # wei", worauf ich zur Verhaftung schritt.| "
        ("a7d2307bb5e4", 25): True,  # (Anm. d. Red.: Vorsicht! | Die Killeroma ist noch nicht g
        ("a7d2307bb5e4", 62): False,  # t! Die Killeroma ist noch nicht gefaßt! | a.t.)
    },
}}


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


def fortunes(lang: str, fortunes_dir: str = None) -> List[str]:
    """The paragraphs of FORTUNES_FILES[lang]: each cookie cut at its blank lines, a paragraph's
    attribution ("-- Mark Twain", from its first line that starts with "--" on) left out, its lines
    joined."""
    base = fortunes_dir or FORTUNES
    found = []
    for name in FORTUNES_FILES[lang]:
        path = os.path.join(base, name)
        if not os.path.isfile(path):
            package = "fortunes-de" if name.startswith("de/") else "fortunes"
            sys.exit(f"{path} not found: apt-get install {package} (or --source-dir)")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for cookie in re.split(r"^%\n", text, flags=re.M):
            for block in re.split(r"\n\s*\n", cookie):
                lines = block.split("\n")
                cut = [i for i, line in enumerate(lines) if line.strip().startswith("--")]
                paragraph = " ".join(" ".join(lines[:cut[0]] if cut else lines).split())
                if any(c.isalpha() for c in paragraph):
                    found.append(paragraph)
    return list(dict.fromkeys(found))  # a paragraph that is there twice counts once


# each corpus: its paragraphs by language, and where its boundaries are kept
CORPORA = {
    "manual": (manual, GOLD),
    "fortunes": (fortunes, os.path.join(REPO, "tests", "data", "sentence_boundaries_fortunes.json")),
}


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


def make_gold(corpus: str = "manual", source_dir: str = None) -> dict:
    texts_of = CORPORA[corpus][0]
    gold = {}
    for lang in LANGS:
        found = splitters(lang)
        found.pop("fairseq-rope")
        if len(found) != 5:
            sys.exit(f"gold needs all five splitters; installed: {', '.join(found)}")
        decided, undecided = {}, []
        for paragraph in texts_of(lang, source_dir):
            k = key(paragraph)
            proposed = {name: starts(paragraph, split(paragraph)) for name, split in found.items()}
            candidates = set().union(*proposed.values()) | {m.end() for m in CANDIDATE.finditer(paragraph)}
            boundaries = []
            for at in sorted(candidates):
                votes = sum(at in p for p in proposed.values())
                if (k, at) in ADJUDICATED[corpus][lang]:
                    verdict = ADJUDICATED[corpus][lang][(k, at)]
                elif votes in (0, len(found)):
                    verdict = votes > 0
                else:
                    undecided.append(f'("{k}", {at}): ?,  # {paragraph[max(0, at - 40):at]}| {paragraph[at:at + 30]}')
                    continue
                if verdict:
                    boundaries.append(at)
            decided[k] = boundaries
        if undecided:
            sys.exit(f"{lang}: {len(undecided)} candidates to decide in ADJUDICATED[{corpus!r}]:\n"
                     + "\n".join(undecided))
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


def table(corpus: str = "manual", source_dir: str = None) -> dict:
    texts_of, path = CORPORA[corpus]
    with open(path, encoding="utf-8") as f:
        gold = json.load(f)
    results = {}
    for lang in LANGS:
        texts = [p for p in texts_of(lang, source_dir) if key(p) in gold[lang]]
        missing = len(gold[lang]) - len(texts)
        if missing:
            sys.exit(f"{missing} paragraphs of the boundaries file are not in the {lang} {corpus} installed "
                     "(another version of its packages?)")
        results[lang] = {name: score(lang, split, gold[lang], texts) for name, split in splitters(lang).items()}
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["table", "gold"])
    ap.add_argument("--json", action="store_true", help="table: as JSON")
    ap.add_argument("--corpus", choices=sorted(CORPORA), default="manual",
                    help="the Debian Edu manual (technical prose, the default) or the fortunes (narrative prose)")
    ap.add_argument("--source-dir", "--manual-dir", dest="source_dir",
                    help="instead of the installed packages: the manual's two HTML files "
                         "(debian-edu-bookworm-manual.{en,de}.html), or the fortunes' directory")
    args = ap.parse_args(argv)
    if args.what == "gold":
        gold, path = make_gold(args.corpus, args.source_dir), CORPORA[args.corpus][1]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(gold, f, indent=0, sort_keys=True)
        os.replace(path + ".tmp", path)
        print(f"wrote {path}: " + ", ".join(f"{lang} {len(g)} paragraphs, {sum(map(len, g.values()))} boundaries"
                                          for lang, g in gold.items()))
        return
    results = table(args.corpus, args.source_dir)
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
