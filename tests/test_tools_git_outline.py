"""The git tool on a real temporary repository, and tree-sitter outlines for six languages."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clover.tools.environment import LocalEnvironment
from clover.tools.git_tools import GitTool
from clover.tools.listing import RunBackedFiles
from clover.tools.outline import OutlineTool
from tests.gitrepo import committed_repo
from tests.gitrepo import git as _git


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return committed_repo(tmp_path, monkeypatch, {"a.py": "x = 1\n", "b.txt": "keep\n"})


class RemoteLike(RunBackedFiles, LocalEnvironment):
    """Lists and stats files only by running programs (find, stat, git), as a container does."""


@pytest.mark.parametrize("env_cls", [LocalEnvironment, RemoteLike])
def test_git_status_diff_log_show_commit(repo: Path, env_cls: type[LocalEnvironment]) -> None:
    env, git = env_cls(str(repo)), GitTool()
    assert git.run({"subcommand": "status"}, env).output.startswith("## main")
    (repo / "a.py").write_text("x = 2\n")
    (repo / "new.txt").write_text("new\n")
    status = git.run({"subcommand": "status"}, env).output
    assert " M a.py" in status and "?? new.txt" in status
    diff = git.run({"subcommand": "diff"}, env).output
    assert "-x = 1" in diff and "+x = 2" in diff
    assert git.run({"subcommand": "diff", "path": "b.txt"}, env).output == "no changes"
    assert git.run({"subcommand": "diff", "staged": True}, env).output == "no changes"
    assert git.run({"subcommand": "diff", "path": "../elsewhere"}, env).is_error

    # written by the test, not by an agent's step: named (an environment without the step boundary
    # cannot tell what the agent wrote, and commits nothing it is not told to)
    committed = git.run(
        {"subcommand": "commit", "message": "second: edit a, add new", "paths": ["a.py", "new.txt"]}, env
    )
    assert not committed.is_error, committed.output
    assert _git(repo, "status", "--porcelain") == ""  # everything was staged and committed
    log = git.run({"subcommand": "log", "n": 5}, env).output.splitlines()
    assert len(log) == 2 and log[0].endswith("T: second: edit a, add new") and log[1].endswith("first commit")
    assert len(git.run({"subcommand": "log", "n": 1}, env).output.splitlines()) == 1
    show = git.run({"subcommand": "show", "rev": "HEAD"}, env).output
    assert "second: edit a, add new" in show and "+new" in show
    assert git.run({"subcommand": "commit", "message": "empty"}, env).output.startswith("nothing to commit")
    assert git.run({"subcommand": "show", "rev": "no-such-rev"}, env).is_error
    assert git.run({"subcommand": "commit"}, env).is_error  # message required
    assert git.run({"subcommand": "push"}, env).is_error


def test_git_read_only_per_call(tmp_path: Path) -> None:
    git = GitTool()
    assert git.kind == "git"  # not a "read" tool: whether a call only reads is per call
    assert git.is_read_only({"subcommand": "diff"}) and not git.is_read_only({"subcommand": "commit"})
    result = git.run({"subcommand": "status"}, LocalEnvironment(str(tmp_path)))
    assert result.is_error and "not inside a git repository" in result.output


SOURCES = {
    "pkg/shapes.py": """
class Shape:
    def area(self) -> float:
        return 0.0

    class Meta:
        def describe(cls):
            pass

@decorator
def make_shape(kind: str, *args) -> Shape:
    return Shape()
""",
    "web/app.js": """
class Widget {
  render(props) { return null; }
}
function mount(el) {}
const area = (w, h) => w * h;
const notAFunction = 3;
""",
    "web/types.ts": """
export interface Sized { area(): number }
export class Square implements Sized {
  constructor(private side: number) {}
  area(): number { return this.side ** 2; }
}
export type Id = string;
export enum Color { Red, Green }
""",
    "web/view.tsx": """
export function Panel(props: { title: string }) { return <div>{props.title}</div>; }
""",
    "go/shape.go": """
package shape

type Rect struct { W, H float64 }

type Shape interface { Area() float64 }

func (r *Rect) Area() float64 { return r.W * r.H }

func NewRect(w, h float64) *Rect { return &Rect{w, h} }
""",
    "rs/lib.rs": """
pub struct Circle { r: f64 }
pub trait Area { fn area(&self) -> f64; }
impl Area for Circle {
    fn area(&self) -> f64 { 3.14 * self.r * self.r }
}
mod util { pub fn helper() {} }
""",
    "java/Box.java": """
public class Box {
    public Box(int size) {}
    public int area() { return 1; }
    enum Kind { SMALL, LARGE }
}
""",
}


@pytest.fixture
def code(tmp_path: Path) -> LocalEnvironment:
    for rel, text in SOURCES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text.lstrip("\n"))
    (tmp_path / "ignored").mkdir()
    (tmp_path / "ignored/area.py").write_text("def area(): pass\n")
    (tmp_path / ".gitignore").write_text("ignored/\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return LocalEnvironment(str(tmp_path))


EXPECTED_OUTLINES = {
    "pkg/shapes.py": [
        "class Shape  L1-7",
        "  def area(self)  L2-3",
        "  class Meta  L5-7",
        "    def describe(cls)  L6-7",
        "def make_shape(kind: str, *args)  L10-11",
    ],
    "web/app.js": [
        "class Widget  L1-3",
        "  method render(props)  L2-2",
        "function mount(el)  L4-4",
        "function area(w, h)  L5-5",
    ],
    "web/types.ts": [
        "interface Sized  L1-1",
        "  method area()  L1-1",
        "class Square  L2-5",
        "  method constructor(private side: number)  L3-3",
        "  method area()  L4-4",
        "type Id  L6-6",
        "enum Color  L7-7",
    ],
    "web/view.tsx": ["function Panel(props: { title: string })  L1-1"],
    "go/shape.go": [
        "struct Rect  L3-3",
        "interface Shape  L5-5",
        "  method Area()  L5-5",
        "func (r *Rect) Area()  L7-7",
        "func NewRect(w, h float64)  L9-9",
    ],
    "rs/lib.rs": [
        "struct Circle  L1-1",
        "trait Area  L2-2",
        "  fn area(&self)  L2-2",
        "impl Area for Circle  L3-5",
        "  fn area(&self)  L4-4",
        "mod util  L6-6",
        "  fn helper()  L6-6",
    ],
    "java/Box.java": [
        "class Box  L1-5",
        "  constructor Box(int size)  L2-2",
        "  method area()  L3-3",
        "  enum Kind  L4-4",
    ],
}


@pytest.mark.parametrize("rel", sorted(EXPECTED_OUTLINES))
def test_outline_file(code: LocalEnvironment, rel: str) -> None:
    result = OutlineTool().run({"path": rel}, code)
    assert not result.is_error, result.output
    assert result.output.splitlines() == [f"{rel}:", *EXPECTED_OUTLINES[rel]]


def test_outline_symbol_lookup(code: LocalEnvironment) -> None:
    tool = OutlineTool()
    hits = tool.run({"symbol": "area"}, code).output.splitlines()
    assert hits == [
        "java/Box.java:3-3: method area()  (in Box)",
        "pkg/shapes.py:2-3: def area(self)  (in Shape)",
        "rs/lib.rs:2-2: fn area(&self)  (in Area)",
        "rs/lib.rs:4-4: fn area(&self)  (in Circle)",
        "web/app.js:5-5: function area(w, h)",
        "web/types.ts:1-1: method area()  (in Sized)",
        "web/types.ts:4-4: method area()  (in Square)",
    ]  # ignored/area.py is gitignored; Go's `Area` differs in case
    assert tool.run({"symbol": "Circle.area"}, code).output == "rs/lib.rs:4-4: fn area(&self)  (in Circle)"
    assert tool.run({"symbol": "Rect.Area"}, code).output == "go/shape.go:7-7: func (r *Rect) Area()"
    assert len(tool.run({"symbol": "area", "path": "web"}, code).output.splitlines()) == 3
    assert tool.run({"symbol": "nowhere"}, code).output.startswith("no definition")
    remote = tool.run({"symbol": "Meta.describe"}, RemoteLike(code.root)).output
    assert remote == "pkg/shapes.py:6-7: def describe(cls)  (in Shape.Meta)"


def test_outline_errors(code: LocalEnvironment) -> None:
    tool = OutlineTool()
    assert tool.run({}, code).is_error
    assert "unsupported" in tool.run({"path": ".gitignore"}, code).output
    assert tool.run({"path": "missing.py"}, code).is_error
    assert tool.run({"path": "/etc/passwd"}, code).is_error
