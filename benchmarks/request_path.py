"""The path of one request through the house: which of Clover's files it crosses, per layer, and
how often a call goes back up the layers (a lower layer calling a function of a higher one,
through a callback or a wrapper).

    python -m benchmarks.request_path             # a scripted model: one view, one bash, an answer
    python -m benchmarks.request_path --embedded  # the embedded model answering a question

It runs `clover -p` in this process, in a throwaway git repository with a throwaway home, under
`sys.setprofile`, and counts only Python calls into this repository's files (the bash command's
own process is not traced). Not a speed: the figures are counts, the same on every machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The stack, lowest first: a call from a layer into a higher one goes back up.
RANK = {
    "core": 0,
    "kernels": 0,
    "model": 1,
    "tools": 1,
    "engines": 2,
    "decoding": 2,
    "steering": 2,
    "backends": 3,
    "clover_cli": 4,
}


def layer_of(filename: str) -> str | None:
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    top = rel.parts[0] if rel.parts else ""
    return top if top in RANK else None


def workspace(home: Path) -> Path:
    repo = home / "project"
    repo.mkdir()
    (repo / "hello.py").write_text('def greet(name):\n    return f"hello {name}"\n\nprint(greet("world"))\n')
    env = {**os.environ, "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    for argv in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "start"]):
        subprocess.run(
            argv,
            cwd=repo,
            env={
                **env,
                "GIT_AUTHOR_NAME": "t",
                "GIT_AUTHOR_EMAIL": "t@t",
                "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@t",
            },
            check=True,
        )
    return repo


def script(home: Path) -> Path:
    turns = [
        {"text": "", "tool_calls": [{"name": "view", "arguments": {"path": "hello.py"}}]},
        {"text": "", "tool_calls": [{"name": "bash", "arguments": {"command": "python3 hello.py"}}]},
        {"text": "It prints `hello world`."},
    ]
    path = home / "turns.json"
    path.write_text(json.dumps(turns))
    return path


def trace(argv: list[str]) -> tuple[dict[str, set[str]], Counter]:
    files: dict[str, set[str]] = defaultdict(set)
    upward: Counter = Counter()

    def profile(frame, event, _arg):  # noqa: ANN001 - sys.setprofile's signature
        if event != "call" or frame.f_code.co_name == "<module>":
            return  # a module's own body runs at import: not part of the request
        callee = layer_of(frame.f_code.co_filename)
        if callee is None:
            return
        files[callee].add(str(Path(frame.f_code.co_filename).resolve().relative_to(ROOT)))
        caller = frame.f_back
        while caller is not None and (
            layer_of(caller.f_code.co_filename) is None or caller.f_code.co_name == "<module>"
        ):
            caller = caller.f_back  # through library frames (typer, threading) to our caller
        if caller is None:
            return
        below = layer_of(caller.f_code.co_filename)
        if below is not None and RANK[callee] > RANK[below]:
            upward[f"{below} -> {callee}"] += 1

    from clover.main import main

    sys.argv = ["clover", *argv]
    sys.setprofile(profile)
    import threading

    threading.setprofile(profile)
    try:
        main()
    except SystemExit:
        pass
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return files, upward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedded", action="store_true", help="the embedded model, not a script")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        repo = workspace(home)
        os.environ["HOME"] = str(home)
        os.environ.pop("XDG_STATE_HOME", None)
        os.environ.pop("XDG_CONFIG_HOME", None)
        os.chdir(repo)
        if args.embedded:
            argv = ["-p", "What does hello.py print?", "--model", "embedded", "--yes"]
        else:
            argv = ["-p", "What does hello.py print?", "--model", f"scripted:{script(home)}", "--yes"]
        files, upward = trace(argv)
    total = sum(len(v) for v in files.values())
    print(f"\nrequest: clover {' '.join(argv[:2])!r} ({'embedded' if args.embedded else 'scripted'} model)")
    print(f"files crossed: {total}")
    for layer in sorted(files, key=lambda k: RANK[k]):
        print(f"  {layer:11s} {len(files[layer]):3d}  {', '.join(sorted(files[layer]))}")
    print(f"calls back up the layers: {sum(upward.values())}")
    for edge, n in upward.most_common():
        print(f"  {edge:28s} {n}")


if __name__ == "__main__":
    main()
