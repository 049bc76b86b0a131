#!/bin/bash
cat /app/uv-version.txt
if grep -q "^uv 0.8.14" /app/uv-version.txt && [ -x /bin/uvx ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
