"""How each server of backends/server_errors.py's table answers a request that does not fit: the
status and the whole body, in the server's own shape, for tests/fakeserver.py to send exactly so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clover.backends.server_errors import OVERFLOWS, OverflowForm

Answer = tuple[int, dict[str, Any]]


def _openai(
    message: str, code: str | None = "context_length_exceeded", param: str | None = "messages"
) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def _vllm(message: str) -> dict:  # vLLM 0.10+: ErrorResponse under "error"
    return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}


def _flat(message: str) -> dict:  # SGLang and older vLLM: the error at the top level
    return {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}


def _llamacpp(message: str, window: int, prompt: int) -> dict:
    return {
        "error": {
            "code": 400,
            "message": message,
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt,
            "n_ctx": window,
        }
    }


def answer_for(form: OverflowForm) -> Callable[[int, int, int], Answer | None]:
    """`overflow(window, prompt, asked)` for FakeChatServer: None when the request fits, as the
    server decides it (llama.cpp counts the prompt only; vLLM's 0.10+ check the prompt and max_tokens)."""
    index = OVERFLOWS.index(form)

    def overflow(window: int, prompt: int, asked: int) -> Answer | None:
        total = prompt + asked
        if index == 2:  # vLLM 0.10+: the prompt fits, max_tokens does not
            if prompt >= window:
                message = OVERFLOWS[3].example.replace("4096", str(window)).replace("5000", str(prompt))
                return 400, _vllm(message)
            if total <= window:
                return None
            return 400, _vllm(
                f"'max_tokens' or 'max_completion_tokens' is too large: {asked}. This model's maximum context "
                f"length is {window} tokens and your request has {prompt} input tokens ({asked} > {window} - "
                f"{prompt})."
            )
        if prompt <= window:
            return None
        if index == 0:
            return 400, _llamacpp(
                f"request ({prompt} tokens) exceeds the available context size ({window} tokens), try increasing it",
                window,
                prompt,
            )
        if index == 1:
            return 400, {"error": {"code": 400, "message": form.example, "type": "exceed_context_size_error"}}
        if index == 3:
            return 400, _vllm(OVERFLOWS[3].example.replace("4096", str(window)).replace("5000", str(prompt)))
        if index == 4:
            return 400, _vllm(
                f"The decoder prompt (length {prompt}) is longer than the maximum model length of {window}. "
                "Make sure that `max_model_len` is no smaller than the number of text tokens."
            )
        if index == 5:  # llama-cpp-python's formatter, vLLM before 0.10, LM Studio
            return 400, _openai(
                f"This model's maximum context length is {window} tokens. However, you requested {total} "
                f"tokens ({prompt} in the messages, {asked} in the completion). Please reduce the length of "
                "the messages or completion."
            )
        if index == 6:
            return 400, _flat(
                f"The input ({prompt} tokens) is longer than the model's context length ({window} tokens)."
            )
        if index == 7:
            return 400, _flat(
                f"Requested token count exceeds the model's maximum context length of {window} tokens. You "
                f"requested a total of {total} tokens: {prompt} tokens from the input messages and {asked} "
                "tokens for the completion. Please reduce the number of tokens in the input messages or the "
                "completion to fit within the limit."
            )
        if index == 8:  # Ollama's OpenAI-compatible endpoint
            return 400, _openai(
                f"prompt too long; exceeded max context length by {prompt - window} tokens", None, None
            )
        if index == 9:
            return 400, _openai(
                f"This model's maximum context length is {window} tokens. However, your messages resulted "
                f"in {prompt} tokens. Please reduce the length of the messages."
            )
        return 400, _openai(form.example, "context_length_exceeded", "input")

    return overflow


__all__ = ["answer_for"]
