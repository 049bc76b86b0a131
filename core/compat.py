"""Python-version differences, each handled once here (requires-python is >= 3.10).

`tomllib` joined the standard library in 3.11; on 3.10 the same parser is the `tomli` package
(pyproject's dependency for that version only)."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["tomllib"]
