"""Synthetic bug-fix tasks in SWE-bench format: small real git repos with one injected bug each."""

from clover.evals.synthfix.generator import generate, write_jsonl

__all__ = ["generate", "write_jsonl"]
