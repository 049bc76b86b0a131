#!/bin/bash
if [ "$(cat /app/from-build.txt)" = "built in stage one" ] && [ "$(cat /app/out/inner.txt)" = inner ] \
   && [ ! -e /src/artifact.txt ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
