"""What an OpenAI-compatible server says of itself besides answering: the models it serves, the
context a request has there, and whether its chat template takes tools. Every place servers put it:

- GET /v1/models: each model's `max_model_len` (vLLM), `context_length` / `context_window` (LM Studio,
  OpenRouter), `meta.n_ctx` (llama.cpp); the served names (the one model, when only one is served);
- GET /props (llama.cpp): `default_generation_settings.n_ctx`, the context of one slot (what one request
  gets: n_ctx over the parallel slots), and `chat_template_caps.supports_tools`;
- GET /api/ps (Ollama): the `context_length` a loaded model runs with;
- POST /api/show (Ollama): the model's `num_ctx` parameter.

Each probe is one short request (a server without the route answers 404, and the next is tried);
where none says, the context is unknown, and the caller says so instead of assuming one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import httpx

PROBE_TIMEOUT = 5.0
# What servers call a model's context in GET /v1/models.
WINDOW_FIELDS = ("max_model_len", "context_length", "context_window", "max_context_length")


@dataclass
class ServerInfo:
    models: list[str] | None = None  # None: GET /v1/models did not answer
    window: int | None = None
    window_source: str = ""  # where the window was read, e.g. "GET /props"
    supports_tools: bool | None = None  # None: the server does not say


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class Prober:
    def __init__(self, base_url: str, api_key: str | None, timeout: float = PROBE_TIMEOUT) -> None:
        self.base_url = base_url.rstrip("/")
        self.root = re.sub(r"/v1$", "", self.base_url)  # llama.cpp and Ollama serve these at the root
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(timeout=timeout, headers=headers)

    def _json(self, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
        try:
            response = self.http.request(method, url, json=body)
            return response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):  # down, no such route, not JSON: this place says nothing
            return None

    def listed(self) -> list[dict[str, Any]] | None:
        data = self._json("GET", f"{self.base_url}/models")
        entries = data.get("data") if isinstance(data, dict) else None
        return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else None

    def info(self, model: str | None) -> ServerInfo:
        """Everything the server says, for `model` (None: the name is not known yet)."""
        listed = self.listed()
        info = ServerInfo(models=None if listed is None else [str(e.get("id", "")) for e in listed])
        mine = [e for e in listed or [] if e.get("id") == model] or (
            listed if listed and len(listed) == 1 else []
        )
        props = self._json("GET", f"{self.root}/props")
        if isinstance(props, dict):
            caps = props.get("chat_template_caps")
            if isinstance(caps, dict) and isinstance(caps.get("supports_tools"), bool):
                info.supports_tools = caps["supports_tools"]
        for source, window in self._windows(mine, props, model):
            if window is not None:
                info.window, info.window_source = window, source
                break
        return info

    def _windows(self, mine: list[dict[str, Any]], props: Any, model: str | None) -> Any:
        """(where, window) in order of trust; later places are asked only when earlier ones said nothing."""
        for entry in mine:
            yield (
                "GET /v1/models",
                next((_positive(entry.get(k)) for k in WINDOW_FIELDS if _positive(entry.get(k))), None),
            )
        if isinstance(props, dict):
            settings = props.get("default_generation_settings")
            slot = settings.get("n_ctx") if isinstance(settings, dict) else None
            yield "GET /props", _positive(slot) or _positive(props.get("n_ctx"))
        for entry in mine:
            meta = entry.get("meta")
            yield "GET /v1/models", _positive(meta.get("n_ctx")) if isinstance(meta, dict) else None
        if model:
            yield "GET /api/ps", self._ollama_running(model)
            yield "POST /api/show", self._ollama_num_ctx(model)

    def _ollama_running(self, model: str) -> int | None:
        data = self._json("GET", f"{self.root}/api/ps")
        for entry in (data.get("models") if isinstance(data, dict) else None) or []:
            if isinstance(entry, dict) and model in (entry.get("name"), entry.get("model")):
                return _positive(entry.get("context_length"))
        return None

    def _ollama_num_ctx(self, model: str) -> int | None:
        data = self._json("POST", f"{self.root}/api/show", {"model": model})
        params = data.get("parameters") if isinstance(data, dict) else None
        m = re.search(r"^num_ctx\s+(\d+)", params, re.M) if isinstance(params, str) else None
        return int(m.group(1)) if m else None

    def close(self) -> None:
        self.http.close()


def probe(base_url: str, api_key: str | None, model: str | None) -> ServerInfo:
    prober = Prober(base_url, api_key)
    try:
        return prober.info(model)
    finally:
        prober.close()


__all__ = ["PROBE_TIMEOUT", "Prober", "ServerInfo", "WINDOW_FIELDS", "probe"]
