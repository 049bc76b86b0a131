"""Rich rendering of a chat: streamed thinking / answer / diffusion rounds in a transient live
region (with what the user types meanwhile), then the settled turn (thinking folded to one line,
answer as markdown), compact tool lines with head and tail of each result (`/show N` pages through
the whole output), every call the model made (malformed and refused ones too), diffs highlighted,
errors in red, a status line that fits the terminal's width."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.markup import escape
from rich.text import Text

from clover.core.model_protocol import AssistantTurn, StreamEvent, ToolCall
from clover.core.tool_protocol import ToolResult
from clover.repl.console import page
from clover.repl.diffusion_view import DiffusionView
from clover.repl.one_line import describe_call, fit_parts, fold_thinking
from clover.repl.outputs import StoredOutput, count_lines
from clover.repl.reflow import install_live
from clover.repl.toolview import clean, diff_view, edit_summary, split_exit, tail_lines
from clover.terminal_text import visible

RESULT_HEAD = 4  # a tool's output on screen: its first lines and its last (a test summary is last)
RESULT_TAIL = 4
DIFF_LINES = 40
TAIL_LINES = 5  # a running command's last lines under its spinner
STOP_KEYS = "Esc or Ctrl-C"
SPIN = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def _lines(count: int) -> str:
    return f"{count} line{'s' if count != 1 else ''}"


def stored_of(result: ToolResult) -> StoredOutput:
    """A result's output as kept when no store kept it (tests, replays): what the tool returned."""
    body, code = split_exit(result)
    if body.strip() == "(no output)" and code is not None:
        body = ""
    return StoredOutput(body, None, count_lines(body), code)


@dataclass
class Shown:
    call: ToolCall
    result: ToolResult
    output: StoredOutput


class Renderer:
    def __init__(self, console: Console, live: bool) -> None:
        self.console = console
        self.live_enabled = live and console.is_terminal
        self.running = ""
        self.results: list[Shown] = []
        self.last_thinking = ""
        self.typed: Callable[[], str] | None = None  # what the user typed ahead, shown under the spinner
        self._live: Live | None = None
        self._reset()

    def _reset(self) -> None:
        self.thinking = ""
        self.text = ""
        self.events = 0
        self.diffusion = DiffusionView()
        self.started = time.monotonic()
        self.thinking_done: float | None = None

    # ------------------------------------------------------------------ a model turn

    def begin_turn(self) -> None:
        self._reset()
        self._start_live(self._live_view)

    def begin_tool(self, call: ToolCall) -> None:
        """A transient spinner while a tool runs, with the last lines of a command's output."""
        started, label = time.monotonic(), describe_call(call, 60)
        self.running = ""

        def view() -> RenderableType:
            elapsed = time.monotonic() - started
            spin = SPIN[int(elapsed * 10) % len(SPIN)]
            line = Text(
                f"{spin} running {label} · {elapsed:.1f}s  ({STOP_KEYS} stops)",
                style="dim",
                no_wrap=True,
                overflow="ellipsis",
            )
            tail = tail_lines(self.running, TAIL_LINES, self.console.width - 6)
            return Group(*(Text("    " + t, style="dim") for t in tail), line, *self._typed_lines())

        self._start_live(view)

    def tool_output(self, text: str) -> None:
        """Output of the running command as it arrives (from the environment's reader thread)."""
        self.running = (self.running + text)[-8000:]

    def begin_progress(self, label: str) -> None:
        """A transient spinner with what is streamed meanwhile (e.g. a summary being written)."""
        self._reset()
        started = self.started

        def view() -> RenderableType:
            elapsed = time.monotonic() - started
            spin = SPIN[int(elapsed * 10) % len(SPIN)]
            streamed = visible(self.text or self.thinking).splitlines()[-2:]
            line = Text(
                f"{spin} {label} · {elapsed:.1f}s · ~{(len(self.text) + len(self.thinking)) // 4} tok"
                f"  ({STOP_KEYS} stops)",
                style="dim",
                no_wrap=True,
                overflow="ellipsis",
            )
            shown = [Text("\n".join(streamed)[-300:], style="dim italic")] if streamed else []
            return Group(*shown, line, *self._typed_lines())

        self._start_live(view)
        if not self.live_enabled:
            self.info(f"{label}…")

    def _start_live(self, view: Callable[[], RenderableType]) -> None:
        self.stop_live()
        if self.live_enabled:
            self._live = Live(
                console=self.console,
                transient=True,
                auto_refresh=True,
                refresh_per_second=10,
                get_renderable=view,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            install_live(self._live)  # erased by the rows it takes after the terminal narrows
            self._live.start()

    def _typed_lines(self) -> list[Text]:
        """What the user typed while the agent works: sent when the step ends (Enter ends a line)."""
        typed = self.typed() if self.typed is not None else ""
        if not typed:
            return []
        *done, current = typed.split("\n")
        width = max(self.console.width - 4, 10)
        lines = [Text(f"› {line}", style="bold", no_wrap=True, overflow="ellipsis") for line in done[-3:]]
        lines.append(Text(f"› {current[-width:]}▏", style="bold", no_wrap=True, overflow="ellipsis"))
        return [Text("queued (sent when this step ends):", style="dim"), *lines]

    def on_event(self, event: StreamEvent) -> None:
        if event.kind == "thinking":
            self.thinking += event.text
            self.events += 1
        elif event.kind == "text":
            if self.thinking and self.thinking_done is None:
                self.thinking_done = time.monotonic()
            self.text += event.text
            self.events += 1
        elif event.kind == "block_round":
            self.diffusion.update(event)

    def stop_live(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()

    def end_turn(self, turn: AssistantTurn | None) -> None:
        """Settle the turn on screen. `turn` is None when it was interrupted."""
        self.stop_live()
        thinking = turn.thinking if turn is not None else self.thinking
        if thinking.strip():
            end = self.thinking_done or time.monotonic()
            seconds = turn.seconds if turn is not None and not self.thinking_done else end - self.started
            self.last_thinking = thinking
            self.console.print(Text(fold_thinking(thinking, seconds, self.console.width - 30), style="dim"))
        if turn is None:
            if self.text.strip():
                self.console.print(Text(visible(self.text), style="dim"))
            return
        if turn.text.strip():
            self.answer(turn.text)
        if turn.stats.get("verified_edits"):  # the local decoder ran the example (reproduce.py)
            self.info(
                "  the edit was chosen by running the issue's example against candidate edits: it passes"
            )

    def answer(self, text: str) -> None:
        """The model's words: markdown on a terminal (links shown as text, not made clickable)."""
        text = visible(text)
        self.console.print(Markdown(text, hyperlinks=False) if self.console.is_terminal else Text(text))

    def _live_view(self) -> RenderableType:
        parts: list[RenderableType] = []
        elapsed = time.monotonic() - self.started
        if self.text:
            tail = "\n".join(visible(self.text).splitlines()[-12:])
            parts.append(Markdown(tail, hyperlinks=False))
        elif self.thinking:
            tail = visible(self.thinking).splitlines()[-3:]
            parts.append(Text("\n".join(tail)[-400:], style="dim italic"))
        if self.diffusion.active:
            parts.append(self.diffusion.render(self.console.width - 2))
        phase = "writing" if self.text else "thinking" if self.thinking else "working"
        spin = SPIN[int(elapsed * 10) % len(SPIN)]
        counts = f"~{(len(self.text) + len(self.thinking) + 3) // 4} tok"  # stream chunks are not tokens
        if self.diffusion.active:
            tokens = self.diffusion.filled
            rate = tokens / elapsed if elapsed > 0 else 0.0
            counts = f"{tokens} tok · {self.diffusion.rounds} rounds · {rate:.1f} tok/s"
        parts.append(
            Text(
                f"{spin} {phase} · {elapsed:.1f}s · {counts}  ({STOP_KEYS} stops)",
                style="dim",
                no_wrap=True,
                overflow="ellipsis",
            )
        )
        return Group(*parts, *self._typed_lines())

    # ------------------------------------------------------------------ tools

    def tool_call(self, call: ToolCall, prefix: str = "⏺ ") -> None:
        shown = describe_call(call) if call.name else f"?({visible((call.raw or '').strip()[:60])})"
        self.console.print(
            Text.assemble((prefix, "cyan"), (shown, "bold")), overflow="ellipsis", no_wrap=True
        )

    def tool_denied(self, call: ToolCall, reason: str) -> int:
        """A refused call, numbered like every other (`/show N` counts each ⏺ line)."""
        first = reason.splitlines()[0] if reason else "refused"
        if reason.startswith("The user declined this tool call and said: "):
            first = "you said: " + first.removeprefix("The user declined this tool call and said: ")
        result = ToolResult(f"not run: {reason or 'refused'}", is_error=True, data={"denied": True})
        self.results.append(Shown(call, result, stored_of(result)))
        self.console.print(Text(f"  ⎿ not run: {visible(first)}  [{len(self.results)}]", style="yellow"))
        return len(self.results)

    def call_not_run(self, call: ToolCall, result: ToolResult) -> int:
        """A call the agent answered without running it and without asking (malformed, held back by
        the decoder, a repeat): on screen like any other, with why."""
        self.stop_live()
        self.tool_call(call)
        self.results.append(Shown(call, result, stored_of(result)))
        reason = result.output.strip().splitlines()[0] if result.output.strip() else "not run"
        what = "malformed" if result.data.get("format_error") else "not run"
        self.console.print(
            Text(f"  ⎿ ✗ {what}: {visible(reason)}  [{len(self.results)}]", style="red"),
            overflow="ellipsis",
            no_wrap=True,
        )
        return len(self.results)

    def tool_result(
        self, call: ToolCall, result: ToolResult, diff_shown: bool = False, output: StoredOutput | None = None
    ) -> int:
        """`output`: the whole output as the chat kept it (default: what the tool returned)."""
        self.stop_live()
        output = output or stored_of(result)
        self.results.append(Shown(call, result, output))
        number = len(self.results)
        data = result.data if isinstance(result.data, dict) else {}
        mark = "✗" if result.is_error else "✓"
        diff = data.get("diff")
        if isinstance(diff, str) and diff.strip():
            path = str(data.get("path") or call.arguments.get("path") or "?")
            shown = edit_summary(visible(path), diff)
            self.console.print(Text(f"  ⎿ {mark} {shown}  [{number}]", style="green"))
            if diff_shown:  # the approval showed it a moment ago
                return number
            diff_lines = diff.splitlines()
            self.diff("\n".join(diff_lines[:DIFF_LINES]))
            if len(diff_lines) > DIFF_LINES:
                self._more(len(diff_lines) - DIFF_LINES, number)
            return number
        code = output.exit_code
        what = _lines(output.lines) if output.lines else "no output"
        failed = result.is_error or bool(code)
        if code is not None:
            what += f" · exit {code}"
        style = "red" if failed else "dim"
        self.console.print(
            Text(f"  ⎿ {'✗' if failed else mark} {what}  [{number}]", style="red" if failed else "green")
        )
        head, cut, tail = output.head_tail(RESULT_HEAD, RESULT_TAIL)
        for line in head:
            self.console.print(Text("    " + clean(line), style=style), overflow="ellipsis", no_wrap=True)
        if cut:
            self._more(cut, number)
        for line in tail:
            self.console.print(Text("    " + clean(line), style=style), overflow="ellipsis", no_wrap=True)
        return number

    def _more(self, count: int, number: int) -> None:
        self.console.print(
            Text(f"    … {count} more line{'s' if count != 1 else ''} (/show {number})", style="dim")
        )

    def show(self, number: int | None) -> None:
        """A result whole: on a terminal through the pager when it is taller than the screen."""
        if not self.results:
            self.info("no tool results yet")
            return
        if number is None:
            number = len(self.results)
        if not 1 <= number <= len(self.results):
            self.error(f"no result {number}; there are {len(self.results)}")
            return
        shown = self.results[number - 1]
        body = clean(shown.output.read()).rstrip("\n")
        code = shown.output.exit_code
        diff = shown.result.data.get("diff") if isinstance(shown.result.data, dict) else None
        title = f"[{number}] {describe_call(shown.call)} · {_lines(shown.output.lines)}"
        if code is not None:
            title += f" · exit {code}"
        if isinstance(diff, str) and diff.strip():
            body = clean(shown.result.output).rstrip("\n") + "\n" + visible(diff.rstrip("\n"))
        tall = body.count("\n") + 3 > self.console.size.height
        if self.console.is_terminal and tall and page(f"{title}\n{body}\n", self.console.file):
            self.info(f"[{number}]: all {_lines(shown.output.lines)} shown in the pager")
            return
        self.console.rule(escape(title))
        if isinstance(diff, str) and diff.strip():
            self.console.print(Text(clean(shown.result.output).rstrip("\n")), soft_wrap=True)
            self.diff(diff)
        else:
            self.console.print(Text(body), soft_wrap=True)

    def diff(self, diff: str) -> None:
        self.console.print(diff_view(diff, self.console.is_terminal), soft_wrap=not self.console.is_terminal)

    # ------------------------------------------------------------------ messages

    # Clover's messages carry foreign text (file names, a server's words): shown as text.

    def info(self, message: str) -> None:
        self.console.print(Text(visible(message), style="dim"))

    def note(self, message: str) -> None:
        self.console.print(Text(visible(message), style="cyan"))

    def warn(self, message: str) -> None:
        self.console.print(Text(visible(message), style="bold yellow"))

    def error(self, message: str) -> None:
        self.console.print(Text(visible(message), style="bold red"))

    def status(self, text: str) -> None:
        self.console.print(Text(visible(text), style="dim"), no_wrap=True, overflow="ellipsis")

    def status_line(self, parts: list[tuple[str, int]]) -> None:
        """One line whatever the width: lower-priority parts are dropped to fit."""
        width = self.console.width - 1 if self.console.is_terminal else 10_000
        line = fit_parts([(visible(text), rank) for text, rank in parts], width)
        self.console.print(Text(line, style="dim"), no_wrap=True, overflow="ellipsis")
