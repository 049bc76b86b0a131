#!/bin/bash
if [ "$(cat /app/answer.txt 2>/dev/null)" = "SECRET-7d1f-answer" ]; then
  echo PASS; echo 1 > /logs/verifier/reward.txt
else
  echo FAIL; echo 0 > /logs/verifier/reward.txt
fi
