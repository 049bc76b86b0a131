#!/bin/bash
expected=$(for i in $(seq 1 20); do echo "entry $i"; done)
if [ "$(cat /app/all.log 2>/dev/null)" = "$expected" ] && [ "$(cat /usr/local/share/clover-generated)" = generated ]; then
  echo PASS; echo 1 > /logs/verifier/reward.txt
else
  echo FAIL; echo 0 > /logs/verifier/reward.txt
fi
