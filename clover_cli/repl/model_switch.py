"""`/model NAME`: switch for real, or refuse in one line and keep the model. `embedded`, a checkpoint
directory and `scripted:FILE` are local models (a session started with --base-url leaves its server
for them; the server's names work again afterwards); any other name must be one the session's
server lists at /v1/models. A name nothing can check is refused, not accepted silently. After a
switch the earlier turns are another model's: a compaction says so. A local model loads under a
spinner, and Ctrl-D (or Ctrl-C) while it loads leaves at once."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from clover.core.model_protocol import Model, ServedModel
from clover.runner import build_model
from clover.settings import Settings

if TYPE_CHECKING:
    from clover.repl.keys import EscWatch
    from clover.repl.state import ChatState
    from clover.repl.ui import ChatUI


def is_local(name: str) -> bool:
    return name == "embedded" or name.startswith("scripted:") or Path(name).expanduser().is_dir()


def switch_model(state: ChatState, ui: ChatUI, name: str) -> bool:
    current = state.model_name()
    if is_local(name):
        settings = dataclasses.replace(state.settings, model=name, base_url=None)
    elif state.server_url:
        settings = dataclasses.replace(state.settings, model=name, base_url=state.server_url)
    else:
        return _refuse(
            ui,
            name,
            "it is not 'embedded', a checkpoint directory or scripted:FILE, and this "
            "session has no server (--base-url) to ask for it",
            current,
        )
    try:
        model = load_model(ui, settings)
    except Exception as exc:  # a bad name must not end the chat
        return _refuse(ui, name, str(exc), current)
    if settings.base_url:
        served = _served(model)
        if served is None:
            return _refuse(
                ui,
                name,
                f"the server at {settings.base_url} does not list its models "
                "(GET /v1/models), so the name cannot be checked",
                current,
            )
        if name not in served:
            shown = ", ".join(served[:8]) + (", …" if len(served) > 8 else "")
            ui.renderer.error(f"cannot switch to {name}: the server at {settings.base_url} serves {shown}")
            return False
    _install(state, model, settings)
    where = f"served by {settings.base_url}" if settings.base_url else "local"
    ui.renderer.note(f"model: {state.model_name()} ({where})")
    return True


def _install(state: ChatState, model: Model, settings: Settings) -> None:
    from clover.repl.resume import backend_of, described

    if state.started() and not state.history_by:
        state.history_by = described(backend_of(state))  # the turns so far are the previous model's
    state.model.inner = model
    state.settings = settings
    state.server_url = settings.base_url or state.server_url
    state.context_tokens = 0  # the new model's count starts with its next turn
    _bind(state, model)


def use_backend(state: ChatState, ui: ChatUI, model_name: str, base_url: str | None) -> bool:
    """Go on with a resumed session on the backend that wrote it; False (said) when it cannot load."""
    settings = dataclasses.replace(state.settings, model=model_name, base_url=base_url)
    try:
        model = load_model(ui, settings)
    except Exception as exc:  # an unreachable server, a moved checkpoint: said, nothing resumed
        ui.renderer.error(f"cannot continue on {model_name}: {exc}")
        return False
    _install(state, model, settings)  # before the session is restored: no turns of this chat yet
    where = f"served by {base_url}" if base_url else "local"
    ui.renderer.note(f"model: {state.model_name()} ({where}), the session's own")
    return True


class ClosedWhileLoading(Exception):
    """Ctrl-D while the model loaded: the chat ends before it began."""


def _refuse(ui: ChatUI, name: str, why: str, current: str) -> bool:
    ui.renderer.error(f"cannot switch to {name}: {why}; the model stays {current}")
    return False


def load_model(ui: ChatUI, settings: Settings) -> Model:
    """Build the model; a local one loads under a spinner that says so (seconds), watching the keys:
    Ctrl-D raises ClosedWhileLoading, Ctrl-C or Esc KeyboardInterrupt."""
    if settings.base_url or settings.model.startswith("scripted:") or not ui.tty:
        return build_model(settings)
    started = time.monotonic()
    keys = ui.keys
    try:
        if keys is not None:
            keys.start()
        with ui.console.status(f"loading {settings.model}… (Ctrl-D leaves)", spinner="dots"):
            model = _load_aside(settings, keys)
    except KeyboardInterrupt:
        if keys is not None and keys.exit_requested:
            raise ClosedWhileLoading() from None
        raise
    finally:
        if keys is not None:
            keys.stop()
            ui.input.type_ahead(keys.take_typed())  # typed while it loaded: at the prompt
    ui.renderer.info(f"model loaded in {time.monotonic() - started:.1f}s")
    return model


def _load_aside(settings: Settings, keys: EscWatch | None) -> Model:
    """Build the model in a thread of its own while this one waits for it or for a key: a load
    blocked in a system call (a slow disk, a network mount) cannot hold Ctrl-D, Ctrl-C or Esc back.
    A load left behind is a daemon thread: it ends with the process."""
    done: dict[str, object] = {}

    def load() -> None:
        try:
            done["model"] = build_model(settings)
        except BaseException as exc:  # handed to the waiting thread, which raises it
            done["error"] = exc

    worker = threading.Thread(target=load, name="clover-load", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.05)
        if keys is not None and keys.exit_requested:
            raise KeyboardInterrupt
    if "error" in done:
        raise done["error"]  # type: ignore[misc]
    return done["model"]  # type: ignore[return-value]


def _served(model: Model) -> list[str] | None:
    return (model.served_models() or None) if isinstance(model, ServedModel) else None


def _bind(state: ChatState, model: Model) -> None:
    """A local decoder grounds paths and edits in this workspace, as runner.build_agent does."""
    model.bind_workspace(state.env)
