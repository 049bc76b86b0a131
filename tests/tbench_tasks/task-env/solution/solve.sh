#!/bin/bash
# task-tool is found through [environment].env PATH; SOLVER_MODE comes from [solution].env only.
[ "$SOLVER_MODE" = "oracle" ] || { echo "SOLVER_MODE not set for the solution" >&2; exit 1; }
echo "$(task-tool) $GREETING" > /app/out.txt
