"""The package layering as a checked contract: every module's imports (parsed with ast, lazy ones
included) point down the stack, never up.

    core  <-  tools  <-  clover (the CLI)  <-  evals  <-  benchmarks, tests
    kernels  <-  model  <-  clover (the CLI; lazily where torch is needed, see test_cli.py)
    kernels  <-  model  <-  engines (serving-engine plugins)  <-  clover, evals

core/ holds the protocols and imports nothing of ours; tools/ knows nothing of models or the CLI;
model/ knows nothing of tools, evals or the CLI (nor core: it needs none of the protocols); evals/
sits on top of the product. Nothing in the product imports benchmarks/ or tests/. One exception,
stated: the CLI's command front ends register evals' commands (`clover eval ...`, `clover bench`)
with imports inside the command functions, so the evals load only when such a command runs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# folder -> (installed import name, layer)
FOLDERS = {
    "core": ("clover.core", "core"),
    "tools": ("clover.tools", "tools"),
    "kernels": ("clover.kernels", "kernels"),
    "model": ("clover.model", "model"),
    "clover_cli": ("clover", "cli"),
    "evals": ("clover.evals", "evals"),
    "engines": ("clover.engines", "engines"),
    "benchmarks": ("benchmarks", "benchmarks"),
    "tests": ("tests", "tests"),
}
ALLOWED = {
    "core": {"core"},
    "tools": {"core", "tools"},
    "kernels": {"kernels"},
    "model": {"kernels", "model"},
    "engines": {"kernels", "model", "engines"},
    "cli": {"core", "tools", "model", "engines", "cli"},
    "evals": {"core", "tools", "kernels", "model", "engines", "cli", "evals"},
    "benchmarks": {"core", "tools", "kernels", "model", "engines", "cli", "evals", "benchmarks"},
    "tests": set(FOLDERS[f][1] for f in FOLDERS),
}
# (module file, layer) pairs allowed only as an import inside a function: command registration.
LAZY_ONLY = {("clover_cli/main.py", "evals"), ("clover_cli/bench.py", "evals")}


def layer_of(name: str) -> str | None:
    """The layer an absolute import name belongs to; None for the standard library and third parties."""
    for import_name, layer in sorted(FOLDERS.values(), key=lambda v: -len(v[0])):
        if name == import_name or name.startswith(import_name + "."):
            return layer
    return None


def imports(source: str, module: str, is_package: bool) -> list[tuple[str, int, bool]]:
    """(absolute name, line, lazy) for every import in `source`; relative ones resolved against `module`."""
    tree = ast.parse(source)
    lazy_nodes = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                  for n in ast.walk(f)}  # fmt: skip
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                parent = parts if is_package else parts[:-1]
                parent = parent[: len(parent) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            names = [base]
        else:
            continue
        out += [(n, node.lineno, id(node) in lazy_nodes) for n in names]
    return out


def violations(rel_path: str, source: str) -> list[str]:
    folder = rel_path.split("/")[0]
    import_name, layer = FOLDERS[folder]
    inner = Path(rel_path).with_suffix("").parts[1:]
    is_package = inner[-1:] == ("__init__",)
    module = ".".join([import_name, *(inner[:-1] if is_package else inner)])
    bad = []
    for name, line, lazy in imports(source, module, is_package):
        target = layer_of(name)
        if target is None or target in ALLOWED[layer]:
            continue
        if lazy and (rel_path, target) in LAZY_ONLY:
            continue
        bad.append(f"{rel_path}:{line}: {layer} imports {name} ({target})")
    return bad


def _modules() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def test_every_installed_package_has_a_layer() -> None:
    # A new top-level package (pyproject's package-dir) must be placed in the stack, not escape it.
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]["package-dir"]
    assert set(mapping.values()) <= set(FOLDERS), f"give these folders a layer: {set(mapping.values()) - set(FOLDERS)}"
    assert all(FOLDERS[folder][0] == name for name, folder in mapping.items())


def test_every_import_points_down_the_stack() -> None:
    bad = [v for p in _modules() for v in violations(p.relative_to(ROOT).as_posix(), p.read_text("utf-8"))]
    assert not bad, "upward imports:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "path, source",
    [
        ("core/protocols.py", "from clover.tools.files import View"),
        ("tools/files.py", "def f():\n    from clover.runner import build_model"),
        ("tools/files.py", "from ..model import chat"),  # relative, resolves to clover.model
        ("model/data.py", "from clover.evals.synthfix.oracle import render_trajectory"),
        ("model/chat.py", "import clover.core.protocols"),
        ("kernels/dispatch.py", "from clover.model.config import ModelConfig"),
        ("model/load.py", "def f():\n    from clover.engines.weights import clover_to_qwen3_next"),
        ("engines/vllm_model.py", "from clover.tools.files import View"),
        ("clover_cli/bench.py", "from clover.evals.bench.run import run_bench"),  # top level: not lazy
        ("clover_cli/agent.py", "def f():\n    from clover.evals.bench import run"),
        ("clover_cli/runner.py", "import benchmarks.decode"),
        ("evals/bench/run.py", "from tests.fakeserver import FakeServer"),
        ("benchmarks/decode.py", "from tests.tiny_checkpoint import make"),
    ],
)
def test_an_upward_import_is_caught(path: str, source: str) -> None:
    assert violations(path, source), f"{path}: {source!r} passed the check"


def test_allowed_imports_pass() -> None:
    assert not violations("clover_cli/bench.py", "def f():\n    from clover.evals.bench.run import run_bench")
    assert not violations("clover_cli/backends/local.py", "from clover.model.chat import render_messages")
    assert not violations("tools/files.py", "from . import textio\nfrom clover.core.protocols import Tool")
    assert not violations("model/layers/gdn.py", "from ...kernels import dispatch\nimport torch")
