#!/usr/bin/env bash
# Step 1a (called by prepare.sh when RAW_DIR is not set): downloads WMT14 En-De and writes
#   $RAW_OUT/train.{en,de}  Europarl v7 + CommonCrawl + News Commentary v9 (~4.5M lines)
#   $RAW_OUT/valid.{en,de}  newstest2013 (3000 lines)
#   $RAW_OUT/test.{en,de}   newstest2014 "full" (3003 lines; = sacrebleu -t wmt14/full -l en-de)
# Knobs (environment):
#   WORK_DIR      work directory (default: <repo>/work/wmt14_en_de)
#   DOWNLOAD_DIR  tarballs and their extracted contents (default: $WORK_DIR/download)
#   RAW_OUT       where the plain-text corpus goes (default: $WORK_DIR/raw)
#   SOURCES       name/checksum/URL list (default: sources.tsv next to this script)
#   EXPECT_VALID_LINES / EXPECT_TEST_LINES  3000 / 3003 (newstest2013 / newstest2014 full)
# Resumable: downloads go to NAME.part (curl -C - or wget -c continue them), complete files
# become NAME.unverified, and only a checksum-verified file is renamed NAME.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SOURCES=${SOURCES:-$RECIPE_DIR/sources.tsv}
DOWNLOAD_DIR=${DOWNLOAD_DIR:-$WORK_DIR/download}
RAW_OUT=${RAW_OUT:-$WORK_DIR/raw}
EXPECT_VALID_LINES=${EXPECT_VALID_LINES:-3000}
EXPECT_TEST_LINES=${EXPECT_TEST_LINES:-3003}
need_int EXPECT_VALID_LINES "$EXPECT_VALID_LINES" 1
need_int EXPECT_TEST_LINES "$EXPECT_TEST_LINES" 1
need_file "$SOURCES" "SOURCES (download list)"
RECORDED=$DOWNLOAD_DIR/checksums.recorded

if [ -f "$RAW_OUT/.done" ]; then
  log "raw corpus already complete in $RAW_OUT (remove $RAW_OUT/.done to rebuild)"
  exit 0
fi
mkdir -p "$DOWNLOAD_DIR" "$RAW_OUT"

field() {  # field NAME COLUMN: a column of the SOURCES line for NAME
  awk -F'\t' -v n="$1" -v c="$2" '$0 !~ /^#/ && $1 == n { print $c; exit }' "$SOURCES"
}

verify() {  # verify NAME FILE: checks FILE against SOURCES (or the recorded sha256 for "unknown")
  local name=$1 file=$2 expected algo want got
  expected=$(field "$name" 2)
  if [ "$expected" = unknown ]; then
    expected=""
    if [ -f "$RECORDED" ]; then expected=$(awk -v n="$name" '$1 == n { s = $2 } END { print s }' "$RECORDED"); fi
    if [ -z "$expected" ]; then
      got=sha256:$(sha256sum "$file" | cut -d' ' -f1)
      { cat "$RECORDED" 2>/dev/null || true; echo "$name $got"; } > "$RECORDED.tmp"
      mv -f "$RECORDED.tmp" "$RECORDED"
      log "UNVERIFIED: no checksum for $name is known (SOURCES says 'unknown'); recorded its $got in $RECORDED."
      log "  Later runs verify $name against that record. To pin it, write $got in $SOURCES."
      return 0
    fi
    log "verifying $name against the checksum recorded at its first download ($RECORDED)"
  fi
  algo=${expected%%:*}; want=${expected#*:}
  case $algo in
    sha256) got=$(sha256sum "$file" | cut -d' ' -f1) ;;
    md5) got=$(md5sum "$file" | cut -d' ' -f1) ;;
    *) die "bad checksum '$expected' for $name in $SOURCES: expected sha256:<hex>, md5:<hex> or unknown" ;;
  esac
  [ "$got" = "$want" ] || die "checksum mismatch for $file: expected $algo $want, got $got.
  Delete $file and re-run to download it again (or correct $SOURCES if the file changed upstream)."
  log "checksum ok: $name ($algo)"
}

fetch() {  # fetch NAME: downloads (resuming) and verifies $DOWNLOAD_DIR/NAME
  local name=$1 url dest
  url=$(field "$name" 3)
  [ -n "$url" ] || die "no entry '$name' in $SOURCES"
  dest=$DOWNLOAD_DIR/$name
  if [ -f "$dest" ]; then verify "$name" "$dest"; return; fi
  if [ ! -f "$dest.unverified" ]; then
    log "downloading $url -> $dest (resumable: re-run to continue)"
    if command -v curl >/dev/null 2>&1; then
      curl -fL --retry 3 --retry-delay 5 -C - -o "$dest.part" "$url" \
        || die "download failed: $url (curl exit $?); re-run to resume from $dest.part"
    elif command -v wget >/dev/null 2>&1; then
      wget -c -O "$dest.part" "$url" || die "download failed: $url (wget exit $?); re-run to resume from $dest.part"
    else
      die "required program 'curl' or 'wget' not found in PATH"
    fi
    mv -f "$dest.part" "$dest.unverified"
  fi
  verify "$name" "$dest.unverified"
  mv -f "$dest.unverified" "$dest"
}

extract() {  # extract NAME: unpacks $DOWNLOAD_DIR/NAME into $DOWNLOAD_DIR/extract/NAME
  local name=$1 dir=$DOWNLOAD_DIR/extract/$1
  [ -f "$dir/.done" ] && return 0
  log "extracting $name -> $dir"
  rm -rf "$dir.tmp"; mkdir -p "$dir.tmp"
  tar -xzf "$DOWNLOAD_DIR/$name" -C "$dir.tmp" || die "cannot extract $DOWNLOAD_DIR/$name (corrupt? delete it and re-run)"
  touch "$dir.tmp/.done"
  rm -rf "$dir"; mv "$dir.tmp" "$dir"
}

find_one() {  # find_one DIR FILENAME: the single file called FILENAME under DIR
  local hits
  hits=$(find "$1" -type f -name "$2")
  [ -n "$hits" ] || die "expected a file named $2 inside $1 (from its tarball), found none"
  [ "$(echo "$hits" | wc -l)" -eq 1 ] || die "more than one $2 under $1: $hits"
  echo "$hits"
}

need_cmd tar; need_cmd sha256sum; need_cmd md5sum; need_cmd fairseq-rope-prep "$ROPE_HINT"
NAMES=(training-parallel-europarl-v7.tgz training-parallel-commoncrawl.tgz training-parallel-nc-v9.tgz
       wmt13-test.tgz wmt14-test-full.tgz)
for name in "${NAMES[@]}"; do fetch "$name"; extract "$name"; done

X=$DOWNLOAD_DIR/extract
if [ ! -f "$RAW_OUT/train.de" ]; then
  corpora=()
  for pair in "training-parallel-europarl-v7.tgz europarl-v7.de-en" \
              "training-parallel-commoncrawl.tgz commoncrawl.de-en" \
              "training-parallel-nc-v9.tgz news-commentary-v9.de-en"; do
    set -- $pair
    en=$(find_one "$X/$1" "$2.en"); de=$(find_one "$X/$1" "$2.de")
    prefix=${en%.en}
    SRC=en TGT=de check_parallel "$prefix"
    log "train part $2: $(line_count "$en") lines"
    corpora+=("$prefix")
  done
  for lang in en de; do
    files=(); for p in "${corpora[@]}"; do files+=("$p.$lang"); done
    cat "${files[@]}" > "$RAW_OUT/train.$lang.tmp"
  done
  mv -f "$RAW_OUT/train.en.tmp" "$RAW_OUT/train.en"; mv -f "$RAW_OUT/train.de.tmp" "$RAW_OUT/train.de"
fi
SRC=en TGT=de check_parallel "$RAW_OUT/train"

sgm() {  # sgm SPLIT TARBALL EN_SGM DE_SGM EXPECTED_LINES
  local split=$1 dir=$X/$2 lang file n docids
  for lang in en de; do
    file=$( [ $lang = en ] && echo "$3" || echo "$4" )
    # the English side also keeps the segments' document ids (the <doc docid=...> they are in)
    docids=(); [ $lang = de ] || docids=(--docids "$RAW_OUT/$split.docids")
    [ -f "$RAW_OUT/$split.$lang" ] && { [ $lang = de ] || [ -f "$RAW_OUT/$split.docids" ]; } \
      || fairseq-rope-prep sgm "$(find_one "$dir" "$file")" "$RAW_OUT/$split.$lang" "${docids[@]}"
    n=$(line_count "$RAW_OUT/$split.$lang")
    [ "$n" = "$5" ] || die "$RAW_OUT/$split.$lang has $n lines, expected $5 (from $file)"
  done
}
sgm valid wmt13-test.tgz newstest2013-src.en.sgm newstest2013-src.de.sgm "$EXPECT_VALID_LINES"
sgm test wmt14-test-full.tgz newstest2014-deen-src.en.sgm newstest2014-deen-ref.de.sgm "$EXPECT_TEST_LINES"

mark_done "$RAW_OUT" "downloaded from $SOURCES"
log "raw corpus ready in $RAW_OUT: train $(line_count "$RAW_OUT/train.en"), valid $(line_count "$RAW_OUT/valid.en"), test $(line_count "$RAW_OUT/test.en") lines"
