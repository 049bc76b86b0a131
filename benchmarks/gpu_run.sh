#!/usr/bin/env bash
# The one prepared GPU run: CUDA parity tests for the Triton kernels, then benchmarks/kernels.py --gpu
# (delta rule vs torch vs flash-linear-attention, GDN block mode, decode-shape block attention vs the
# bandwidth roofline, MoE vs torch._grouped_mm, a 35B-shaped Clover cut to 4 layers doing one 32-token
# round vs weight bytes / bandwidth); then the checkpoint loader onto the GPU (a 35B-shaped random
# checkpoint cut to 4 layers, ~8.6 GB of bf16 in 2 shards per expert layout, written to local disk:
# peak host RSS above imports and load time, streamed vs the old loader, bound 1.2 x shard + 100 MB);
# then the vLLM plugin (the embedded Clover served by vLLM, greedy tokens vs ours) where vLLM is
# installed. About 10 minutes on an H200 (timeouts below); figures in one file.
#
#   bash benchmarks/gpu_run.sh
# The device machine has no network: fla-core travels as a wheel in .whl/ (git-excluded; carry it):
#   pip download fla-core==0.6.0 --no-deps --only-binary=:all: --python-version 3.12 -d .whl
# Figures: $OUT/gpu_figures.json (else ./gpu_figures.json), log beside them.
set -uo pipefail
# TRITON_INTERPRET=0: native kernels even if tests/conftest.py finds no /dev/nvidiactl in a sandbox
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1 TRITON_INTERPRET=0
unset CLOVER_KERNELS
OUTDIR="${OUT:-.}"
PY="${PYTHON:-python3}"
mkdir -p "$OUTDIR"

{
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
    --repeat 1 --dir "$CKPT" --json "$OUTDIR/gpu_figures.json"
  echo "loader exit: $?"
  rm -rf "$CKPT"

  echo "== vLLM plugin: the embedded Clover served by vLLM, greedy tokens vs ours"
  if $PY -c "import vllm" 2>/dev/null; then
    timeout 420 $PY -m pytest tests/test_engines.py -m slow -q -p no:cacheprovider
    echo "engine exit: $?"
  else
    echo "vllm not installed on this machine (no network to fetch it): skipped"
  fi
} 2>&1 | tee "$OUTDIR/gpu_run.log"
