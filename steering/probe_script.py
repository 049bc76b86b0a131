"""Run an issue's checks against candidate one-line edits. Standard library only: it runs as
`python3 -c SOURCE SPEC` in the agent's environment (the repository's own interpreter, any
Python 3.6+), so it is plain, old-style Python.

SPEC is JSON: {"root", "paths" (sys.path entries), "timeout" (s per candidate), "checks": [{setup, probe,
kind, text}], "candidates": [null | [path, old, new]], "tests": [test files], "test_timeout", "test_all",
"only_if_failing", "budget"}. null is the file as it is (put it first). Each candidate runs in a forked child:
the edited module is compiled from memory (nothing is written, no bytecode cached), its output goes nowhere,
and a child that overruns its time or memory is killed. Where `tests` are given, each candidate that passes a
check the file fails also runs them with pytest, in a second child, and so does the file as it is (once): a
fix must not break what passed before. With `test_all`, every candidate runs the tests; with
`only_if_failing`, every candidate is skipped when the file as it is fails no check. Past `budget` seconds the
rest are skipped too.

Prints one JSON line: for each candidate, {"checks": one verdict per check ("pass", "fail",
"setup" (the setup itself failed), "timeout", "crash" or "skipped"), "failed": the test ids that
failed, or null (not run, or pytest could not run them)}.
"""

import ast
import importlib.abc
import importlib.machinery
import json
import math
import os
import select
import signal
import sys
import time

MEMORY = 1 << 30  # bytes of address space a child may use


def _finder(edits):
    """A meta-path finder: modules whose file is edited are compiled from the edited text."""

    class Loader(importlib.machinery.SourceFileLoader):
        def get_code(self, fullname):
            path = os.path.realpath(self.path)
            if path in edits:
                return compile(edits[path], self.path, "exec", dont_inherit=True)
            return super().get_code(fullname)

        def get_source(self, fullname):
            return edits.get(os.path.realpath(self.path)) or super().get_source(fullname)

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.origin and os.path.realpath(spec.origin) in edits:
                spec.loader = Loader(name, spec.origin)
            return spec

    return Finder()


def _same(value, expected):
    try:
        if value == expected:
            return True
    except Exception:
        return False
    numbers = (int, float)
    if isinstance(value, numbers) and isinstance(expected, numbers) and not isinstance(value, bool):
        return math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-9)
    return False


def _verdict(check):
    namespace = {"__name__": "__clover_probe__"}
    try:
        for stmt in check["setup"]:
            exec(compile(stmt, "<issue>", "exec"), namespace)
    except BaseException:
        return "setup"
    try:
        value = eval(compile(check["probe"], "<issue>", "eval"), namespace)
    except BaseException as exc:
        if check["kind"] == "raises":
            names = [c.__name__ for c in type(exc).__mro__]
            return "pass" if check["text"] in names else "fail"
        return "fail"
    if check["kind"] == "no_error":
        return "pass"
    if check["kind"] == "raises":
        return "fail"
    text = check["text"]
    try:
        expected = ast.literal_eval(text)
    except Exception:
        return "pass" if text in (repr(value), str(value)) else "fail"
    return "pass" if _same(value, expected) else "fail"


def _failed_tests(spec):
    """The ids of the tests that fail (None: pytest is missing or could not run them)."""
    try:
        import pytest
    except ImportError:
        return None
    failed = []

    class Collect:
        def pytest_runtest_logreport(self, report):
            if report.failed:
                failed.append(report.nodeid)

        def pytest_collectreport(self, report):
            if report.failed:
                failed.append(report.nodeid or "<collection>")

    args = ["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--rootdir", spec["root"], *spec["tests"]]
    code = pytest.main(args, plugins=[Collect()])
    return sorted(set(failed)) if int(code) in (0, 1, 5) else None  # 5: no tests collected


def _warm_pytest():
    """pytest and its plugins imported once, before the children fork (a plugin scan costs about a
    second; a forked run after it a tenth): a collection of an empty directory, output discarded."""
    import tempfile

    import pytest

    empty = tempfile.mkdtemp()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        pytest.main(["-q", "-p", "no:cacheprovider", "--collect-only", "--rootdir", empty, empty])
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.rmdir(empty)


def _child(spec, edits, write_fd, phase):
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    except (ImportError, ValueError, OSError):
        pass
    sys.dont_write_bytecode = True
    sys.path[:0] = spec["paths"]
    sys.meta_path.insert(0, _finder(edits))
    os.chdir(spec["root"])
    if phase == "checks":
        signal.setitimer(signal.ITIMER_REAL, spec["timeout"])  # SIGALRM ends the child: "timeout"
        out = {"checks": [_verdict(check) for check in spec["checks"]]}
    else:
        signal.setitimer(signal.ITIMER_REAL, spec["test_timeout"])
        out = {"failed": _failed_tests(spec)}
    os.write(write_fd, json.dumps(out).encode())
    os._exit(0)


def _run_one(spec, edits, phase):
    """One forked child: {"checks": [...]} or {"failed": [...] | None}."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            _child(spec, edits, write_fd, phase)
        finally:
            os._exit(1)
    os.close(write_fd)
    limit = spec["timeout"] if phase == "checks" else spec["test_timeout"]
    data, ready = b"", True
    while ready:
        ready, _, _ = select.select([read_fd], [], [], limit + 5)
        if not ready:
            break
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        data += chunk
    timed_out = not ready
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(read_fd)
    bad = (
        "timeout"
        if timed_out or (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM)
        else "crash"
    )
    try:
        return json.loads(data.decode())
    except ValueError:
        return {"checks": [bad] * len(spec["checks"])} if phase == "checks" else {"failed": None}


def main(argv):
    spec = json.loads(argv[1])
    # the user's own interpreter may carry pytest plugins that write files (pytest-benchmark's
    # .benchmarks/): none is loaded, as the grader runs tests (evals/grading.py)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    deadline = time.monotonic() + spec.get("budget", 1e9)
    n = len(spec["checks"])
    tests = bool(spec.get("tests"))
    texts = {}
    results = []
    failing = []  # the checks the file as it is fails
    base_failed = "unknown"  # the tests failing with the file as it is, run when first needed
    done = False
    for candidate in spec["candidates"]:
        if done or (results and time.monotonic() > deadline):  # not needed, or no time left
            results.append({"checks": ["skipped"] * n, "failed": None})
            continue
        edits = {}
        if candidate is not None:
            path, old, new = candidate
            real = os.path.realpath(os.path.join(spec["root"], path))
            if real not in texts:
                with open(real, encoding="utf-8") as f:
                    texts[real] = f.read()
            if texts[real].count(old) != 1:
                results.append({"checks": ["setup"] * n, "failed": None})
                continue
            edits[real] = texts[real].replace(old, new, 1)
        row = _run_one(spec, edits, "checks")
        row["failed"] = None
        if candidate is None:
            failing = [i for i, v in enumerate(row["checks"]) if v in ("fail", "timeout", "crash")]
            done = bool(spec.get("only_if_failing") and not failing)
        elif tests and (spec.get("test_all") or any(row["checks"][i] == "pass" for i in failing)):
            if base_failed == "unknown":
                try:
                    _warm_pytest()
                    base_failed = _run_one(spec, {}, "tests")["failed"]
                except ImportError:
                    tests, base_failed = False, None
                results[0]["failed"] = base_failed
            if tests:
                row["failed"] = _run_one(spec, edits, "tests")["failed"]
        results.append(row)
    sys.stdout.write(json.dumps(results) + "\n")


if __name__ == "__main__":
    main(sys.argv)
