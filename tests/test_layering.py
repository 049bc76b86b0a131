"""The package layering as a checked contract: every module's imports (parsed with ast, lazy ones
included) point down the stack, never up.

    core  <-  tools  <-  clover (the CLI)  <-  evals  <-  benchmarks, tests
    kernels  <-  model  <-  steering  <-  backends  <-  clover (the CLI; lazily where torch is needed)
    core, tools  <-  steering;  core, tools, engines  <-  backends
    kernels  <-  model  <-  engines (serving-engine plugins)  <-  clover, evals

core/ holds the protocols and imports nothing of ours; tools/ knows nothing of models or the CLI;
model/ knows nothing of tools, evals or the CLI (nor core: it needs none of the protocols);
steering/ (how the local model is steered) knows nothing of the backends or the CLI; backends/ (the
Model protocol's implementations) know nothing of the CLI: what they read of the settings is core's
BackendSettings protocol. evals/
sits on top of the product. Nothing in the product imports benchmarks/ or tests/. One exception,
stated: the CLI's command front ends register evals' commands (`clover eval ...`, `clover bench`)
with imports inside the command functions, so the evals load only when such a command runs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from clover.core.compat import tomllib

ROOT = Path(__file__).resolve().parents[1]
# folder -> (installed import name, layer)
FOLDERS = {
    "core": ("clover.core", "core"),
    "tools": ("clover.tools", "tools"),
    "kernels": ("clover.kernels", "kernels"),
    "model": ("clover.model", "model"),
    "steering": ("clover.steering", "steering"),
    "backends": ("clover.backends", "backends"),
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
    "steering": {"core", "tools", "kernels", "model", "steering"},
    "backends": {"core", "tools", "kernels", "model", "steering", "engines", "backends"},
    "cli": {"core", "tools", "model", "engines", "steering", "backends", "cli"},
    "evals": {"core", "tools", "kernels", "model", "engines", "steering", "backends", "cli", "evals"},
    "benchmarks": {
        "core",
        "tools",
        "kernels",
        "model",
        "engines",
        "steering",
        "backends",
        "cli",
        "evals",
        "benchmarks",
    },
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
    lazy_nodes = {
        id(n)
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
        for n in ast.walk(f)
    }
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
        elif name := _imported_by_call(node):  # importlib.import_module("clover.x"), __import__("clover.x")
            names = [_resolve(name, module, is_package)]
        else:
            continue
        out += [(n, node.lineno, id(node) in lazy_nodes) for n in names]
    return out


def _imported_by_call(node: ast.AST) -> str | None:
    """The module an `import_module`/`__import__` call names with a literal string, or an f-string's
    literal head (`f"clover.kernels.{kind}"` names clover.kernels)."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called not in ("import_module", "__import__"):
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value).rstrip(".") or None
    return None


def _resolve(name: str, module: str, is_package: bool) -> str:
    """A relative name (`.x`, as import_module takes with package=__name__) made absolute."""
    level = len(name) - len(name.lstrip("."))
    if not level:
        return name
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: len(parts) - (level - 1)]
    return ".".join([*parts, name[level:]] if name[level:] else parts)


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
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]["package-dir"]
    assert set(mapping.values()) <= set(FOLDERS), (
        f"give these folders a layer: {set(mapping.values()) - set(FOLDERS)}"
    )
    assert all(FOLDERS[folder][0] == name for name, folder in mapping.items())


def test_every_import_points_down_the_stack() -> None:
    bad = [v for p in _modules() for v in violations(p.relative_to(ROOT).as_posix(), p.read_text("utf-8"))]
    assert not bad, "upward imports:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "path, source",
    [
        ("core/tool_protocol.py", "from clover.tools.files import View"),
        ("tools/files.py", "def f():\n    from clover.runner import build_model"),
        ("tools/files.py", "from ..model import chat"),  # relative, resolves to clover.model
        ("model/training/data.py", "from clover.evals.synthfix.oracle import render_trajectory"),
        ("model/text/chat.py", "import clover.core.tool_protocol"),
        ("kernels/dispatch.py", "from clover.model.config import ModelConfig"),
        ("model/loading/load.py", "def f():\n    from clover.engines.weights import clover_to_qwen3_next"),
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
    assert not violations("backends/local.py", "from clover.model.text.chat import render_messages")
    assert not violations(
        "backends/local.py", "def f():\n    from clover.steering.grounding import Grounding"
    )
    assert not violations("steering/grounding.py", "from clover.tools.outline import symbols")
    assert not violations("clover_cli/runner.py", "from clover.backends import make_model")
    assert not violations(
        "tools/files.py", "from . import textio\nfrom clover.core.tool_protocol import Tool"
    )
    assert not violations("model/layers/gdn.py", "from ...kernels import dispatch\nimport torch")


# The contract of the steering package: it steers the model and chooses edits; which backend
# drives it and how the CLI configures it are above it. Lazy imports and import_module strings count.
@pytest.mark.parametrize(
    "source",
    [
        "from clover.backends.local import LocalCloverModel",
        "def f():\n    from clover.backends import make_model",
        "from ..backends import local",  # relative, resolves to clover.backends
        "import clover.settings",
        "from clover import cli_common",
        "def f():\n    import importlib\n    return importlib.import_module('clover.settings')",
        "mod = __import__('clover.backends.scripted')",
        "from importlib import import_module\nm = import_module(f'clover.backends.{name}')",
        "from clover.evals.grading import grade",
    ],
)
def test_steering_may_not_import_backends_or_the_cli(source: str) -> None:
    assert violations("steering/grounding.py", source), source


def test_steering_imports_nothing_of_backends_or_the_cli() -> None:
    modules = sorted((ROOT / "steering").rglob("*.py"))
    assert {p.stem for p in modules} >= {
        "tool_grammar",
        "grounding",
        "answer_spans",
        "repairs",
        "edit_choice",
    }
    found: dict[str, list[str]] = {}
    for p in modules:
        rel = p.relative_to(ROOT).as_posix()
        for name, line, _lazy in imports(
            p.read_text("utf-8"), "clover.steering." + p.stem, p.stem == "__init__"
        ):
            layer = layer_of(name)
            if layer is not None:
                found.setdefault(layer, []).append(f"{rel}:{line}: {name}")
    assert found.get("steering"), "the scan saw none of steering's own imports"
    assert not set(found) - ALLOWED["steering"], {
        k: v for k, v in found.items() if k not in ALLOWED["steering"]
    }
    assert not {"backends", "cli", "evals", "engines", "benchmarks", "tests"} & ALLOWED["steering"]


def test_backends_import_nothing_of_the_cli() -> None:
    bad = [
        v
        for p in sorted((ROOT / "backends").rglob("*.py"))
        for v in violations(p.relative_to(ROOT).as_posix(), p.read_text("utf-8"))
    ]
    assert not bad, bad
    assert "cli" not in ALLOWED["backends"]
