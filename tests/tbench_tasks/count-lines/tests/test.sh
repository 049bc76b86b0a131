#!/bin/bash
expected=$(cat /app/data/*.txt | wc -l)
got=$(tr -d '[:space:]' < /app/count.txt 2>/dev/null)
if [ "$expected" = "12" ] && [ "$got" = "$expected" ]; then
  echo "PASS"; echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL: got '$got', expected $expected"; echo 0 > /logs/verifier/reward.txt
fi
