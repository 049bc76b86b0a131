#!/usr/bin/env bash
# The one prepared GPU run for the Triton kernels: CUDA parity tests, then benchmarks/kernels.py --gpu
# (delta rule vs torch vs flash-linear-attention, GDN block mode, decode-shape block attention vs the
# bandwidth roofline, MoE vs torch._grouped_mm, a 35B-shaped Clover cut to 4 layers doing one 32-token
# round vs weight bytes / bandwidth). A few minutes on an H200; at most ~9 (timeouts below).
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
} 2>&1 | tee "$OUTDIR/gpu_run.log"
