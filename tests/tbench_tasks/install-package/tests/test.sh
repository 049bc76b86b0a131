#!/bin/bash
if dpkg -s clover-greet >/dev/null 2>&1 && [ "$(cat /app/greeting.txt 2>/dev/null)" = "hello from a package" ]; then
  echo PASS; echo 1 > /logs/verifier/reward.txt
else
  echo FAIL; echo 0 > /logs/verifier/reward.txt
fi
