"""What a tool did, in ToolResult's structured fields beside its text (paths, exit_code, edited,
line_files), checked against real files and a real git repository; and the tool kinds that
permissions, the agent and the model layer read instead of tool names or the text."""

from __future__ import annotations

from pathlib import Path

import pytest

from clover.agent import Agent
from clover.core.model_protocol import AssistantTurn, ModelCapabilities, ToolCall
from clover.core.tool_protocol import EDITED_KEY
from clover.repl.toolview import split_exit
from clover.steering.competence import edited_files
from clover.tools import search
from clover.tools.environment import LocalEnvironment
from clover.tools.files import CreateTool, InsertTool, StrReplaceTool, ViewTool
from clover.tools.git_tools import GitTool
from clover.tools.registry import default_tools, kind_of
from clover.tools.safety.permissions import PermissionGate, PermissionPolicy
from clover.tools.search import GlobTool, GrepTool
from clover.tools.shell import BashTool
from tests.gitrepo import committed_repo
from tests.gitrepo import git as _git


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return committed_repo(tmp_path, monkeypatch, {"a.py": "x = 1\n", "secret.txt": "hunter2\n"})


def test_the_file_tools_name_the_file_they_changed(tmp_path: Path) -> None:
    env = LocalEnvironment(str(tmp_path))
    made = CreateTool().run({"path": "pkg/m.py", "file_text": "a = 1\n"}, env)
    assert (made.paths, made.edited, made.exit_code) == (("pkg/m.py",), True, None)
    assert made.output == "Created pkg/m.py (1 lines)" and (tmp_path / "pkg/m.py").read_text() == "a = 1\n"
    replaced = StrReplaceTool().run({"path": "pkg/m.py", "old_str": "a = 1", "new_str": "a = 2"}, env)
    assert (
        replaced.paths == ("pkg/m.py",)
        and replaced.edited
        and replaced.output.startswith("Edited pkg/m.py. ")
    )
    inserted = InsertTool().run({"path": "pkg/m.py", "insert_line": 1, "text": "b = a"}, env)
    assert inserted.paths == ("pkg/m.py",) and inserted.edited
    assert (tmp_path / "pkg/m.py").read_text() == "a = 2\nb = a\n"
    # a refused edit changed nothing and says so
    missed = StrReplaceTool().run({"path": "pkg/m.py", "old_str": "zzz", "new_str": "y"}, env)
    assert missed.is_error and missed.paths == () and not missed.edited
    assert (tmp_path / "pkg/m.py").read_text() == "a = 2\nb = a\n"
    viewed = ViewTool().run({"path": "pkg/m.py"}, env)
    assert viewed.paths == () and not viewed.edited


def test_bash_gives_the_exit_code_beside_its_text(tmp_path: Path) -> None:
    env = LocalEnvironment(str(tmp_path))
    result = BashTool().run({"command": "echo out; exit 3"}, env)
    assert result.exit_code == 3 and result.output == "out\n[exit code 3]"  # the text the model sees
    assert split_exit(result) == ("out", 3)
    quiet = BashTool().run({"command": "true"}, env)
    assert quiet.exit_code == 0 and split_exit(quiet) == ("(no output)", 0)
    # text that merely ends like a command's is not taken for one
    fake = ViewTool().run({"path": "."}, env)
    assert fake.exit_code is None and split_exit(fake) == (fake.output, None)


def test_a_commit_names_the_files_it_committed(repo: Path) -> None:
    env = LocalEnvironment(str(repo))
    (repo / "a.py").write_text("x = 2\n")
    (repo / "mine.txt").write_text("the user's own\n")
    result = GitTool().run({"subcommand": "commit", "message": "change a", "paths": ["a.py"]}, env)
    assert not result.is_error and result.paths == ("a.py",), result.output
    assert _git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["a.py"]
    again = GitTool().run({"subcommand": "commit", "message": "again", "paths": ["a.py"]}, env)
    assert again.output.startswith("nothing to commit") and again.paths == ()
    status = GitTool().run({"subcommand": "status"}, env)
    assert status.paths == () and status.line_files == ()


def test_a_diff_says_which_file_each_line_is_of_and_read_rules_drop_those_sections(repo: Path) -> None:
    env = LocalEnvironment(str(repo))
    (repo / "a.py").write_text("x = 2\n")
    (repo / "secret.txt").write_text("hunter3\n")
    git = GitTool()
    result = git.run({"subcommand": "diff"}, env)
    lines = result.output.split("\n")
    assert len(result.line_files) == len(lines)
    for line, files in zip(lines, result.line_files, strict=True):
        if line.startswith("+x") or line.startswith("-x"):
            assert files == ("a.py",)
        if "hunter" in line:
            assert files == ("secret.txt",)
    gate = PermissionGate(PermissionPolicy("yolo", deny=["read(secret.txt)"], root=str(repo)))
    gate.screen(git, result)
    assert "hunter" not in result.output and "+x = 2" in result.output
    assert result.output.endswith("\n[1 file(s) denied by read rules left out of the diff]")


@pytest.mark.parametrize("backend", search.BACKENDS)
def test_search_results_name_each_lines_file_and_read_rules_drop_those_lines(
    repo: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "BACKENDS", (backend,))
    env = LocalEnvironment(str(repo))
    (repo / "notes.md").write_text("x marks\nhunter\n")
    grep = GrepTool()
    result = grep.run({"pattern": "hunter|x"}, env)
    lines = result.output.split("\n")
    assert len(result.line_files) == len(lines)
    assert {line.split(":", 1)[0]: files for line, files in zip(lines, result.line_files, strict=True)} == {
        "a.py": ("a.py",),
        "notes.md": ("notes.md",),
        "secret.txt": ("secret.txt",),
    }
    gate = PermissionGate(PermissionPolicy("yolo", deny=["read(secret*)"], root=str(repo)))
    gate.screen(grep, result)
    assert "hunter2" not in result.output and "notes.md:2:hunter" in result.output
    assert result.output.endswith("\n[1 line(s) from files denied by read rules left out]")
    found = GlobTool().run({"pattern": "*"}, env)
    assert found.line_files == (("a.py",), ("notes.md",), ("secret.txt",))
    gate.screen(GlobTool(), found)
    assert found.output == "a.py\nnotes.md\n[1 line(s) from files denied by read rules left out]"
    # an edit tool's result is not a read's: nothing is screened from it
    edit = StrReplaceTool().run({"path": "notes.md", "old_str": "x marks", "new_str": "y marks"}, env)
    before = edit.output
    gate.screen(StrReplaceTool(), edit)
    assert edit.output == before


def test_every_default_tool_has_a_kind_and_rules_follow_it() -> None:
    kinds = {t.name: t.kind for t in default_tools()}
    assert kinds == {
        "view": "read",
        "create": "edit",
        "str_replace": "edit",
        "insert": "edit",
        "glob": "read",
        "grep": "read",
        "bash": "run",
        "git": "git",
        "outline": "read",
    }
    assert kind_of("bash") == "run" and kind_of("no_such_tool") == "other"
    read_only = {t.name for t in default_tools() if t.is_read_only({})}
    assert read_only == {"view", "glob", "grep", "outline"}
    # an `edit(...)` rule covers any tool of the edit kind, whatever its name
    policy = PermissionPolicy("auto-edit", deny=["edit(*.lock)"])
    assert policy.decide("patch", {"path": "a.lock"}, False, kind="edit")[0] == "deny"
    assert policy.decide("patch", {"path": "a.py"}, False, kind="edit")[0] == "allow"
    assert policy.decide("patch", {"path": "a.py"}, False, kind="other")[0] == "ask"


class _Turns(ModelCapabilities):
    name, context_window = "turns", 100_000

    def __init__(self, turns: list[AssistantTurn]) -> None:
        self.turns = turns

    def complete(self, messages, tools, on_event=None, options=None) -> AssistantTurn:
        return self.turns.pop(0) if self.turns else AssistantTurn(text="done")


def test_the_agent_hands_the_edited_paths_to_the_model_layer(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    edit = ToolCall("str_replace", {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"})
    echo = ToolCall("bash", {"command": "echo Edited nothing.py."})
    agent = Agent(
        _Turns([AssistantTurn(tool_calls=[edit, echo])]),
        LocalEnvironment(str(tmp_path)),
        default_tools(),
        system_prompt="s",
    )
    agent.run("fix add")
    assert agent.edited and (tmp_path / "calc.py").read_text().endswith("a + b\n")
    tool_messages = [m for m in agent.messages if m["role"] == "tool"]
    assert tool_messages[0][EDITED_KEY] == ["calc.py"] and EDITED_KEY not in tool_messages[1]
    assert edited_files(agent.messages[:-1]) == ["calc.py"]


@pytest.mark.parametrize(
    "deny",
    [["read(.env)", "read(secrets/*.env)"], ["read(**/.env)", "read(secrets/**/*.env)"]],
)
def test_a_directory_view_leaves_out_the_names_of_files_read_rules_deny(
    tmp_path: Path, deny: list[str]
) -> None:
    """A directory view's entry is the path it shows: a denied file's name is left out of the
    listing, as `view` of that file is refused (`**/` also stands for no directory, as in .gitignore)."""
    files = {
        ".env": "TOKEN=top\n",
        "config/.env": "TOKEN=config\n",
        "secrets/prod.env": "TOKEN=prod\n",
        "secrets/readme.md": "ask ops\n",
        "app.py": "x = 1\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = LocalEnvironment(str(tmp_path))
    gate = PermissionGate(PermissionPolicy("yolo", deny=deny, root=str(tmp_path)))
    view = ViewTool()
    for directory in (".", "secrets", "config"):
        result = view.run({"path": directory}, env)
        gate.screen(view, result)
        assert ".env" not in result.output and "TOKEN" not in result.output, result.output
        assert "left out]" in result.output
    shown = view.run({"path": "."}, env)
    gate.screen(view, shown)
    assert "app.py" in shown.output and "secrets/readme.md" in shown.output
    for denied in (".env", "config/.env", "secrets/prod.env"):
        assert gate.authorize(ToolCall("view", {"path": denied}), view) is not None
