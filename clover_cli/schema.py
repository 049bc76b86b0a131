"""A small JSON-schema check for tool arguments: enough to give the model a precise error."""

from __future__ import annotations

from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def check_arguments(schema: dict[str, Any], args: Any) -> str | None:
    """None when `args` fits `schema` (object with properties/required), else what is wrong."""
    if not isinstance(args, dict):
        return f"arguments must be a JSON object, got {type(args).__name__}"
    props: dict[str, Any] = schema.get("properties", {})
    missing = [name for name in schema.get("required", []) if name not in args]
    if missing:
        return (
            "missing required parameter" + ("s " if len(missing) > 1 else " ") + ", ".join(map(repr, missing))
        )
    if schema.get("additionalProperties", False) is False:
        unknown = [name for name in args if name not in props]
        if unknown:
            return "unknown parameter" + ("s " if len(unknown) > 1 else " ") + ", ".join(map(repr, unknown))
    for name, value in args.items():
        spec = props.get(name, {})
        wanted = spec.get("type")
        if wanted is None:
            continue
        wanted_list = wanted if isinstance(wanted, list) else [wanted]
        if value is None and "null" in wanted_list:
            continue
        ok = any(_fits(value, w) for w in wanted_list)
        if not ok:
            return f"parameter {name!r} must be {' or '.join(wanted_list)}, got {type(value).__name__}"
        if "enum" in spec and value not in spec["enum"]:
            return f"parameter {name!r} must be one of {spec['enum']}, got {value!r}"
    return None


def _fits(value: Any, wanted: str) -> bool:
    if wanted in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES.get(wanted, (object,)))
