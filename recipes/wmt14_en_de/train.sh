#!/usr/bin/env bash
# Step 2: trains one model with the paper's setup (RoFormer 4.1 / Vaswani et al. base).
#
#   ARCH                  rope_transformer_wmt_en_de (default) or transformer_wmt_en_de (baseline),
#                         or any fairseq/plugin architecture (the sample uses rope_transformer/transformer)
#   TASK                  translation_resumable (default: fairseq's translation with its batches rebuilt
#                         every epoch, so that a resumed run trains exactly like an uninterrupted one;
#                         see fairseq_rope/task.py) or translation (fairseq's own)
#   RUN_NAME              names the run (default: $ARCH); SAVE_DIR=$WORK_DIR/checkpoints/$RUN_NAME
#   DATA_BIN              binarized data (default: $WORK_DIR/data-bin, from prepare.sh)
#   MAX_UPDATE            100000 (Transformer-base: 100k steps)
#   LR 5e-4, WARMUP_INIT_LR 1e-7, WARMUP_UPDATES 4000 (inverse_sqrt), ADAM_BETAS "(0.9, 0.98)",
#   DROPOUT 0.1, LABEL_SMOOTHING 0.1, WEIGHT_DECAY 0.0, CLIP_NORM 0.0, SEED 1
#   TOKENS_PER_UPDATE     25000 target tokens per update (Vaswani: ~25k source + ~25k target)
#   MAX_TOKENS_PER_GPU    4096, the memory cap per GPU and batch
#   MAX_TOKENS, UPDATE_FREQ  default: UPDATE_FREQ = ceil(TOKENS_PER_UPDATE / (WORLD * MAX_TOKENS_PER_GPU)),
#                         MAX_TOKENS = ceil(TOKENS_PER_UPDATE / (WORLD * UPDATE_FREQ)), WORLD = GPUs in all nodes
#   NGPU                  GPUs used per node (default: every visible one: CUDA_VISIBLE_DEVICES, else
#                         nvidia-smi -L; 0 = CPU); fewer than visible: the first NGPU (fairseq's
#                         --distributed-world-size); more than visible: an error
#   CPU_WORKERS           1; with NGPU=0 and CPU_WORKERS>1, that many training processes on this machine's
#                         CPU (gloo, fairseq's legacy_ddp, rendezvous on 127.0.0.1:MASTER_PORT): for
#                         testing distributed training without GPUs
#   PRECISION             auto (fp16 on GPU, fp32 on CPU), fp16, amp (fp32 weights, fp16 autocast:
#                         fairseq's --amp) or fp32; bf16 is refused: fairseq 0.12's --bf16 also turns on
#                         its TPU path and crashes on GPUs (Trainer: 'NoneType' has no 'xla_device')
#   SAVE_INTERVAL_UPDATES 1000, KEEP_INTERVAL_UPDATES 5 (the last 5 are averaged by average.sh)
#   LOG_INTERVAL 100, LOG_FORMAT json: fairseq's log, complete, in $SAVE_DIR/train.log; the terminal
#                         gets a progress line every PROGRESS_INTERVAL (30) seconds (update, losses,
#                         speed, time left); VERBOSE=1 streams fairseq's whole output as well
#   NNODES 1, NODE_RANK 0, MASTER_ADDR, MASTER_PORT 29500, LAUNCHER auto|torchrun: with NNODES>1
#                         (or LAUNCHER=torchrun) fairseq-train runs under torchrun on every node
#   EXTRA_TRAIN_ARGS      more fairseq-train arguments, e.g. "--encoder-layers 2"
#   DRY_RUN=1             print the plan and the command, run nothing
#   PRINT_SETTINGS=1      print the run's settings (NAME=value lines, as .settings holds them), run nothing
# Re-running continues from $SAVE_DIR/checkpoint_last.pt (fairseq's default --restore-file)
# and does nothing once $SAVE_DIR/.done records these settings. A run records the settings it was
# started with ($SAVE_DIR/.settings); a re-run with other ones stops and names each, unless
#   ALLOW_CHANGED_SETTINGS=1  continue the run with the new settings (e.g. a larger MAX_UPDATE)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ARCH=${ARCH:-rope_transformer_wmt_en_de}
RUN_NAME=${RUN_NAME:-$ARCH}
TASK=${TASK:-translation_resumable}
DATA_BIN=${DATA_BIN:-$WORK_DIR/data-bin}
SAVE_DIR=${SAVE_DIR:-$WORK_DIR/checkpoints/$RUN_NAME}
MAX_UPDATE=${MAX_UPDATE:-100000}
LR=${LR:-5e-4}
WARMUP_INIT_LR=${WARMUP_INIT_LR:-1e-7}
WARMUP_UPDATES=${WARMUP_UPDATES:-4000}
ADAM_BETAS=${ADAM_BETAS:-(0.9, 0.98)}
DROPOUT=${DROPOUT:-0.1}
LABEL_SMOOTHING=${LABEL_SMOOTHING:-0.1}
WEIGHT_DECAY=${WEIGHT_DECAY:-0.0}
CLIP_NORM=${CLIP_NORM:-0.0}
SEED=${SEED:-1}
TOKENS_PER_UPDATE=${TOKENS_PER_UPDATE:-25000}
MAX_TOKENS_PER_GPU=${MAX_TOKENS_PER_GPU:-4096}
SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-1000}
KEEP_INTERVAL_UPDATES=${KEEP_INTERVAL_UPDATES:-5}
LOG_INTERVAL=${LOG_INTERVAL:-100}
LOG_FORMAT=${LOG_FORMAT:-json}
PRECISION=${PRECISION:-auto}
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
MASTER_PORT=${MASTER_PORT:-29500}
LAUNCHER=${LAUNCHER:-auto}
CPU_WORKERS=${CPU_WORKERS:-1}
EXTRA_TRAIN_ARGS=${EXTRA_TRAIN_ARGS:-}

need_int MAX_UPDATE "$MAX_UPDATE" 1
for v in LR WARMUP_INIT_LR DROPOUT LABEL_SMOOTHING WEIGHT_DECAY CLIP_NORM; do need_num "$v" "${!v}"; done
[[ "$ADAM_BETAS" =~ ^\([0-9.]+,\ *[0-9.]+\)$ ]] || die "ADAM_BETAS must look like '(0.9, 0.98)', got '$ADAM_BETAS'"
for v in WARMUP_UPDATES SEED; do need_int "$v" "${!v}" 0; done
for v in TOKENS_PER_UPDATE MAX_TOKENS_PER_GPU SAVE_INTERVAL_UPDATES KEEP_INTERVAL_UPDATES LOG_INTERVAL NNODES CPU_WORKERS; do
  need_int "$v" "${!v}" 1
done
[ "$PRECISION" != bf16 ] || die "PRECISION=bf16 is not supported: fairseq 0.12's --bf16 also sets its TPU flag \
and fairseq-train then crashes on GPUs for every model; use PRECISION=fp16 or PRECISION=amp"
one_of PRECISION "$PRECISION" auto fp16 amp fp32
one_of LOG_FORMAT "$LOG_FORMAT" json simple tqdm none
one_of LAUNCHER "$LAUNCHER" auto torchrun
if [ "${DRY_RUN:-0}" = 1 ] && [ ! -f "$DATA_BIN/dict.$SRC.txt" ]; then
  log "DRY_RUN=1: $DATA_BIN holds no binarized data yet (prepare.sh makes it); the plan assumes it will"
else
  need_file "$DATA_BIN/dict.$SRC.txt" "binarized data (run prepare.sh first; DATA_BIN)"
fi
need_cmd fairseq-train "pip install fairseq-fixed"
need_cmd fairseq-rope-checkpoint "$ROPE_HINT"
need_cmd fairseq-rope-progress "$ROPE_HINT"
check_plugin

NGPU=$(detect_gpus)
[ "$NGPU" -eq 0 ] || [ "$CPU_WORKERS" -eq 1 ] || die "CPU_WORKERS=$CPU_WORKERS is for training on the CPU (NGPU=0); found NGPU=$NGPU"
PER_NODE=$(( NGPU > 0 ? NGPU : CPU_WORKERS ))
WORLD=$(( PER_NODE * NNODES ))
# UPDATE_FREQ first (as few accumulation steps as the per-GPU cap allows), then MAX_TOKENS so
# that WORLD * UPDATE_FREQ * MAX_TOKENS ~= TOKENS_PER_UPDATE
UPDATE_FREQ=${UPDATE_FREQ:-$(( (TOKENS_PER_UPDATE + WORLD * MAX_TOKENS_PER_GPU - 1) / (WORLD * MAX_TOKENS_PER_GPU) ))}
need_int UPDATE_FREQ "$UPDATE_FREQ" 1
MAX_TOKENS=${MAX_TOKENS:-$(( (TOKENS_PER_UPDATE + WORLD * UPDATE_FREQ - 1) / (WORLD * UPDATE_FREQ) ))}
need_int MAX_TOKENS "$MAX_TOKENS" 1
if [ "$PRECISION" = auto ]; then PRECISION=$([ "$NGPU" -gt 0 ] && echo fp16 || echo fp32); fi
device_args=()
case $PRECISION in fp16) device_args+=(--fp16) ;; amp) device_args+=(--amp) ;; esac
if [ "$NGPU" -eq 0 ]; then
  [ "$PRECISION" = fp32 ] || die "PRECISION=$PRECISION needs a GPU; none found (NGPU=0): use PRECISION=fp32 or auto"
  device_args+=(--cpu)
fi

# what the run is trained with, one NAME=value per line: recorded in $SAVE_DIR/.settings when it
# starts; a re-run with other values is refused unless ALLOW_CHANGED_SETTINGS=1
SETTINGS="ARCH=$ARCH
TASK=$TASK
DATA_BIN=$( (cd "$DATA_BIN" 2>/dev/null && pwd) || echo "$DATA_BIN")
MAX_UPDATE=$MAX_UPDATE
LR=$LR
WARMUP_INIT_LR=$WARMUP_INIT_LR
WARMUP_UPDATES=$WARMUP_UPDATES
ADAM_BETAS=$ADAM_BETAS
DROPOUT=$DROPOUT
LABEL_SMOOTHING=$LABEL_SMOOTHING
WEIGHT_DECAY=$WEIGHT_DECAY
CLIP_NORM=$CLIP_NORM
SEED=$SEED
TOKENS_PER_UPDATE=$((WORLD * UPDATE_FREQ * MAX_TOKENS)) (MAX_TOKENS x UPDATE_FREQ x workers)
EXTRA_TRAIN_ARGS=$EXTRA_TRAIN_ARGS"
if [ "${PRINT_SETTINGS:-0}" = 1 ]; then printf '%s\n' "$SETTINGS"; exit 0; fi
if [ "${DRY_RUN:-0}" != 1 ] && [ -f "$SAVE_DIR/.done" ] && [ "$(cat "$SAVE_DIR/.done")" = "$SETTINGS" ]; then
  log "$RUN_NAME already trained ($SAVE_DIR/.done); nothing to do"
  exit 0
fi

# one joined dictionary (prepare.sh's default): every embedding shared, as the paper; one per language:
# the decoder's input and output embeddings only (DRY_RUN before prepare.sh: the default assumed)
sharing=--share-all-embeddings
if [ -f "$DATA_BIN/dict.$SRC.txt" ] && ! cmp -s "$DATA_BIN/dict.$SRC.txt" "$DATA_BIN/dict.$TGT.txt"; then
  sharing=--share-decoder-input-output-embed
  log "$DATA_BIN has a dictionary per language: $sharing (not --share-all-embeddings)"
fi
tb_args=()
# fairseq logs to TensorBoard through tensorboardX or torch.utils.tensorboard (which needs the
# tensorboard package): look for either without importing torch (seconds per run)
if "$PYTHON" -c "import importlib.util as u, sys; sys.exit(not (u.find_spec('tensorboardX') or u.find_spec('tensorboard')))"; then
  tb_args=(--tensorboard-logdir "$SAVE_DIR/tensorboard")
fi
# shellcheck disable=SC2206
extra=($EXTRA_TRAIN_ARGS)
args=(
  "$DATA_BIN" --user-dir "$USER_DIR" --task "$TASK" --arch "$ARCH" "$sharing"
  --optimizer adam --adam-betas "$ADAM_BETAS" --clip-norm "$CLIP_NORM" --weight-decay "$WEIGHT_DECAY"
  --lr "$LR" --lr-scheduler inverse_sqrt --warmup-init-lr "$WARMUP_INIT_LR" --warmup-updates "$WARMUP_UPDATES"
  --criterion label_smoothed_cross_entropy --label-smoothing "$LABEL_SMOOTHING" --dropout "$DROPOUT"
  --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ" --max-update "$MAX_UPDATE" --seed "$SEED"
  --save-dir "$SAVE_DIR" --save-interval-updates "$SAVE_INTERVAL_UPDATES"
  --keep-interval-updates "$KEEP_INTERVAL_UPDATES" --no-epoch-checkpoints
  --log-format "$LOG_FORMAT" --log-interval "$LOG_INTERVAL"
  "${device_args[@]}" "${tb_args[@]}" "${extra[@]}"
)
# several processes: each reads checkpoint_last.pt itself. Otherwise fairseq has rank 0 load it and
# sends it to the others as a pickle that holds its OmegaConf config, which torch >= 2.6's
# weights-only torch.load on the receiving ranks refuses: a resumed multi-process run would fail
[ "$WORLD" -eq 1 ] || args+=(--load-checkpoint-on-all-dp-ranks)
launch=(fairseq-train)
if [ "$NGPU" -eq 0 ] && [ "$WORLD" -gt 1 ]; then
  [ "$NNODES" -eq 1 ] || die "CPU_WORKERS runs processes on one machine; NNODES=$NNODES needs GPUs"
  # fairseq 0.12 cannot take its rank from torchrun without a GPU (it divides by the GPU count),
  # and torch's DistributedDataParallel refuses the device_ids fairseq passes for a CPU model: so
  # on the CPU this script starts one fairseq-train per rank itself (tcp rendezvous, gloo), and
  # gradients are averaged by fairseq's own all-reduce (legacy_ddp)
  args+=(--distributed-world-size "$WORLD" --distributed-init-method "tcp://127.0.0.1:$MASTER_PORT"
         --distributed-no-spawn --distributed-backend gloo --ddp-backend legacy_ddp)
elif [ "$NGPU" -gt 0 ] && [ "$NNODES" -eq 1 ] && [ "$LAUNCHER" = auto ]; then
  # fairseq would otherwise take every GPU it sees: exactly NGPU of them (devices 0 .. NGPU-1 of the visible)
  args+=(--distributed-world-size "$WORLD")
elif [ "$NNODES" -gt 1 ] || [ "$LAUNCHER" = torchrun ]; then
  need_cmd torchrun "it comes with torch"
  [ -n "${MASTER_ADDR:-}" ] || [ "$NNODES" -eq 1 ] || die "NNODES=$NNODES needs MASTER_ADDR (the address of node 0)"
  launch=(torchrun --nnodes "$NNODES" --node_rank "$NODE_RANK" --nproc_per_node "$NGPU"
          --master_addr "${MASTER_ADDR:-127.0.0.1}" --master_port "$MASTER_PORT" "$(command -v fairseq-train)")
  args+=(--distributed-world-size "$WORLD")
fi

log "training $RUN_NAME: arch $ARCH on $([ "$NGPU" -gt 0 ] && echo "$WORLD GPU(s), $PRECISION" || echo "CPU ($WORLD process(es)), fp32")"
log "  $MAX_TOKENS tokens/batch x update-freq $UPDATE_FREQ x $WORLD worker(s) = ~$((WORLD * UPDATE_FREQ * MAX_TOKENS)) tokens/update, $MAX_UPDATE updates"
log "  checkpoints: $SAVE_DIR (every $SAVE_INTERVAL_UPDATES updates, last $KEEP_INTERVAL_UPDATES kept); log: $SAVE_DIR/train.log${tb_args:+; tensorboard: $SAVE_DIR/tensorboard}"
if [ "${DRY_RUN:-0}" = 1 ]; then
  log "DRY_RUN=1: would run: $(shell_quote "${launch[@]}" "${args[@]}")"
  exit 0
fi
# (a run with no checkpoint yet, e.g. one that failed at start-up, has nothing to mix: it starts anew)
if [ -f "$SAVE_DIR/.settings" ] && [ "$(cat "$SAVE_DIR/.settings")" != "$SETTINGS" ] \
    && ls "$SAVE_DIR"/checkpoint*.pt > /dev/null 2>&1; then
  changes=$(settings_changes "$SAVE_DIR/.settings" "$SETTINGS")
  if [ "${ALLOW_CHANGED_SETTINGS:-0}" != 1 ]; then
    die "$SAVE_DIR was started with other settings (recorded in $SAVE_DIR/.settings):
$changes
  Continuing would mix them in one run. Set them back, or train in another RUN_NAME/SAVE_DIR, or
  set ALLOW_CHANGED_SETTINGS=1 to continue this run with the new ones (e.g. a larger MAX_UPDATE)."
  fi
  log "  ALLOW_CHANGED_SETTINGS=1: continuing $SAVE_DIR with changed settings:"
  printf '%s\n' "$changes" | sed "s/^/[$STEP]   /" >&2
fi
mkdir -p "$SAVE_DIR"
# the updates checkpoint_last.pt holds (0: none); a damaged one is restored from the newest complete
# numbered checkpoint (fairseq copies checkpoint_last.pt non-atomically). A run refused here keeps its
# .done and .settings as they were.
resumed=$(fairseq-rope-checkpoint resume "$SAVE_DIR") || die "cannot resume from $SAVE_DIR/checkpoint_last.pt (see above)"
trained=$(json_field updates <<< "$resumed")
restored=$(json_field restored <<< "$resumed")
[ -z "$restored" ] || log "  $SAVE_DIR/checkpoint_last.pt was damaged (kept as checkpoint_last.pt.damaged): restored from $restored"
[ "$trained" -le "$MAX_UPDATE" ] || die "$SAVE_DIR/checkpoint_last.pt holds $trained updates, more than \
MAX_UPDATE=$MAX_UPDATE: raise MAX_UPDATE, or train in another SAVE_DIR"
[ "$trained" -eq 0 ] || log "  resuming from $SAVE_DIR/checkpoint_last.pt ($trained updates)"
rm -f "$SAVE_DIR/.done"
printf '%s\n' "$SETTINGS" > "$SAVE_DIR/.settings.tmp" && mv -f "$SAVE_DIR/.settings.tmp" "$SAVE_DIR/.settings"
if [ "$trained" -eq "$MAX_UPDATE" ]; then
  # fairseq-train would run one more update before it checks --max-update: the run ended and was
  # stopped before it was marked done (e.g. killed then); only the steps below are left
  log "  checkpoint_last.pt already holds update $MAX_UPDATE: fairseq-train is not run again"
else
  echo "# $(date '+%F %T') ${launch[*]} ${args[*]}" >> "$SAVE_DIR/train.log"
  if [ "$NGPU" -eq 0 ] && [ "$WORLD" -gt 1 ]; then
    log "  $WORLD CPU processes: rank 0 logs to $SAVE_DIR/train.log, rank r to $SAVE_DIR/train.rank<r>.log"
    # every rank is a child of this script (rank 0's fairseq-rope-progress itself, not a subshell running
    # it, which would leave it and its fairseq-train behind), killed when the script ends for any reason:
    # one rank failing must not leave the others waiting, nor a stopped script its ranks training
    pids=()
    if [ "$(trap -p INT)" = "trap -- '' SIGINT" ]; then  # a shell cannot undo an ignore it was started with
      log "  started with Ctrl-C (SIGINT) ignored (nohup, a background job): stop it with kill $$ (SIGTERM)"
    fi
    trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
    trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP  # (so that the EXIT trap runs)
    for ((rank = 1; rank < WORLD; rank++)); do
      "${launch[@]}" "${args[@]}" --distributed-rank "$rank" >> "$SAVE_DIR/train.rank$rank.log" 2>&1 &
      pids+=($!)
    done
    progress_options "$SAVE_DIR/train.log"
    fairseq-rope-progress "${PROGRESS_OPTIONS[@]}" -- "${launch[@]}" "${args[@]}" --distributed-rank 0 &
    pids+=($!)
    for _ in "${pids[@]}"; do
      wait -n || die "a training process failed (exit $?): see $SAVE_DIR/train.log and $SAVE_DIR/train.rank*.log"
    done
    trap - EXIT INT TERM HUP
  else
    logged "$SAVE_DIR/train.log" -- "${launch[@]}" "${args[@]}" || die "training $RUN_NAME failed: see $SAVE_DIR/train.log"
  fi
fi
# fairseq writes no checkpoint_<epoch>_<update>.pt for an update that ends an epoch (only
# checkpoint_last.pt, with --no-epoch-checkpoints): when the last update ends an epoch, name a
# copy of checkpoint_last.pt so that average.sh finds the final weights among the last ones.
if [ "$(( MAX_UPDATE % SAVE_INTERVAL_UPDATES ))" -eq 0 ] && ! ls "$SAVE_DIR"/checkpoint_*_"$MAX_UPDATE".pt >/dev/null 2>&1; then
  final=$(fairseq-rope-checkpoint final-name "$SAVE_DIR/checkpoint_last.pt" --max-update "$MAX_UPDATE" \
    | json_field name) || die "could not read $SAVE_DIR/checkpoint_last.pt"
  [ -n "$final" ] || die "fairseq-train ended without reaching update $MAX_UPDATE (no checkpoint_*_$MAX_UPDATE.pt in $SAVE_DIR); see $SAVE_DIR/train.log"
  cp "$SAVE_DIR/checkpoint_last.pt" "$SAVE_DIR/$final.tmp" && mv -f "$SAVE_DIR/$final.tmp" "$SAVE_DIR/$final"
  log "  update $MAX_UPDATE ended an epoch, which fairseq saves only as checkpoint_last.pt: copied to $SAVE_DIR/$final"
fi
mark_done "$SAVE_DIR" "$SETTINGS"
log "$RUN_NAME trained: $SAVE_DIR"
