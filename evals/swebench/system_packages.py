"""System packages the official image installs and the local grader does not.

Some specs install Debian packages before the repository (sphinx: `apt-get install -y graphviz`,
pylint: `libenchant-2-dev hunspell-en-us`). The grader never runs those: it would change the
user's machine (and needs root), and the official image's packages are Ubuntu's of its date, not
this machine's. So it checks whether each package is here (dpkg's own answer), logs the ones that
are missing, and names one as the cause when a judged test skips or fails saying it needs it
(sphinx-doc__sphinx-10614: `SKIPPED ... graphviz "dot" is not available`). Installing the package
(`apt-get install graphviz`) and grading again makes such an instance judgeable."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess

from clover.evals.swebench.judge import failure_messages, skip_reasons

_SEGMENT = re.compile(r"&&|\|\||;|\|")
# Name parts that say which build of a library it is, not what it is: `libenchant-2-dev` is enchant.
_BUILD_PARTS = re.compile(r"^(?:lib)?|(?:[-.]?\d[\w.]*)?(?:-(?:dev|bin|common|utils|tools|data|doc))*$")


def apt_packages(command: str) -> list[str]:
    """The packages an `apt-get install` / `apt install` in a shell command line installs
    (options, `VAR=value` prefixes and the other commands of the line are not packages)."""
    out: list[str] = []
    for segment in _SEGMENT.split(command):
        try:
            words = shlex.split(segment)
        except ValueError:
            continue
        while words and re.match(r"^\w+=", words[0]):  # DEBIAN_FRONTEND=noninteractive
            words = words[1:]
        if len(words) < 2 or words[0] not in ("apt-get", "apt"):
            continue
        args = [w for w in words[1:] if not w.startswith("-")]
        if args[:1] == ["install"]:
            out.extend(w.split("=", 1)[0] for w in args[1:])
    return list(dict.fromkeys(out))


def spec_system_packages(commands: list[str]) -> list[str]:
    return list(dict.fromkeys(p for cmd in commands for p in apt_packages(cmd)))


def installed(package: str) -> bool | None:
    """Whether dpkg has `package` installed; None where there is no dpkg to ask."""
    if not shutil.which("dpkg-query"):
        return None
    try:
        proc = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.returncode == 0 and proc.stdout.strip().endswith(" installed")


def missing_system_packages(packages: list[str]) -> tuple[list[str], list[str]]:
    """([packages not installed here], [packages that could not be checked])."""
    states = {package: installed(package) for package in packages}
    return [p for p, s in states.items() if s is False], [p for p, s in states.items() if s is None]


def package_words(package: str) -> list[str]:
    """The words a test's message uses for a Debian package: its name, and the name without its
    build parts (`libenchant-2-dev`: enchant, `hunspell-en-us`: hunspell); short stems are dropped."""
    core = _BUILD_PARTS.sub("", package.lower())
    words = [package.lower(), core, core.split("-")[0]]
    return [w for w in dict.fromkeys(words) if len(w) >= 4]


def system_package_tests(
    log: str, judged: list[str], status_map: dict[str, str], missing: list[str]
) -> dict[str, str]:
    """The judged tests that skipped or failed saying they need a missing system package:
    {test id: reason}."""
    if not missing:
        return {}
    patterns = {
        package: re.compile(
            r"\b(?:" + "|".join(map(re.escape, package_words(package))) + r")\b", re.IGNORECASE
        )
        for package in missing
        if package_words(package)
    }
    messages = failure_messages(log)
    skips = skip_reasons(log)
    out: dict[str, str] = {}
    for test in judged:
        if status_map.get(test) in ("PASSED", "XFAIL"):
            continue
        path = test.split("::", 1)[0]
        texts = [messages.get(test, ""), *(r for where, r in skips if where in (test, path))]
        for package, pattern in patterns.items():
            evidence = next((t for t in texts if pattern.search(t)), None)
            if evidence is not None:
                out[test] = (
                    f"needs the system package {package}, which the official image installs and "
                    f"this machine has not (apt-get install {package}; the grader changes no system "
                    f"packages): {evidence[:160]}"
                )
                break
    return out
