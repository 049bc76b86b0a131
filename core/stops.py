"""The exceptions that end an agent's run, each naming why (`exit_status`), and the signal stop
raised where Ctrl-C's KeyboardInterrupt would be."""

from __future__ import annotations


class AgentStop(Exception):
    """Ends a run; `exit_status` names why."""

    exit_status = "error"


class Submitted(AgentStop):
    exit_status = "submitted"


class LimitsExceeded(AgentStop):
    exit_status = "limits_exceeded"


class FormatError(AgentStop):
    exit_status = "format_error"


class RepeatedCalls(AgentStop):
    exit_status = "repeated_calls"


class Interrupted(AgentStop):
    exit_status = "interrupted"


class ModelError(AgentStop):
    """The backend failed (unreachable server, bad key): `str(exc)` is one line for the user.
    `context_overflow`: the prompt did not fit the model's context (the chat compacts and retries)."""

    exit_status = "model_error"
    context_overflow = False


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C's KeyboardInterrupt would be, so a run it stops ends as
    an interrupted one does (the running command's processes killed, the step recorded, the result
    printed), then exits 128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_status(self) -> str:
        import signal

        return "hung_up" if self.signum == signal.SIGHUP else "terminated"

    def __str__(self) -> str:
        import signal

        return f"stopped by {signal.Signals(self.signum).name}"
