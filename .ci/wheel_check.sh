#!/usr/bin/env bash
# The wheel as a user installs it: build it, install it into a fresh virtual environment, and run it
# from a folder outside the source tree, so a missing package-data entry or a stray import of the
# source tree (`import model` instead of `import clover.model`) fails here.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m pip wheel -q --no-deps -w "$work/dist" "$src"
wheel=$(ls "$work"/dist/clover_cli-*.whl)
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q -c "$src/constraints/cpu.txt" "$wheel[local]"
cd "$work"
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config"
"$work/venv/bin/clover" --version
# A short `clover fix` on a scratch repository with a scripted backend.
mkdir scratch && cd scratch
printf 'def add(a, b):\n    return a - b\n' > calc.py
git init -q && git add -A && git -c user.name=ci -c user.email=ci@ci commit -qm init
printf 'add(2, 3) returns -1, not 5.\n' > ../ISSUE.md
cat > ../script.json <<'JSON'
[{"tool_calls": [{"name": "view", "arguments": {"path": "calc.py"}}]},
 {"tool_calls": [{"name": "str_replace", "arguments": {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"}}]},
 {"text": "Fixed: add() subtracted."}]
JSON
"$work/venv/bin/clover" fix ../ISSUE.md --repo . --model "scripted:../script.json" --yes --patch-out ../fix.diff
grep -q '^+    return a + b' ../fix.diff
# The embedded model ships inside the wheel and loads from site-packages.
"$work/venv/bin/python" - <<'PY'
from clover.model import EMBEDDED_DIR
from clover.model.loading.load import load_checkpoint
assert "site-packages" in str(EMBEDDED_DIR), EMBEDDED_DIR
load_checkpoint(EMBEDDED_DIR)
print("embedded model loads from", EMBEDDED_DIR)
PY
# The installed top-level names are exactly the ones we chose.
cd "$src" && CLOVER_TEST_VENV="$work/venv" python -m pytest -q -m slow tests/test_packaging.py
echo "wheel check: ok"
