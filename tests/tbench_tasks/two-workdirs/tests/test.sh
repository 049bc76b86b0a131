#!/bin/bash
# The tests start in the last WORKDIR; the COPY under the first one landed in /app.
if [ "$(pwd)" = /app/sub ] && [ "$(cat /app/sub/where.txt)" = /app/sub ] && [ -f /app/data.txt ] \
   && [ ! -e /app/sub/data.txt ] && cmp -s /app/data.txt /app/sub/copy.txt && [ "$(cat /app/sub/count.txt)" = 3 ]; then
  echo PASS; echo 1 > /logs/verifier/reward.txt
else
  echo FAIL; echo 0 > /logs/verifier/reward.txt
fi
