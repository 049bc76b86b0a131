#!/bin/bash
# [verifier].env reaches the tests (with ${NAME:-default} resolved), [environment].env too,
# and [solution].env does not leak into them.
fail() { echo "FAIL: $1"; echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$EXPECTED_MODE" = "fallback" ] || fail "EXPECTED_MODE is '$EXPECTED_MODE'"
[ "$STRICT" = "true" ] || fail "STRICT is '$STRICT'"
[ -z "$SOLVER_MODE" ] || fail "the solution's env leaked into the tests"
[ "$GREETING" = "hello from task.toml" ] || fail "GREETING is '$GREETING'"
command -v task-tool >/dev/null || fail "task-tool is not on PATH"
[ "$(cat /app/out.txt 2>/dev/null)" = "tool-ok hello from task.toml" ] || fail "/app/out.txt is wrong"
echo "PASS"
echo 1 > /logs/verifier/reward.txt
