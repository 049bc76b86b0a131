#!/usr/bin/env bash
# One prepared GPU training run for the embedded Clover (issue 16), sized for ~12 minutes on a device
# machine with one GPU and 16 CPU cores: the data is made on the CPU cores (SynthFix instances, oracle
# trajectories with many workers, chat-coherence rows), the block-diffusion fine-tune runs on the GPU
# from the shipped weights, the result is exported and checked on held-out SynthFix and the
# hand-written set (CPU workers, the decoder the bench uses by default).
#
#   OUT=/some/dir bash benchmarks/gpu_train.sh          # on the device machine, from the repo root
#   DEVICE=cpu N_TRAIN=4 WORKERS=1 TRAIN_MIN=0.3 BENCH_COUNT=0 bash benchmarks/gpu_train.sh   # smoke run
#
# Knobs (environment): N_TRAIN instances (1500), WORKERS oracle/bench processes (14), ORACLE_S oracle
# time cap (240), TRAIN_MIN training minutes (5), BATCH rows per step (16), LR (1e-3), BLOCK_WEIGHTS,
# BENCH_COUNT held-out instances per decoder (40; 0 skips the checks), DEVICE (cuda).
# Everything lands in $OUT (else run/gpu): weights/, train/metrics.jsonl, bench summaries, gpu_train.log.
# Training checkpoints never enter git; copy weights/ into model/weights/ only if it measures better.
set -uo pipefail
OUTDIR="${OUT:-run/gpu}"
PY="${PYTHON:-python3}"
N_TRAIN="${N_TRAIN:-1500}"
WORKERS="${WORKERS:-14}"
ORACLE_S="${ORACLE_S:-240}"
TRAIN_MIN="${TRAIN_MIN:-5}"
BATCH="${BATCH:-16}"
LR="${LR:-1e-3}"
BLOCK_WEIGHTS="${BLOCK_WEIGHTS:-0.20,0.05,0.10,0.20,0.30,0.15}"
BENCH_COUNT="${BENCH_COUNT:-40}"
DEVICE="${DEVICE:-cuda}"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
mkdir -p "$OUTDIR"

{
  echo "== environment ($(date -u +%H:%M:%S))"
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  # the distribution installs as `clover`; install it in place when this interpreter lacks it
  $PY -c "import clover" 2>/dev/null || $PY -m pip install -q --no-deps --no-build-isolation -e . \
    || { echo "cannot import or install clover"; exit 1; }

  echo "== data: $N_TRAIN train instances, oracle with $WORKERS workers for at most ${ORACLE_S}s ($(date -u +%H:%M:%S))"
  $PY -m clover.evals.synthfix --split train --count "$N_TRAIN" --seed 7 --prose-fraction 0.7 --out "$OUTDIR/synth" || exit 1
  # the oracle writes one flushed line per trajectory: a time cap keeps what it has solved
  timeout "$ORACLE_S" $PY -m clover.evals.synthfix.oracle --instances "$OUTDIR/synth/instances.jsonl" \
    --out "$OUTDIR/oracle_raw.jsonl" --workers "$WORKERS" --seed 7 2> "$OUTDIR/oracle.err"
  $PY - "$OUTDIR/oracle_raw.jsonl" "$OUTDIR/oracle.jsonl" <<'EOF'
import json, sys
good = []
for line in open(sys.argv[1], encoding="utf-8"):
    try:
        json.loads(line)
        good.append(line if line.endswith("\n") else line + "\n")
    except json.JSONDecodeError:  # a line cut by the time cap
        pass
open(sys.argv[2], "w", encoding="utf-8").writelines(good)
print(f"{len(good)} oracle trajectories")
EOF
  $PY -m clover.evals.synthfix.chat_rows --out "$OUTDIR/chat.jsonl" --count 200 --seed 7 || exit 1
  $PY -m clover.evals.synthfix.chat_tasks --instances "$OUTDIR/synth/instances.jsonl" --out "$OUTDIR/chat_tasks.jsonl" \
    --count 400 --seed 7 || exit 1
  $PY -m clover.evals.synthfix.dataset --tokenizer model/weights/tokenizer.json \
    --trajectories "$OUTDIR/oracle.jsonl" "$OUTDIR/chat.jsonl" "$OUTDIR/chat_tasks.jsonl" --out "$OUTDIR/packed" --seq 1280 --align end \
    --code-fraction 0 --tool-prompt compact --renamed-copies 3 --copy-fraction 0.10 --seed 7 || exit 1

  echo "== train on $DEVICE for ${TRAIN_MIN} min ($(date -u +%H:%M:%S))"
  $PY -m clover.model.training.train --device "$DEVICE" --config model/weights/config.json --data "$OUTDIR/packed" \
    --out "$OUTDIR/train" --init-from model/weights --threads 8 --time-limit "$TRAIN_MIN" --lr "$LR" \
    --warmup 50 --batch "$BATCH" --seq 1280 --block-weights "$BLOCK_WEIGHTS" --ckpt-minutes 100 || exit 1
  $PY -m clover.model.training.train --out "$OUTDIR/train" --export-to "$OUTDIR/weights" \
    --tokenizer model/weights/tokenizer.json || exit 1
  rm -rf "$OUTDIR/train/ckpt" "$OUTDIR/synth" "$OUTDIR/oracle_raw.jsonl"  # only the exported weights come back

  if [ "$BENCH_COUNT" -gt 0 ]; then
    for model in model/weights "$OUTDIR/weights"; do
      tag=$([ "$model" = model/weights ] && echo shipped || echo new)
      echo "== held-out SynthFix, $tag ($(date -u +%H:%M:%S))"
      timeout 200 $PY -m clover.evals.bench --model "$model" --count "$BENCH_COUNT" --block-size 1,8,16,32 --order left \
        --max-steps 10 --max-tokens 256 --time-limit 120 --workers "$WORKERS" --device cpu --out "$OUTDIR/bench-$tag"
      echo "== hand-written set, $tag ($(date -u +%H:%M:%S))"
      timeout 120 $PY -m clover.evals.bench --split handwritten --model "$model" --count 22 --block-size 1,8,16 --order left \
        --max-steps 10 --max-tokens 256 --time-limit 100 --workers "$WORKERS" --device cpu --out "$OUTDIR/hw-$tag"
    done
    rm -rf "$OUTDIR"/bench-*/instances "$OUTDIR"/hw-*/instances
  fi
  echo "== done ($(date -u +%H:%M:%S))"
} 2>&1 | tee "$OUTDIR/gpu_train.log"
