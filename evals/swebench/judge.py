"""What the local grader can and cannot judge on this machine, and why.

Some tests cannot run here: they reach the network (httpbin.org, redirects, DNS), or they skip
themselves (too few CPUs, a missing optional tool). Every FAIL_TO_PASS and PASS_TO_PASS test passed
in the official image under the gold patch, so one that skips here, or fails for want of the
network, says something about this machine, not about the patch. Such tests are found in the
pytest summary (`-rA`) and the failure sections, and listed with the reason, never silently. They
are never graded around: a verdict stands only where they cannot change it (a test that ran here
fails: unresolved); otherwise the instance is "cannot judge here: <test>: <reason>"
(`judge_without`). Setup failures are told apart the same way: install (with pip's full message),
environment, or a bug in the grader itself.
"""

from __future__ import annotations

import re
import subprocess
from typing import Any

# A failure message that says the test needed the network.
NETWORK = re.compile(
    r"ConnectionError|ConnectTimeout|NewConnectionError|Max retries exceeded|Failed to establish a new connection|"
    r"Name or service not known|Temporary failure in name resolution|nodename nor servname|getaddrinfo failed|"
    r"Network is unreachable|No route to host|urlopen error|ProxyError|gaierror|Could not resolve host",
    re.IGNORECASE,
)
CPU = re.compile(r"\bcpus?\b|cpu_count|\bcores?\b|processors|multiprocessing|parallel", re.IGNORECASE)
_SKIP_LINE = re.compile(r"^SKIPPED \[\d+\] (?P<where>\S+?)(?::\d+)?:? (?P<reason>.*)$")
_FAIL_LINE = re.compile(r"^(?:FAILED|ERROR) (?P<test>\S+) - (?P<message>.*)$")
_FAIL_ID = re.compile(r"^(?:FAILED|ERROR) (?P<test>\S+)\s*$")
_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")


class InstallError(RuntimeError):
    """A dependency or install step failed; `detail` is pip's whole error message."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


def pip_error(output: str) -> str:
    """pip's error message in full: from its first error line to the end (else the last 40 lines)."""
    lines = output.rstrip().splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^\s*(ERROR:|error:|× |╰─>|Traceback)", line):
            return "\n".join(lines[i:])
    return "\n".join(lines[-40:])


def error_kind(exc: BaseException) -> str:
    """install | environment (the machine or the data) | grader (a bug in this code)."""
    from clover.evals.swebench.local_spec import SpecError
    from clover.evals.swebench.workspace import WorkspaceError

    if isinstance(exc, InstallError):
        return "install"
    if isinstance(exc, (SpecError, WorkspaceError, subprocess.SubprocessError, TimeoutError, OSError)):
        return "environment"
    return "grader"


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """Without terminal colours (sphinx's tox.ini runs pytest with --color yes)."""
    return _ANSI.sub("", text)


def failure_messages(log: str) -> dict[str, str]:
    """{test id: message} of the failed tests: the last `E ...` line of each failure section
    (`____ Class.test_name ____`; the summary line is cut to the terminal's width), else the
    short summary's `FAILED id - message`."""
    log = strip_ansi(log)
    out: dict[str, str] = {}
    failed = []
    for line in log.splitlines():
        m = _FAIL_LINE.match(line) or _FAIL_ID.match(line)
        if m:
            failed.append(m.group("test"))
            if m.groupdict().get("message"):
                out[m.group("test")] = m.group("message").strip()
    sections = _failure_sections(log)
    for test in failed:
        parts = test.split("::")[1:]
        detail = sections.get(".".join(parts)) or sections.get(parts[-1] if parts else "")
        if detail:
            out[test] = detail
    return out


def _failure_sections(log: str) -> dict[str, str]:
    """{section title: its error lines} for pytest's `____ title ____` failure sections."""
    out: dict[str, str] = {}
    for title, lines in _section_lines(log).items():
        errors = [line[1:].strip() for line in lines if line.startswith("E  ")]
        if errors:
            out[title] = " | ".join(reversed(errors[-3:]))
    return out


def _section_lines(log: str) -> dict[str, list[str]]:
    """{section title: its lines} (the first section of a title; captured output included)."""
    out: dict[str, list[str]] = {}
    title, lines = None, []
    for line in log.splitlines():
        header = _SECTION.match(line)
        if header or line.startswith("=" * 10):
            if title is not None:
                out.setdefault(title, lines)
            title, lines = (header.group(1) if header else None), []
        elif title is not None:
            lines.append(line)
    if title is not None:
        out.setdefault(title, lines)
    return out


def network_evidence(log: str, test: str) -> str:
    """A line of the failed test's section (its traceback or captured output) saying it needed
    the network: sphinx's latex test fails an assert because `Could not fetch remote image`."""
    sections = _section_lines(strip_ansi(log))
    parts = test.split("::")[1:]
    lines = sections.get(".".join(parts)) or sections.get(parts[-1] if parts else "") or []
    return next((line.strip() for line in lines if NETWORK.search(line)), "")


def skip_reasons(log: str) -> list[tuple[str, str]]:
    """(where, reason) per `SKIPPED [n] path:line: reason` line; `where` is a file or a test id."""
    return [
        (m.group("where"), m.group("reason").strip())
        for line in strip_ansi(log).splitlines()
        if (m := _SKIP_LINE.match(line))
    ]


def why_excluded(reason: str, *, network: bool) -> str:
    if network:
        return f"needs the network: {reason[:200]}"
    kind = "too few CPUs here" if CPU.search(reason) else "skipped here"
    return f"{kind}: {reason[:200]}"


def unrunnable_tests(log: str, judged: list[str], status_map: dict[str, str]) -> dict[str, str]:
    """The judged tests that did not run for a reason of this machine: {test id: reason}.

    - skipped (by id, with or without a reason; or absent from the log while its file reports a
      skip),
    - failed with a network error in its message, traceback or captured output."""
    failures = failure_messages(log)
    skips = skip_reasons(log)
    out: dict[str, str] = {}
    for test in judged:
        status = status_map.get(test)
        if status in ("FAILED", "ERROR") and NETWORK.search(failures.get(test, "")):
            out[test] = why_excluded(failures[test], network=True)
            continue
        if status in ("FAILED", "ERROR") and (evidence := network_evidence(log, test)):
            out[test] = why_excluded(evidence, network=True)
            continue
        if status == "SKIPPED" or status is None:
            path = test.split("::", 1)[0]
            reasons = [r for where, r in skips if where in (test, path)]
            if reasons:
                out[test] = why_excluded(reasons[0], network=bool(NETWORK.search(reasons[0])))
            elif status == "SKIPPED":  # it ran in the official image; here it did not, reason unknown
                out[test] = "skipped here: the log gives no reason"
    return out


_NO_MODULE = re.compile(
    r"No module named '([\w.]+)'|could not import '([\w.]+)'|ModuleNotFoundError: ([\w.]+)"
)


def missing_package_tests(
    log: str, judged: list[str], status_map: dict[str, str], missing: dict[str, str]
) -> dict[str, str]:
    """The judged tests that failed or skipped for want of a package the environment could not
    have (`missing`: {normalized name: why}, e.g. a conda-only entry of environment.yml)."""
    if not missing:
        return {}
    names = {}
    for name, why in missing.items():
        origin = why.split(":", 1)[0].strip().split("=")[0].split(" ")[0]
        for alias in (name, origin):
            names[re.sub(r"[-_.]+", "-", alias).lower()] = (name, why)
    messages = failure_messages(log)
    skips = skip_reasons(log)
    out: dict[str, str] = {}
    for test in judged:
        status = status_map.get(test)
        if status == "PASSED" or status == "XFAIL":
            continue
        path = test.split("::", 1)[0]
        texts = [messages.get(test, ""), *(r for where, r in skips if where in (test, path))]
        for text in texts:
            for m in _NO_MODULE.finditer(text):
                module = next(g for g in m.groups() if g).split(".")[0]
                hit = names.get(re.sub(r"[-_.]+", "-", module).lower())
                if hit:
                    out[test] = f"needs the package {hit[0]}, which pip cannot install here ({hit[1]})"
                    break
            if test in out:
                break
    return out


def judge_without(
    report: dict[str, Any],
    excluded: dict[str, str],
    gold: dict[str, Any],
    status_map: dict[str, str],
    eval_type: Any,
) -> None:
    """The verdict, given the judged tests that cannot run here (`excluded`: {test: why}).

    A verdict stands only where the excluded tests cannot change it: a kept test that fails makes
    the instance unresolved whatever they would do. Where every kept test passes, the excluded ones
    decide, so the instance cannot be judged here: `resolved` is None, `verdict` "cannot judge",
    and `cannot_judge` names the first deciding test and why it cannot run."""
    from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS
    from swebench.harness.grading import get_eval_tests_report

    report["verdict"] = "resolved" if report["resolved"] else "unresolved"
    if not excluded:
        return
    kept = {
        **gold,
        FAIL_TO_PASS: [t for t in gold[FAIL_TO_PASS] if t not in excluded],
        PASS_TO_PASS: [t for t in gold[PASS_TO_PASS] if t not in excluded],
    }
    report["excluded_tests"] = dict(sorted(excluded.items()))
    tests = get_eval_tests_report(status_map, kept, eval_type=eval_type)
    report["tests_status"] = tests
    failing = [*tests[FAIL_TO_PASS]["failure"], *tests[PASS_TO_PASS]["failure"]]
    if failing:  # a failure among the tests that ran: no excluded test can make it resolve
        report["resolved"], report["verdict"] = False, "unresolved"
        return
    deciding = [t for t in (*gold[FAIL_TO_PASS], *gold[PASS_TO_PASS]) if t in excluded]
    first = deciding[0]
    more = f" (and {len(deciding) - 1} more test(s) that cannot run here)" if len(deciding) > 1 else ""
    report["resolved"], report["verdict"] = None, "cannot judge"
    report["cannot_judge"] = f"cannot judge here: {first}: {excluded[first]}{more}"
    report["cannot_judge_kind"] = _kind_of(excluded[first])


def _kind_of(reason: str) -> str:
    for prefix, kind in (
        ("needs the network", "network"),
        ("too few CPUs", "cpu"),
        ("needs the package", "package"),
        ("needs the system package", "system-package"),
    ):
        if reason.startswith(prefix):
            return kind
    return "skipped"


def cannot_judge(report: dict[str, Any]) -> str:
    """Why this one report cannot be trusted as a verdict here ('' when it can)."""
    if report.get("error"):
        kind = report.get("error_kind", "environment")
        label = {"install": "install failed", "grader": "grader bug", "environment": "environment error"}[
            kind
        ]
        return f"{label}: {report['error']}"
    return str(report.get("cannot_judge", ""))
