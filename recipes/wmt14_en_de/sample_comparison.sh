#!/usr/bin/env bash
# Every position encoding on the bundled sample, side by side: fairseq's transformer (sinusoidal),
# learned absolute positions and every encoding the plugin registers (ALiBi, NoPE, Shaw's relative
# positions, T5's relative bias, RoPE last), each
# trained with sample.sh's settings and seed, averaged, translated with beam 4 and scored; then the
# table with paired bootstrap p-values against the transformer, by source length, and the plots
# (sample_figures.sh). About 15 minutes on 2 CPU cores; runs already trained in WORK_DIR (e.g. by
# sample.sh) are not trained again.
#   ARCHS          the runs (run.sh's syntax: ARCH or NAME=ARCH, flags in ARGS_<name>); default: the
#                  transformer, learned positions, every encoding the plugin registers, RoPE last
#   ARGS_learned   "--encoder-learned-pos --decoder-learned-pos"
#   OUT_DIR        $WORK_DIR (work/sample); figures comparison_{curves,by_length}.png, comparison_by_length.md
# and every knob of sample.sh and sample_figures.sh.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if [ -z "${ARCHS:-}" ]; then
  ARCHS="transformer learned=transformer $(registered_encodings | grep -vx rope_transformer | tr '\n' ' ')rope_transformer"
fi
export ARCHS
export ARGS_learned=${ARGS_learned:---encoder-learned-pos --decoder-learned-pos}
export NAME=${NAME:-comparison}
export TITLE=${TITLE:-Offline sample, every position encoding}
log "the sample with every position encoding: $ARCHS"
bash "$RECIPE_DIR/sample_figures.sh"
