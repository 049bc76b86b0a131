"""One shell session over separate `bash -c` calls, as `docker exec` users expect: each command
starts where the last one left off (exported variables and the working directory), so the Harbor
and local-container environments wrap commands the same way."""

from __future__ import annotations

import shlex

_MARK = "__CLOVER_CWD__"


def wrap_command(command: str, workdir: str, root: str, state: str) -> str:
    """A script that restores the saved exports, enters `workdir` (else `root`), runs `command` with
    stderr merged, then saves the exports to `state` and prints the final directory after a marker."""
    state_q = shlex.quote(state)
    return "\n".join(
        [
            "exec 2>&1",
            f"[ -f {state_q} ] && . {state_q} >/dev/null 2>&1",
            f"cd {shlex.quote(workdir)} 2>/dev/null || cd {shlex.quote(root)} 2>/dev/null",
            f'trap \'__rc=$?; export -p > {state_q} 2>/dev/null; printf "\\n{_MARK}%s\\n" "$PWD"; exit $__rc\' EXIT',
            command,
        ]
    )


def split_cwd(output: str) -> tuple[str, str | None]:
    """The command's own output and the directory it ended in (None when the marker is missing)."""
    head, sep, tail = output.rpartition(f"\n{_MARK}")
    if not sep:
        return output, None
    return head, (tail.strip().splitlines()[0] if tail.strip() else None)
