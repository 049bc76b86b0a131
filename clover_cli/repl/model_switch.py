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

from clover.core.protocols import Model
from clover.runner import build_model
from clover.settings import Settings

if TYPE_CHECKING:
    from clover.repl.app import ChatApp
    from clover.repl.keys import EscWatch


def is_local(name: str) -> bool:
    return name == "embedded" or name.startswith("scripted:") or Path(name).expanduser().is_dir()


def switch_model(app: ChatApp, name: str) -> bool:
    current = app.model_name()
    if is_local(name):
        settings = dataclasses.replace(app.settings, model=name, base_url=None)
    elif app.server_url:
        settings = dataclasses.replace(app.settings, model=name, base_url=app.server_url)
    else:
        return _refuse(
            app,
            name,
            "it is not 'embedded', a checkpoint directory or scripted:FILE, and this "
            "session has no server (--base-url) to ask for it",
            current,
        )
    try:
        model = load_model(app, settings)
    except Exception as exc:  # a bad name must not end the chat
        return _refuse(app, name, str(exc), current)
    if settings.base_url:
        served = _served(model)
        if served is None:
            return _refuse(
                app,
                name,
                f"the server at {settings.base_url} does not list its models "
                "(GET /v1/models), so the name cannot be checked",
                current,
            )
        if name not in served:
            shown = ", ".join(served[:8]) + (", …" if len(served) > 8 else "")
            app.renderer.error(f"cannot switch to {name}: the server at {settings.base_url} serves {shown}")
            return False
    _install(app, model, settings)
    where = f"served by {settings.base_url}" if settings.base_url else "local"
    app.renderer.note(f"model: {app.model_name()} ({where})")
    return True


def _install(app: ChatApp, model: Model, settings: Settings) -> None:
    from clover.repl.resume import backend_of, described

    if any(m.get("role") == "user" for m in app.agent.messages) and not app.history_by:
        app.history_by = described(backend_of(app))  # the turns so far are the previous model's
    app.model.inner = model
    app.settings = settings
    app.server_url = settings.base_url or app.server_url
    app.context_tokens = 0  # the new model's count starts with its next turn
    _bind(app, model)


def use_backend(app: ChatApp, model_name: str, base_url: str | None) -> bool:
    """Go on with a resumed session on the backend that wrote it; False (said) when it cannot load."""
    settings = dataclasses.replace(app.settings, model=model_name, base_url=base_url)
    try:
        model = load_model(app, settings)
    except Exception as exc:  # an unreachable server, a moved checkpoint: said, nothing resumed
        app.renderer.error(f"cannot continue on {model_name}: {exc}")
        return False
    _install(app, model, settings)  # before the session is restored: no turns of this chat yet
    where = f"served by {base_url}" if base_url else "local"
    app.renderer.note(f"model: {app.model_name()} ({where}), the session's own")
    return True


class ClosedWhileLoading(Exception):
    """Ctrl-D while the model loaded: the chat ends before it began."""


def _refuse(app: ChatApp, name: str, why: str, current: str) -> bool:
    app.renderer.error(f"cannot switch to {name}: {why}; the model stays {current}")
    return False


def load_model(app: ChatApp, settings: Settings) -> Model:
    """Build the model; a local one loads under a spinner that says so (seconds), watching the keys:
    Ctrl-D raises ClosedWhileLoading, Ctrl-C or Esc KeyboardInterrupt."""
    if settings.base_url or settings.model.startswith("scripted:") or not app.tty:
        return build_model(settings)
    started = time.monotonic()
    keys = getattr(app, "keys", None)
    try:
        if keys is not None:
            keys.start()
        with app.console.status(f"loading {settings.model}… (Ctrl-D leaves)", spinner="dots"):
            model = _load_aside(settings, keys)
    except KeyboardInterrupt:
        if keys is not None and keys.exit_requested:
            raise ClosedWhileLoading() from None
        raise
    finally:
        if keys is not None:
            keys.stop()
            app.input.type_ahead(keys.take_typed())  # typed while it loaded: at the prompt
    app.renderer.info(f"model loaded in {time.monotonic() - started:.1f}s")
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
    lister = getattr(model, "served_models", None)
    return (lister() or None) if lister is not None else None


def _bind(app: ChatApp, model: Model) -> None:
    """A local decoder grounds paths and edits in this workspace, as runner.build_agent does."""
    model.bind_workspace(app.env)
