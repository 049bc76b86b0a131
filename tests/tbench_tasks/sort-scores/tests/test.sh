#!/bin/bash
if [ "$(cat /app/top.txt 2>/dev/null)" = "$(printf 'cyd\neve\nada')" ]; then
  echo "PASS"; echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL: /app/top.txt is wrong"; echo 0 > /logs/verifier/reward.txt
fi
