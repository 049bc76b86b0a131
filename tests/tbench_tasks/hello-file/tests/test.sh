#!/bin/bash
# Runs from the working directory; the reward goes to /logs/verifier/reward.txt.
if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, Clover!" ]; then
  echo "PASS: /app/hello.txt is right"
  echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL: /app/hello.txt is missing or wrong"
  echo 0 > /logs/verifier/reward.txt
fi
