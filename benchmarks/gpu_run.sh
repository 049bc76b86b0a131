#!/usr/bin/env bash
# The one prepared GPU run, in sections:
#   kernels:  CUDA parity tests for the Triton kernels, then benchmarks/kernels.py --gpu (delta rule vs
#             torch vs flash-linear-attention, GDN block mode, decode-shape block attention vs the
#             bandwidth roofline, MoE vs torch._grouped_mm, a 35B-shaped Clover cut to 4 layers doing one
#             32-token round vs weight bytes / bandwidth); the checkpoint loader onto the GPU (35B-shaped,
#             4 layers, bf16, 2 shards per expert layout: peak host RSS, load time, streamed vs the old
#             loader); the vLLM plugin (the embedded Clover served by vLLM, greedy tokens vs ours) where
#             vLLM is installed. About 10 minutes on an H200.
#   realsize: Clover-35B-A3B at full size (issue 51), under 10 minutes by its timeouts: CUDA parity of
#             the int4 / int8 kernels (tests/test_quantized.py); a GPTQ-Int4 checkpoint of 4 real-size
#             layers written to local disk and loaded onto the GPU (host peak RSS, load s, GPU memory,
#             the cost curve, B = 1 and block decoding; extrapolated to 40 layers); then all 40 layers
#             built on the GPU without a checkpoint, int4 and bf16, each with the Triton kernels and with
#             the torch reference (CLOVER_KERNELS): one forward per width 1..32 and decode tok/s at
#             B = 1 and the block width (benchmarks/realsize.py).
#   all (default): kernels, then realsize (~20 minutes: two device calls of 10 minutes each, one per
#             section, fit the device tool's limit).
#
#   bash benchmarks/gpu_run.sh [all|kernels|realsize] [--dry-run]
# --dry-run: the realsize section on this machine's CPU with the test preset's dimensions (tests run
# it; proves the script and every python step it calls before a GPU is ever lent).
# The device machine has no network: fla-core travels as a wheel in .whl/ (git-excluded; carry it):
#   pip download fla-core==0.6.0 --no-deps --only-binary=:all: --python-version 3.12 -d .whl
# Figures: $OUT/gpu_figures.json (else ./gpu_figures.json), log beside them.
set -uo pipefail
# TRITON_INTERPRET=0: native kernels even if tests/conftest.py finds no /dev/nvidiactl in a sandbox
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1 TRITON_INTERPRET=0
unset CLOVER_KERNELS
OUTDIR="${OUT:-.}"
PY="${PYTHON:-python3}"
SECTION=all
DRY=0
for arg in "$@"; do
  case "$arg" in
    all|kernels|realsize) SECTION="$arg" ;;
    --dry-run) DRY=1; SECTION=realsize ;;
    *) echo "usage: bash benchmarks/gpu_run.sh [all|kernels|realsize] [--dry-run]" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUTDIR"
FIG="$OUTDIR/gpu_figures.json"

# Issue 51's section. On a GPU: ~9.5 minutes at most (the timeouts); --dry-run: CPU, tiny shapes, seconds.
realsize_section() {
  local dev=cuda layers=4 full=40 widths=1,2,4,8,16,32 tiny=() tokens=16 twrite=100 tload=120 tshort=60 fails=0
  if [ "$DRY" = 1 ]; then dev=cpu; widths=1,2,4; tiny=(--tiny); tokens=4; twrite=120; tload=120; tshort=120; fi
  echo "== realsize: int4 / int8 kernels on $dev against their codes"
  if [ "$DRY" = 1 ]; then
    echo "(dry run: CUDA parity needs a GPU; the CPU parity is the default test run)"
  else
    timeout 80 $PY -m pytest tests/test_quantized.py -q -p no:cacheprovider -k cuda
    note "parity" $?
  fi
  echo "== realsize: GPTQ-Int4 checkpoint, $layers real-size layers, written to local disk, loaded onto $dev"
  local ckpt="${CLOVER_REALSIZE_DIR:-/tmp/clover-realsize-gptq}"
  rm -rf "$ckpt"
  timeout "$twrite" $PY -m benchmarks.write_realsize --out "$ckpt" --layers "$layers" "${tiny[@]}"
  note "write" $?
  timeout "$tload" $PY -m benchmarks.realsize --model "$ckpt" --device "$dev" --full-layers "$full" \
    --widths "$widths" --new-tokens "$tokens" --json "$FIG"
  note "realsize (checkpoint)" $?
  rm -rf "$ckpt"
  for form in int4 bf16; do
    for kernels in triton torch; do
      echo "== realsize: all $full layers built on $dev, $form, CLOVER_KERNELS=$kernels"
      if [ "$DRY" = 1 ] && [ "$kernels" = triton ]; then echo "(dry run: Triton needs a GPU)"; continue; fi
      CLOVER_KERNELS=$kernels timeout "$tshort" $PY -m benchmarks.realsize --random "$form" --layers "$full" \
        "${tiny[@]}" --device "$dev" --full-layers "$full" --widths "$widths" --new-tokens "$tokens" --repeats 1 \
        --json "$FIG"
      note "realsize ($form, $kernels)" $?
    done
  done
  echo "realsize section: $fails step(s) failed"
  return "$fails"
}

note() {  # note STEP EXIT: print it, count a failure
  echo "$1 exit: $2"
  [ "$2" = 0 ] || fails=$((fails + 1))
}

{
  if [ "$DRY" = 1 ]; then
    echo "== dry run on $(uname -m) CPU, tiny shapes"
    realsize_section
    exit $?
  fi
  echo "== environment"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  # the image may lack triton or fla: carried wheels first, then PyPI where it is reachable
  if ! $PY -c "import triton, fla" 2>/dev/null; then
    if ls .whl/*.whl >/dev/null 2>&1; then
      $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
        && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
    else
      timeout 120 $PY -m pip install -q triton fla-core || echo "pip install failed (offline?); going on without"
    fi
  fi
  # the repository's folders import as clover.* only once installed (no network: no build isolation)
  $PY -c "import clover.model" 2>/dev/null || $PY -m pip install -q --no-deps --no-build-isolation -e . \
    || echo "could not install the project; imports of clover.* will fail"
  $PY - <<'EOF'
import torch
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "")
for mod in ("triton", "fla"):
    try:
        print(mod, __import__(mod).__version__)
    except Exception as exc:
        print(mod, "unavailable:", exc)
EOF

  if [ "$SECTION" != realsize ]; then
  echo "== parity on CUDA (Triton native vs torch reference)"
  timeout 200 $PY -m pytest tests/test_kernels_triton.py tests/test_model_kernels.py -q -p no:cacheprovider
  echo "pytest exit: $?"

  echo "== benchmarks"
  timeout 330 $PY -m benchmarks.kernels --gpu --lengths 1024 4096 16384 --layers 4 --context 4096 \
    --json "$OUTDIR/gpu_figures.json"
  echo "benchmarks exit: $?"

  echo "== loader: 35B-shaped random checkpoint (4 layers, bf16, 2 shards per layout) onto the GPU"
  CKPT="${CLOVER_LOAD_DIR:-/tmp/clover-load35}"
  timeout 300 $PY -m benchmarks.load_memory --preset clover-35b-a3b --layers 4 --shards 2 --device cuda \
    --repeat 1 --dir "$CKPT" --json "$FIG"
  echo "loader exit: $?"
  rm -rf "$CKPT"

  echo "== vLLM plugin: the embedded Clover served by vLLM, greedy tokens vs ours"
  if $PY -c "import vllm" 2>/dev/null; then
    timeout 420 $PY -m pytest tests/test_engines.py -m slow -q -p no:cacheprovider
    echo "engine exit: $?"
  else
    echo "vllm not installed on this machine (no network to fetch it): skipped"
  fi
  fi

  if [ "$SECTION" != kernels ]; then
    realsize_section
  fi
} 2>&1 | tee "$OUTDIR/gpu_run.log"
exit "${PIPESTATUS[0]}"
