"""System prompts. AGENTS.md or CLAUDE.md at the repository root join them."""

from __future__ import annotations

import re
from pathlib import Path

BASE = """You are Clover, a coding agent working in the repository at {root}.
Use the tools to look at files, search, edit and run commands. Keep answers short and concrete.
Edit files with str_replace (exact, unique old_str) or create; never invent file contents you have not seen.
When the task is done, or you need the user, answer without a tool call."""

FIX = """You are Clover, fixing an issue in the repository at {root}.
Work in this order:
1. Explore: find the code the issue is about (grep, glob, outline, view).
2. Reproduce: write or run a small script or test that shows the bug.
3. Edit: fix the source with str_replace; keep the change minimal and do not edit the tests to make them pass.
4. Verify: run the reproduction and the relevant tests until they pass.
5. Summarise: answer without a tool call, in a few lines: what was wrong and what you changed."""
# `clover fix` exits 0 without a change only on this answer (clover_cli/exit_codes.py). Offered to
# models that may answer before editing; a model whose early answers are redone (the embedded one,
# whose training prompts are FIX alone) is not shown it, but its answer is recognised all the same.
NO_CHANGE = "If the issue needs no change at all, say so: start your answer with the words: No change needed."
_NO_CHANGE_ANSWER = re.compile(r"^[\s*_#>`\"'-]*no change (?:is )?needed\b", re.IGNORECASE)


def says_no_change_needed(answer: str) -> bool:
    """The model's answer opens with "No change needed" (markdown emphasis and quotes aside)."""
    return bool(_NO_CHANGE_ANSWER.match(answer))


def instructions_file(root: str | Path) -> tuple[str, str] | None:
    """The project's instructions file (AGENTS.md, else CLAUDE.md) and its text, or None."""
    for name in ("AGENTS.md", "CLAUDE.md"):
        path = Path(root) / name
        if path.is_file():
            try:
                return name, path.read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                continue
    return None


def project_instructions(root: str | Path) -> str:
    found = instructions_file(root)
    return f"\n\n# Project instructions ({found[0]})\n{found[1]}" if found else ""


def system_prompt(root: str | Path, kind: str = "chat", *, offer_no_change: bool = False) -> str:
    base = FIX if kind == "fix" else BASE
    if kind == "fix" and offer_no_change:
        base = f"{base}\n{NO_CHANGE}"
    return base.format(root=root) + project_instructions(root)
