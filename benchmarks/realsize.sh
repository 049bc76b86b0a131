#!/usr/bin/env bash
# Clover-35B-A3B at its real size on this machine (issue 51), in one go, for a quiet machine:
#   1. writes the full-size GPTQ-Int4 checkpoint with random weights if DIR has none
#      (benchmarks/write_realsize.py: ~20.5 GB of disk at 40 layers, one layer in memory at a time);
#   2. `clover chat --model DIR -p PROMPT` non-interactively, under /usr/bin/time (peak RSS, seconds);
#   3. benchmarks/realsize.py: bandwidth, the load under peak-RSS measurement, the cost curve (one
#      forward at widths 1..32, split by component), B = 1 against block decoding on the same weights,
#      and the closing table (format, peak RSS, load s, tok/s at B = 1 and at the block width, bound).
#
#   bash benchmarks/realsize.sh [DIR]          # DIR default /work/big/clover-35b-gptq
# Environment: LAYERS (40; fewer: a reduced-depth checkpoint, the figures extrapolated to 40),
# THREADS (2), NEW_TOKENS (16), QUANTIZE (none | int8: lm_head and the other bf16 matrices too),
# TINY=1 (the test preset's dimensions: the whole pipeline in seconds), PYTHON.
# Results: DIR.results/ (realsize.json, chat.txt, realsize.log); nothing is deleted.
set -uo pipefail
DIR="${1:-/work/big/clover-35b-gptq}"
LAYERS="${LAYERS:-40}"
THREADS="${THREADS:-2}"
NEW_TOKENS="${NEW_TOKENS:-16}"
QUANTIZE="${QUANTIZE:-none}"
PY="${PYTHON:-python}"
RESULTS="${DIR%/}.results"
TINY_FLAG=()
WIDTHS="1,2,4,8,16,32"
if [ "${TINY:-0}" = 1 ]; then TINY_FLAG=(--tiny); WIDTHS="1,2,4"; NEW_TOKENS=4; fi
mkdir -p "$RESULTS"
export OMP_NUM_THREADS="$THREADS"
fail=0

{
  echo "== checkpoint: $DIR ($LAYERS layers)"
  if [ ! -f "$DIR/config.json" ]; then
    $PY -m benchmarks.write_realsize --out "$DIR" --layers "$LAYERS" "${TINY_FLAG[@]}" || { echo "write failed"; exit 1; }
  else
    echo "present: $(du -sh "$DIR" | cut -f1)"
  fi

  echo "== clover chat --model $DIR -p (one prompt, non-interactive)"
  REPO="$(mktemp -d)"
  (cd "$REPO" && git init -q && printf 'def add(a, b):\n    return a + b\n' > calc.py)
  /usr/bin/time -v env CLOVER_MAX_TOKENS="$NEW_TOKENS" CLOVER_MAX_STEPS=2 CLOVER_QUANTIZE="$QUANTIZE" CLOVER_THREADS="$THREADS" \
    $PY -m clover chat --model "$DIR" --repo "$REPO" --no-think -p "Write a function that reverses a string." \
    > "$RESULTS/chat.txt" 2> "$RESULTS/chat.stderr"
  rc=$?
  echo "exit $rc; reply: $(head -c 300 "$RESULTS/chat.txt" | tr '\n' ' ')"
  grep -E "Maximum resident set size|Elapsed \(wall clock\)" "$RESULTS/chat.stderr" | sed 's/^\s*/  /'
  # random weights rarely end a reply before the token limit: exit 1 "truncated" is a reply decoded,
  # and so is exit 4 (the step limit: the noise parsed as a tool call)
  if [ "$rc" != 0 ] && [ "$rc" != 4 ] && ! { [ "$rc" = 1 ] && grep -q "truncated" "$RESULTS/chat.stderr"; }; then
    fail=1
    grep -v -E "^\s" "$RESULTS/chat.stderr" | tail -3
  fi
  rm -rf "$REPO"

  echo "== benchmarks/realsize.py"
  rm -f "$RESULTS/realsize.json"
  $PY -m benchmarks.realsize --model "$DIR" --full-layers 40 --threads "$THREADS" --quantize "$QUANTIZE" \
    --widths "$WIDTHS" --new-tokens "$NEW_TOKENS" --json "$RESULTS/realsize.json" || fail=1
  exit "$fail"
} 2>&1 | tee "$RESULTS/realsize.log"
exit "${PIPESTATUS[0]}"
