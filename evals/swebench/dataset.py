"""SWE-bench instances: load (Hugging Face hub or a local .json/.jsonl/.parquet file), validate,
select, and turn into predictions (a run's preds.json, or the gold / empty calibration sets)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# Short names for the usual datasets on the Hugging Face hub.
ALIASES = {
    "verified": "princeton-nlp/SWE-bench_Verified",
    "lite": "princeton-nlp/SWE-bench_Lite",
    "full": "princeton-nlp/SWE-bench",
}
REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "test_patch")
LIST_FIELDS = ("FAIL_TO_PASS", "PASS_TO_PASS")

Instance = dict[str, Any]


class DatasetError(ValueError):
    """Bad dataset or selection; the message is one line for the user."""


def hub_name(dataset: str) -> str:
    return ALIASES.get(dataset.lower(), dataset)


def load_instances(dataset: str, split: str = "test") -> list[Instance]:
    """Rows from a local file, or from the hub when `dataset` is not an existing path."""
    path = Path(dataset).expanduser()
    if path.exists():
        rows = _read_file(path)
    elif dataset.lower() in ALIASES or (
        dataset.count("/") == 1 and not dataset.endswith((".json", ".jsonl", ".parquet"))
    ):
        rows = _read_hub(hub_name(dataset), split)
    else:
        raise DatasetError(f"dataset {dataset!r}: no such file (and not a Hugging Face dataset id)")
    instances = [validate(row, f"{dataset} row {i + 1}") for i, row in enumerate(rows)]
    seen: set[str] = set()
    for inst in instances:
        if inst["instance_id"] in seen:
            raise DatasetError(f"{dataset}: duplicate instance_id {inst['instance_id']!r}")
        seen.add(inst["instance_id"])
    return instances


def _read_file(path: Path) -> list[dict[str, Any]]:
    try:
        if path.suffix == ".parquet":
            try:
                import pyarrow.parquet as pq
            except ImportError:
                raise DatasetError(
                    "reading .parquet needs pyarrow: pip install 'clover-cli[swebench]'"
                ) from None
            return pq.read_table(path).to_pylist()
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        data = json.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: invalid JSON ({exc})") from None
    if isinstance(data, dict):  # keyed by instance_id, or {"instances": [...]}
        data = data.get("instances", list(data.values()))
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a list of instances")
    return data


def _read_hub(name: str, split: str) -> list[dict[str, Any]]:
    try:
        import datasets  # optional extra; imported only here
    except ImportError:
        raise DatasetError(
            f"loading {name!r} from the hub needs `datasets`: pip install 'clover-cli[swebench]', "
            "or pass --dataset PATH to a local .json/.jsonl/.parquet file"
        ) from None
    try:
        return [dict(row) for row in datasets.load_dataset(name, split=split)]
    except Exception as exc:  # offline, unknown id, bad split: all one line for the user
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatasetError(
            f"could not load {name!r} (split {split}) from the Hugging Face hub: {first}; "
            "offline? pass --dataset PATH to a local .json/.jsonl/.parquet file"
        ) from None


def validate(row: Any, where: str) -> Instance:
    """A normalised copy: FAIL_TO_PASS / PASS_TO_PASS as lists, every other field a string."""
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected an object")
    inst: Instance = dict(row)
    for key in REQUIRED:
        if not isinstance(inst.get(key), str) or not inst[key]:
            raise DatasetError(f"{where}: missing or empty field {key!r}")
    for key in LIST_FIELDS:
        value = inst.get(key, [])
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else []
            except json.JSONDecodeError:
                raise DatasetError(f"{where}: {key} is not a JSON list") from None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise DatasetError(f"{where}: {key} must be a list of test ids")
        inst[key] = value
    if not re.fullmatch(r"[0-9a-fA-F]{7,40}", inst["base_commit"]):
        raise DatasetError(f"{where}: base_commit {inst['base_commit']!r} is not a commit hash")
    if "diff --git" not in inst["test_patch"]:
        raise DatasetError(f"{where}: test_patch is not a git diff")
    for key in ("version", "patch", "environment_setup_commit", "hints_text", "created_at"):
        if inst.get(key) is not None and not isinstance(inst[key], str):
            inst[key] = str(inst[key])
    inst.setdefault("version", "")
    inst.setdefault("patch", "")
    inst.setdefault("hints_text", "")
    return inst


def select(
    instances: list[Instance],
    ids: list[str] | None = None,
    slice_spec: str | None = None,
    filter_regex: str | None = None,
) -> list[Instance]:
    """Keep `ids` (in dataset order), then those whose id matches `filter_regex`, then `a:b`."""
    out = instances
    if ids:
        known = {i["instance_id"] for i in instances}
        missing = [i for i in ids if i not in known]
        if missing:
            raise DatasetError(f"unknown instance id(s): {', '.join(missing[:5])}")
        wanted = set(ids)
        out = [i for i in out if i["instance_id"] in wanted]
    if filter_regex:
        try:
            pattern = re.compile(filter_regex)
        except re.error as exc:
            raise DatasetError(f"--filter {filter_regex!r}: {exc}") from None
        out = [i for i in out if pattern.search(i["instance_id"])]
    if slice_spec:
        out = out[parse_slice(slice_spec)]
    return out


def parse_slice(spec: str) -> slice:
    parts = spec.split(":")
    if len(parts) not in (1, 2):
        raise DatasetError(f"--slice {spec!r}: expected a:b")
    try:
        nums = [int(p) if p.strip() else None for p in parts]
    except ValueError:
        raise DatasetError(f"--slice {spec!r}: expected integers like 0:10") from None
    if len(nums) == 1:
        return slice(nums[0], None if nums[0] is None else nums[0] + 1)
    return slice(nums[0], nums[1])


def modified_files(patch: str) -> list[str]:
    """Paths a diff touches (its b/ side, or a/ for deletions)."""
    files: list[str] = []
    for match in re.finditer(r"^diff --git a/(\S+) b/(\S+)$", patch, flags=re.M):
        path = match.group(2)
        if path not in files:
            files.append(path)
    return files


# --------------------------------------------------------------------------- predictions


def load_predictions(spec: str, instances: list[Instance]) -> dict[str, dict[str, Any]]:
    """`gold`, `empty`, or a preds.json (dict by id or list) / preds.jsonl file."""
    if spec in ("gold", "empty"):
        return {
            i["instance_id"]: {
                "instance_id": i["instance_id"],
                "model_name_or_path": spec,
                "model_patch": i.get("patch", "") if spec == "gold" else "",
            }
            for i in instances
        }
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / "preds.json"
    if not path.is_file():
        raise DatasetError(f"predictions {spec!r}: no such file (or use gold / empty)")
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            data = json.loads(text)
            rows = list(data.values()) if isinstance(data, dict) else data
    except (OSError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: {exc}") from None
    preds: dict[str, dict[str, Any]] = {}
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            raise DatasetError(f"{path}: every prediction needs an instance_id")
        if row.get("model_patch") is not None and not isinstance(row["model_patch"], str):
            raise DatasetError(f"{path}: model_patch of {row['instance_id']} is not a string")
        preds[row["instance_id"]] = row
    return preds
