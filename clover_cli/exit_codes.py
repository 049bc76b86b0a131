"""How a headless run ended, as one exit code: `clover fix` and `clover -p` decide it here, so the
same cause gives the same code in both. `--help` and the docs print HELP."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # ended normally (fix: with a change, or the model's explicit "No change needed")
    NOT_DONE = 1  # ended without a result: no change, malformed or repeated calls, a looping reply
    USAGE = 2  # bad usage or configuration: flags, files, config values, rules, the model choice
    REFUSED = 3  # tool calls were refused and nothing changed
    LIMIT = 4  # a limit ended the run: steps, time, tokens, an answer cut at max_tokens
    BACKEND = 5  # the model backend failed: server unreachable or erroring, key rejected, stream cut
    HUNG_UP = 129  # SIGHUP: the terminal went away (128 + the signal, as shells report it)
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
    TERMINATED = 143  # SIGTERM (128 + SIGTERM)


HELP = (
    "Exit codes: 0 done (fix: a change, or the model's answer starting 'No change needed'); "
    "1 ended without a result (fix: nothing changed); 2 bad usage or configuration; "
    "3 tool calls were refused and nothing changed; 4 a limit was hit (steps, time, tokens); "
    "5 the model backend failed (server unreachable, error, key rejected); 130 interrupted (Ctrl-C); "
    "143 terminated (SIGTERM); 129 hung up (SIGHUP)."
)

# A reply the backend flagged as incomplete (loop_guard.py's finish reasons) -> its code.
_TRUNCATED = {"length": ExitCode.LIMIT, "incomplete": ExitCode.BACKEND, "repetition": ExitCode.NOT_DONE}
_STOPPED = {
    "interrupted": ExitCode.INTERRUPTED,
    "terminated": ExitCode.TERMINATED,
    "hung_up": ExitCode.HUNG_UP,
    "model_error": ExitCode.BACKEND,
    "limits_exceeded": ExitCode.LIMIT,
    "format_error": ExitCode.NOT_DONE,
    "repeated_calls": ExitCode.NOT_DONE,
}


@dataclass(frozen=True)
class Outcome:
    code: ExitCode
    label: str  # one word for reports and json: fixed, no_change_needed, answered, refused, ...


def decide(
    exit_status: str,
    *,
    refused: int,
    changed: bool,
    needs_change: bool,
    no_change_answer: bool = False,
    cut: str = "",
    outside_competence: bool = False,
) -> Outcome:
    """The one rule. `exit_status`: the agent's (submitted, limits_exceeded, model_error, ...);
    `refused`: calls the permission gate refused; `changed`: the run changed the work tree (fix: its
    real diff; -p: a call that can change files ran); `needs_change`: the run's job is a change
    (`clover fix`); `cut`: the final reply's finish reason when it was incomplete;
    `outside_competence`: the model answered that the request is beyond it ("this needs a larger
    model", steering/competence.py) — no answer, unless it changed files first.

    Interrupts and backend failures come first (nothing the model did explains them). Then refusals:
    when something was refused and nothing changed, the refusals are why, even if the model then
    looped into a limit. A cut final reply is not an answer; but a fix's result is its change, so
    after a change a reply cut at the token limit is only labelled (the report comes from the diff,
    not the reply). A stream that broke is a backend failure, change or not."""
    if exit_status in ("interrupted", "terminated", "hung_up", "model_error"):
        return Outcome(_STOPPED[exit_status], exit_status)
    if refused and not changed:
        return Outcome(ExitCode.REFUSED, "refused")
    if exit_status != "submitted":
        return Outcome(_STOPPED.get(exit_status, ExitCode.NOT_DONE), exit_status)
    # A broken stream is the backend failing, whatever changed: the model may have been writing its
    # next call. A reply the server cut at max_tokens, or one stopped for repeating itself, is only
    # labelled after a fix's change (the change is the result, the report comes from the diff).
    if cut == "incomplete" or (cut and not (needs_change and changed)):
        return Outcome(_TRUNCATED.get(cut, ExitCode.NOT_DONE), "truncated")
    if outside_competence and not changed:
        return Outcome(ExitCode.NOT_DONE, "outside_competence")
    if not needs_change:
        return Outcome(ExitCode.OK, "answered")
    if changed:
        return Outcome(ExitCode.OK, "fixed")
    if no_change_answer:
        return Outcome(ExitCode.OK, "no_change_needed")
    return Outcome(ExitCode.NOT_DONE, "no_change")
