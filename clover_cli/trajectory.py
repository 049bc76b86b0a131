"""JSONL trajectory: one record per event, appended and flushed at once so a crash loses nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


def _redact(obj: Any) -> Any:
    from clover.tools.safety.redact import redact_obj  # the secrets are registered at run time (the API key)

    return redact_obj(obj)


class Trajectory:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")

    def append(self, record: dict[str, Any]) -> None:
        record = {"time": round(time.time(), 3), **record}
        line = json.dumps(_redact(record), ensure_ascii=False, default=str) + "\n"
        if self._fh.closed:  # a check after the run (the test guard's last run) is recorded too
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line)
            return
        self._fh.write(line)
        self._fh.flush()  # the OS has it: a crash of this process loses nothing

    def close(self) -> None:
        self._fh.close()

    @staticmethod
    def read(path: str | Path) -> list[dict[str, Any]]:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]
