#!/usr/bin/env bash
# Real English-German prose, rebuilt from public packages: Debian's manuals and help pages, translated
# page by page, fetched as .deb packages (pinned by version and sha256 in debian_packages.tsv), unpacked,
# and their pages paired paragraph by paragraph, then sentence by sentence (fairseq-rope-corpus pages).
# Writes $RAW_OUT/{train,valid,test}.{en,de} (+ .docids, report.json, alignment_sample.tsv): prepare.sh's
# RAW_DIR; test is the two test sets one after the other, test_prose.* (the manuals' running text) and
# test_help.* (GIMP's and LibreOffice's interface help), each also on its own. Whole pages are held out,
# and no training or valid sentence is a near copy (word-set Jaccard >= SIMILARITY) of a held-out one.
# Knobs (environment):
#   WORK_DIR        default: <repo>/work/debian
#   DEB_DIR         the fetched packages (default: $WORK_DIR/debs)
#   EXTRACT_DIR     their files, a folder per package (default: $WORK_DIR/pages)
#   RAW_OUT         the corpus (default: $WORK_DIR/raw)
#   PACKAGES        package list (default: debian_packages.tsv next to this script)
#   SOURCES         pages of each source (default: debian_pages.tsv next to this script)
#   MIRROR          where a package is fetched when apt-get cannot: its pool path under this URL
#                   (default https://deb.debian.org/debian; once a version leaves it, a snapshot, e.g.
#                   https://snapshot.debian.org/archive/debian/20250101T000000Z)
#   TEST_PAIRS      1200: pairs of each test set (prose, help), whole pages
#   VALID_PAIRS     1000: valid pairs, whole pages of every source
#   SIMILARITY      0.5: near copies, word-set Jaccard at or above which two sentences are one template
#   MAX_CLUSTER     10: a template of more pairs than this, spread over pages, stays in training
#   DROP_PAIRS      the pairs left out as not translations of each other (default: debian_flagged_pairs.tsv
#                   next to this script, the pairs the word aligner flagged when it was pinned; none: keep all)
#   LEXICAL         0: 1 scores every pair with a word aligner trained on the corpus (eflomal; a few minutes),
#                   report in $RAW_OUT/lexical.json; with DROP_PAIRS=none its flagged pairs are also dropped
#   LEXICAL_QUANTILE  0.1: a pair at or above this quantile of the mismatched controls' scores is flagged
#   CORPUS_SEED     1: the order in which pages are held out
# Each package is verified against its sha256 before it is unpacked; finished steps are skipped.
set -euo pipefail
export WORK_DIR=${WORK_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/work/debian}
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

DEB_DIR=${DEB_DIR:-$WORK_DIR/debs}
EXTRACT_DIR=${EXTRACT_DIR:-$WORK_DIR/pages}
RAW_OUT=${RAW_OUT:-$WORK_DIR/raw}
PACKAGES=${PACKAGES:-$RECIPE_DIR/debian_packages.tsv}
SOURCES=${SOURCES:-$RECIPE_DIR/debian_pages.tsv}
MIRROR=${MIRROR:-https://deb.debian.org/debian}
TEST_PAIRS=${TEST_PAIRS:-1200}
VALID_PAIRS=${VALID_PAIRS:-1000}
SIMILARITY=${SIMILARITY:-0.5}
MAX_CLUSTER=${MAX_CLUSTER:-10}
DROP_PAIRS=${DROP_PAIRS:-$RECIPE_DIR/debian_flagged_pairs.tsv}
LEXICAL=${LEXICAL:-0}
LEXICAL_QUANTILE=${LEXICAL_QUANTILE:-0.1}
CORPUS_SEED=${CORPUS_SEED:-1}
need_int TEST_PAIRS "$TEST_PAIRS" 1
need_int VALID_PAIRS "$VALID_PAIRS" 1
need_int CORPUS_SEED "$CORPUS_SEED"
need_int MAX_CLUSTER "$MAX_CLUSTER" 1
need_num SIMILARITY "$SIMILARITY"
one_of LEXICAL "$LEXICAL" 0 1
need_num LEXICAL_QUANTILE "$LEXICAL_QUANTILE"
need_file "$PACKAGES" "PACKAGES (package list)"
need_file "$SOURCES" "SOURCES (pages of each source)"
[ "$DROP_PAIRS" = none ] || need_file "$DROP_PAIRS" "DROP_PAIRS (pairs to leave out; none: keep all)"
need_cmd fairseq-rope-corpus "$ROPE_HINT"
need_cmd sha256sum

settings="PACKAGES=$(sha256sum < "$PACKAGES" | cut -c1-16) SOURCES=$(sha256sum < "$SOURCES" | cut -c1-16) \
TEST_PAIRS=$TEST_PAIRS VALID_PAIRS=$VALID_PAIRS CORPUS_SEED=$CORPUS_SEED SIMILARITY=$SIMILARITY MAX_CLUSTER=$MAX_CLUSTER LEXICAL=$LEXICAL LEXICAL_QUANTILE=$LEXICAL_QUANTILE \
DROP_PAIRS=$([ "$DROP_PAIRS" = none ] && echo none || sha256sum < "$DROP_PAIRS" | cut -c1-16)"
if done_ok "$RAW_OUT" "$settings"; then
  log "corpus already built in $RAW_OUT (remove $RAW_OUT/.done to rebuild)"
  exit 0
fi
mkdir -p "$DEB_DIR" "$EXTRACT_DIR"

fetch() {  # fetch PACKAGE VERSION SHA256 POOL_PATH: $DEB_DIR/PACKAGE_VERSION.deb, verified
  local package=$1 version=$2 sum=$3 pool=$4 deb="$DEB_DIR/${1}_${2}.deb" got
  if [ -f "$deb" ]; then return 0; fi
  rm -rf "$DEB_DIR/.fetch" && mkdir -p "$DEB_DIR/.fetch"
  if command -v apt-get >/dev/null && (cd "$DEB_DIR/.fetch" && apt-get download -q "$package=$version") >/dev/null 2>&1; then
    log "fetched $package $version with apt-get download"
  else
    need_cmd curl "to fetch $package from $MIRROR"
    log "fetching $package $version from $MIRROR/$pool"
    curl -fL --retry 3 -o "$DEB_DIR/.fetch/package.deb" "$MIRROR/$pool" \
      || die "cannot fetch $package $version: $MIRROR/$pool (set MIRROR to a Debian mirror or a snapshot that has it)"
  fi
  compgen -G "$DEB_DIR/.fetch/*.deb" >/dev/null || die "fetching $package $version gave no .deb file"
  got=$(sha256sum "$DEB_DIR"/.fetch/*.deb | cut -d' ' -f1)
  [ "sha256:$got" = "$sum" ] || die "checksum mismatch for $package $version: expected $sum, got sha256:$got"
  mv "$DEB_DIR"/.fetch/*.deb "$deb"
  rm -rf "$DEB_DIR/.fetch"
}

while IFS=$'\t' read -r package version sum pool || [ -n "$package" ]; do  # (a last line without its newline too)
  case $package in ''|'#'*) continue ;; esac
  [ -n "$pool" ] || die "$PACKAGES: line for '$package' needs PACKAGE<TAB>VERSION<TAB>sha256:HEX<TAB>POOL_PATH"
  fetch "$package" "$version" "$sum" "$pool"
  if [ ! -f "$EXTRACT_DIR/$package/.done" ] || [ "$(cat "$EXTRACT_DIR/$package/.done")" != "$version" ]; then
    rm -rf "$EXTRACT_DIR/$package" "$EXTRACT_DIR/$package.tmp"
    fairseq-rope-corpus extract "$DEB_DIR/${package}_$version.deb" "$EXTRACT_DIR/$package.tmp"
    echo "$version" > "$EXTRACT_DIR/$package.tmp/.done"
    mv "$EXTRACT_DIR/$package.tmp" "$EXTRACT_DIR/$package"
  fi
done < "$PACKAGES"

log "pairing the pages of $SOURCES into $RAW_OUT"
drop_args=(); [ "$DROP_PAIRS" = none ] || drop_args=(--drop-pairs "$DROP_PAIRS")
rm -rf "$RAW_OUT.tmp"
fairseq-rope-corpus pages --sources "$SOURCES" --root "$EXTRACT_DIR" --out "$RAW_OUT.tmp" \
  --test-pairs "$TEST_PAIRS" --valid-pairs "$VALID_PAIRS" --seed "$CORPUS_SEED" \
  --similarity "$SIMILARITY" --max-cluster "$MAX_CLUSTER" "${drop_args[@]}" >/dev/null
if [ "$LEXICAL" = 1 ]; then
  lexical_args=(); [ "$DROP_PAIRS" = none ] && lexical_args=(--drop-flagged)
  log "scoring every pair with a word aligner (eflomal; a few minutes)$([ "$DROP_PAIRS" = none ] && echo ', dropping those that score like mismatched pairs')"
  fairseq-rope-corpus lexical "$RAW_OUT.tmp" --control-quantile "$LEXICAL_QUANTILE" --seed "$CORPUS_SEED" \
    --write-flagged "$RAW_OUT.tmp/flagged_pairs.tsv" "${lexical_args[@]}"
fi
for dir in "$EXTRACT_DIR"/*/; do  # each package's copyright file beside the corpus
  package=$(basename "$dir")
  for f in "$dir"usr/share/doc/"$package"/copyright; do [ -f "$f" ] && cp "$f" "$RAW_OUT.tmp/$package.copyright"; done
done
rm -rf "$RAW_OUT" && mv "$RAW_OUT.tmp" "$RAW_OUT"
echo "$settings" > "$RAW_OUT/.done"
log "corpus in $RAW_OUT: $(for s in train valid test; do printf '%s %s pairs, ' "$s" "$(line_count "$RAW_OUT/$s.$SRC")"; done)report in $RAW_OUT/report.json"
