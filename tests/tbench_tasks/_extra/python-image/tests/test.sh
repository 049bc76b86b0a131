#!/bin/bash
if [ "$(cat /app/out.txt 2>/dev/null)" = "tiny-ok" ] && python -c "import clover_tiny" && pip --version; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
