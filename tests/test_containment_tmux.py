"""The step boundary in a real terminal (tmux): a command that also writes a git hook is run, and
the chat then asks about the hook alone; "no" keeps the rest of the step and leaves the hook out,
"yes" applies it. The question says why the change was held."""

from __future__ import annotations

from pathlib import Path

import pytest

from clover.tools.safety.boundary import available
from tests.test_chat_tmux import ROOT, Tmux, pytestmark  # noqa: F401  (skips without tmux)
from tests.test_chat_tmux_trust import _command, _exit, _repo, _script

PLANT = (
    "printf '#!/bin/sh\\necho planted\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && "
    "echo done > made.txt"
)


@pytest.mark.skipif(not available("/tmp/clover-test-steps")[0], reason="no step boundary here")
@pytest.mark.parametrize("answer", ["n", "y"])
def test_a_hook_a_command_wrote_is_asked_about_on_its_own(tmp_path: Path, answer: str) -> None:
    repo = _repo(tmp_path / "repo")
    call = {"name": "bash", "arguments": {"command": PLANT}}
    script = _script(tmp_path, [{"tool_calls": [call]}, {"text": "Set up."}])
    term = Tmux(_command(tmp_path, repo, "--model", f"scripted:{script}", "--mode", "yolo"), cwd=ROOT)
    try:
        term.wait_for("› ")
        term.type("set up the hooks")
        term.send("Enter")
        screen = term.wait_for("Apply this change?")  # yolo ran the command; the hook is asked about
        assert "the command also wrote .git/hooks/pre-commit, a git hook" in screen.replace("\n", " ")
        assert "don't ask again for changes to .git/hooks/pre-commit" in screen
        term.send(answer)
        screen = term.wait_for("Set up.")
        assert (repo / "made.txt").read_text() == "done\n"  # the rest of the step, either way
        hook = repo / ".git" / "hooks" / "pre-commit"
        if answer == "n":
            assert not hook.exists() and "not applied" in screen
        else:
            assert hook.read_text().startswith("#!/bin/sh")
        _exit(term)
    finally:
        term.close()
