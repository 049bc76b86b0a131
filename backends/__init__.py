"""Model backends: OpenAI-compatible HTTP, scripted replay, and the local Clover model.

Nothing heavy (openai, torch) is imported here at module import time: `clover --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

from clover.core.model_protocol import BackendSettings, Model
from clover.core.stops import ModelError


def make_model(settings: BackendSettings) -> Model:
    """The backend `settings.model` / `settings.base_url` ask for; a ModelError says what is wrong."""
    spec = settings.model
    if spec.startswith("scripted:"):
        from clover.backends.scripted import ScriptedModel

        return ScriptedModel(spec[len("scripted:") :])
    if settings.base_url:
        from clover.backends.openai_compat import OpenAICompatModel

        return OpenAICompatModel(settings)
    if spec == "embedded" or Path(spec).expanduser().is_dir():
        try:
            from clover.backends.local import LocalCloverModel
        except ImportError as exc:  # the optional [local] extra; our own modules are always there
            missing = getattr(exc, "name", None) or ""
            if missing.split(".")[0] not in ("torch", "numpy"):
                raise
            raise ModelError(
                f"the local Clover model needs {missing}: pip install 'clover-cli[local]'"
            ) from None
        from clover.backends.local_settings import LocalSettings

        return LocalCloverModel(LocalSettings.of(settings))  # the local decoder's own knobs
    raise ModelError(
        f"model {spec!r} is not a checkpoint directory; for a model on an OpenAI-compatible server "
        "pass --base-url URL (or set OPENAI_BASE_URL)"
    )


__all__ = ["make_model"]
