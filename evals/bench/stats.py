"""Per-task decode counters from an agent trajectory, per-decoder aggregates, and the report
(rich table, markdown) for evals/bench/run.py (`clover bench`). Torch-free."""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clover.tools.registry import default_tools

# How the agent words the tool results it returns for calls it could not run as written
# (clover_cli/call_checks.py, format_problem); a trajectory record may also carry "format_error".
FORMAT_ERROR_PREFIXES = ("Malformed tool call:", "Unknown tool ", "Invalid arguments for ")

DECODER_KEYS = (
    "decoder",
    "block_size",
    "threshold",
    "tasks",
    "resolved",
    "success_rate",
    "steps_mean",
    "turns",
    "generated_tokens",
    "forwards",
    "forwards_per_token",
    "tokens_per_forward",
    "tok_per_s",
    "median_seconds",
    "total_seconds",
    "malformed_tool_calls",
    "tool_calls",
    "exit_statuses",
    "grounded",
    "forced_tokens",
    "model_tokens_per_forward",
    "str_replace_misses",
    "missing_paths",
)


@dataclass(frozen=True)
class Decoder:
    block_size: int
    threshold: float
    grounded: bool = True  # tool values grounded in the workspace (the `grounded` setting)
    order: str = "any"  # the decode_order setting; B = 1 decodes the same either way

    @property
    def key(self) -> str:  # file-name safe
        if self.block_size > 1 and self.order == "verify":  # no threshold: a causal pass decides
            key = f"diffusion-b{self.block_size}-verify"
        else:
            key = "ar-b1" if self.block_size == 1 else f"diffusion-b{self.block_size}-t{self.threshold:g}"
            if self.block_size > 1 and self.order == "left":
                key += f"-{self.order}"
        return key if self.grounded else f"{key}-ungrounded"

    @property
    def name(self) -> str:
        if self.block_size > 1 and self.order == "verify":
            name = f"B={self.block_size} verify"
        else:
            name = "B=1 (AR)" if self.block_size == 1 else f"B={self.block_size} τ={self.threshold:g}"
            if self.block_size > 1 and self.order == "left":
                name += f" {self.order}"
        return name if self.grounded else f"{name} ungrounded"

    def describe(self) -> dict[str, Any]:
        return {
            "decoder": self.name,
            "decoder_key": self.key,
            "block_size": self.block_size,
            "threshold": self.threshold,
            "grounded": self.grounded,
            "order": self.order,
        }


def is_format_error(record: dict[str, Any]) -> bool:
    if record.get("format_error"):
        return True
    return bool(record.get("is_error")) and str(record.get("output", "")).startswith(FORMAT_ERROR_PREFIXES)


# What the file tools answer when old_str does not match exactly once, or a path does not exist
# (tools/files.py, tools/textio.py, tools/paths.py, tools/search.py)
_MISS = re.compile(r"old_str was not found|old_str occurs \d+ times")
_NO_PATH = re.compile(r"no such file|outside the workspace|cannot resolve", re.IGNORECASE)
FILE_TOOLS = {"view", "str_replace", "insert", "outline", "grep", "glob"}


EDIT_TOOLS = {t.name for t in default_tools() if t.kind == "edit"}
_NAME_REFUSAL = "neither defines nor imports"  # tools/files.py's refusal of an undefined name


def harm_counts(tools: list[dict[str, Any]]) -> dict[str, int]:
    """Edits of test files that went through, and edits refused for an undefined name."""
    from clover.tools.testrun import TEST_FILE

    done = [r for r in tools if r.get("name") in EDIT_TOOLS and not r.get("is_error")]
    return {
        "test_file_edits": sum(
            1 for r in done if TEST_FILE.search(str((r.get("arguments") or {}).get("path", "")))
        ),
        "name_refusals": sum(
            1 for r in tools if r.get("is_error") and _NAME_REFUSAL in str(r.get("output", ""))
        ),
    }


def value_errors(tools: list[dict[str, Any]]) -> dict[str, int]:
    """Tool results that grounding rules out: str_replace misses and paths that do not exist."""
    errors = [r for r in tools if r.get("is_error")]
    return {
        "str_replace_misses": sum(
            1 for r in errors if r.get("name") == "str_replace" and _MISS.search(str(r.get("output", "")))
        ),
        "missing_paths": sum(
            1 for r in errors if r.get("name") in FILE_TOOLS and _NO_PATH.search(str(r.get("output", "")))
        ),
    }


def trajectory_stats(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum one task's assistant turns. Decode time per turn is tokens / tok_per_s as the decoder
    measured it (prefill excluded), so the aggregate tok/s is total tokens / total decode time."""
    turns = [r for r in records if r.get("type") == "assistant"]
    tools = [r for r in records if r.get("type") == "tool"]
    tokens = forwards = forced = 0.0
    decode_s = prefill_s = 0.0
    for t in turns:
        n, st = float(t.get("completion_tokens") or 0), t.get("stats") or {}
        tokens += n
        forwards += float(st.get("forwards", 0.0))
        forced += float(st.get("grammar_tokens", 0.0))  # placed by the tool grammar without a forward
        prefill_s += float(st.get("prefill_seconds", 0.0))
        rate = float(st.get("tok_per_s", 0.0))
        decode_s += n / rate if rate > 0 else 0.0
    return {
        "steps": sum(1 for t in turns if not t.get("wrap_up")),  # the step limit's wrap-up is no step
        "turns": len(turns),
        "generated_tokens": int(tokens),
        "forwards": int(forwards),
        "decode_seconds": decode_s,
        "prefill_seconds": prefill_s,
        "tool_calls": sum(len(t.get("tool_calls") or []) for t in turns),
        "parse_errors": sum(1 for t in turns for c in t.get("tool_calls") or [] if c.get("error")),
        "malformed_tool_calls": sum(1 for r in tools if is_format_error(r)),
        "forced_tokens": int(forced),
        **value_errors(tools),
        **harm_counts(tools),
    }


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def aggregate(records: list[dict[str, Any]], decoder: Decoder) -> dict[str, Any]:
    mine = [r for r in records if r["decoder_key"] == decoder.key]
    tokens = sum(r["generated_tokens"] for r in mine)
    forwards = sum(r["forwards"] for r in mine)
    forced = sum(r.get("forced_tokens", 0) for r in mine)
    decode_s = sum(r["decode_seconds"] for r in mine)
    resolved = sum(1 for r in mine if r["resolved"])
    statuses: dict[str, int] = {}
    for r in mine:
        statuses[r["exit_status"]] = statuses.get(r["exit_status"], 0) + 1
    return {
        "decoder": decoder.name,
        "block_size": decoder.block_size,
        "threshold": decoder.threshold,
        "tasks": len(mine),
        "resolved": resolved,
        "success_rate": _ratio(resolved, len(mine)) or 0.0,
        "steps_mean": statistics.fmean(r["steps"] for r in mine) if mine else 0.0,
        "turns": sum(r["turns"] for r in mine),
        "generated_tokens": tokens,
        "forwards": forwards,
        "forwards_per_token": _ratio(forwards, tokens),
        "tokens_per_forward": _ratio(tokens, forwards),
        "tok_per_s": _ratio(tokens, decode_s),
        "median_seconds": statistics.median(r["seconds"] for r in mine) if mine else 0.0,
        "total_seconds": sum(r["seconds"] for r in mine),
        "malformed_tool_calls": sum(r["malformed_tool_calls"] for r in mine),
        "tool_calls": sum(r["tool_calls"] for r in mine),
        "exit_statuses": statuses,
        "grounded": decoder.grounded,
        "forced_tokens": forced,
        "model_tokens_per_forward": _ratio(tokens - forced, forwards),  # forced tokens left out
        "str_replace_misses": sum(r.get("str_replace_misses", 0) for r in mine),
        "missing_paths": sum(r.get("missing_paths", 0) for r in mine),
        # harm: test files edited, runs leaving a PASS_TO_PASS test failing, undefined
        # names the final patch introduces, and the test guard's catches and roll-backs
        "test_file_edits": sum(r.get("test_file_edits", 0) for r in mine),
        "broke_passing_tests": sum(1 for r in mine if broke_passing(r)),
        "undefined_names_left": sum(len(r.get("undefined_names") or []) for r in mine),
        "guard_caught": sum(1 for r in mine if (r.get("test_guard") or {}).get("broken")),
        "rolled_back": sum(1 for r in mine if (r.get("test_guard") or {}).get("rolled_back")),
    }


def broke_passing(record: dict[str, Any]) -> bool:
    """Did the run's final patch leave a PASS_TO_PASS test (one passing before) failing?"""
    grade = record.get("grade") or {}
    return grade.get("patch_applied", False) and any(
        s != "PASSED" for s in (grade.get("PASS_TO_PASS") or {}).values()
    )


def both_solved(records: list[dict[str, Any]], a: Decoder, b: Decoder) -> dict[str, Any]:
    """Median seconds per task of two decoders on the tasks both resolve (a fair speed figure:
    a decoder that fails fast looks quick on all tasks)."""
    solved = {(r["decoder_key"], r.get("instance_id")): r["seconds"] for r in records if r.get("resolved")}
    both = sorted(i for k, i in solved if k == a.key and (b.key, i) in solved)
    if not both:
        return {
            "both_solved": 0,
            "both_solved_seconds": None,
            "both_solved_baseline_seconds": None,
            "both_solved_speedup": None,
        }
    mine = statistics.median(solved[(a.key, i)] for i in both)
    theirs = statistics.median(solved[(b.key, i)] for i in both)
    return {
        "both_solved": len(both),
        "both_solved_seconds": mine,
        "both_solved_baseline_seconds": theirs,
        "both_solved_speedup": _ratio(theirs, mine),
    }


def summarize(records: list[dict[str, Any]], decoders: list[Decoder]) -> dict[str, Any]:
    """Per-decoder aggregates and, for every B > 1, its ratios against the B = 1 baseline (the one
    with the same grounding)."""
    rows = [aggregate(records, d) for d in decoders]
    ratios = []
    for d, r in zip(decoders, rows, strict=True):
        base_d = next((x for x in decoders if x.block_size == 1 and x.grounded == d.grounded), None)
        if base_d is None or base_d == d:
            continue
        base = rows[decoders.index(base_d)]
        ratios.append(
            {
                "decoder": r["decoder"],
                "baseline": base["decoder"],
                "wall_clock_speedup": _ratio(base["median_seconds"], r["median_seconds"]),
                "total_time_speedup": _ratio(base["total_seconds"], r["total_seconds"]),
                "tok_per_s_speedup": _ratio(r["tok_per_s"] or 0.0, base["tok_per_s"] or 0.0),
                "tokens_per_forward_ratio": _ratio(
                    r["tokens_per_forward"] or 0.0, base["tokens_per_forward"] or 0.0
                ),
                "success_rate_delta": r["success_rate"] - base["success_rate"],
                **both_solved(records, d, base_d),
            }
        )
    return {"decoders": rows, "ratios": ratios}


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


TABLE = [  # (header, row -> cell)
    ("decoder", lambda r: r["decoder"]),
    ("resolved", lambda r: f"{r['resolved']}/{r['tasks']} ({100 * r['success_rate']:.0f}%)"),
    ("fwd/token", lambda r: _fmt(r["forwards_per_token"], 3)),
    ("tokens/fwd", lambda r: _fmt(r["tokens_per_forward"])),
    ("w/o forced", lambda r: _fmt(r.get("model_tokens_per_forward"))),
    ("forced", lambda r: str(r.get("forced_tokens", 0))),
    ("tok/s", lambda r: _fmt(r["tok_per_s"], 1)),
    ("median s/task", lambda r: _fmt(r["median_seconds"], 1)),
    ("malformed calls", lambda r: f"{r['malformed_tool_calls']}/{r['tool_calls']}"),
    ("str_replace misses", lambda r: str(r.get("str_replace_misses", 0))),
    ("missing paths", lambda r: str(r.get("missing_paths", 0))),
    ("steps (mean)", lambda r: _fmt(r["steps_mean"], 1)),
    ("test-file edits", lambda r: str(r.get("test_file_edits", 0))),
    ("broke passing tests", lambda r: str(r.get("broke_passing_tests", 0))),
    ("undefined names", lambda r: str(r.get("undefined_names_left", 0))),
    ("rolled back", lambda r: str(r.get("rolled_back", 0))),
    ("tokens", lambda r: str(r["generated_tokens"])),
]


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def ratio_lines(summary: dict[str, Any]) -> list[str]:
    return [
        f"{q['decoder']} vs {q['baseline']}: wall-clock speed-up {_x(q['wall_clock_speedup'])} "
        f"(median s/task; total {_x(q['total_time_speedup'])}), decode tok/s {_x(q['tok_per_s_speedup'])}, "
        f"tokens per forward {_x(q['tokens_per_forward_ratio'])}, "
        f"success rate {100 * q['success_rate_delta']:+.0f} points; on the {q.get('both_solved', 0)} tasks both "
        f"solve: {_fmt(q.get('both_solved_seconds'), 1)} vs {_fmt(q.get('both_solved_baseline_seconds'), 1)} "
        f"s/task median ({_x(q.get('both_solved_speedup'))})"
        for q in summary["ratios"]
    ]


def label_line(summary: dict[str, Any]) -> str:
    """How the figures were taken (BenchConfig.labels): timings and work directory."""
    labels = summary.get("labels") or {}
    return (
        f"timings: {labels.get('timings', '?')}; work dir: {labels.get('work_dir', '?')}; "
        f"test guard: {labels.get('test_guard', '?')}"
    )


def write_markdown(summary: dict[str, Any], path: Path) -> None:
    lines = [
        label_line(summary),
        "",
        "| " + " | ".join(h for h, _ in TABLE) + " |",
        "|" + "---|" * len(TABLE),
    ]
    lines += ["| " + " | ".join(cell(r) for _, cell in TABLE) + " |" for r in summary["decoders"]]
    lines += [""] + [f"- {line}" for line in ratio_lines(summary)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def print_report(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="clover fix: block diffusion vs AR")
    for h, _ in TABLE:
        table.add_column(h, justify="left" if h == "decoder" else "right")
    for r in summary["decoders"]:
        table.add_row(*(cell(r) for _, cell in TABLE))
    console = Console(width=140)
    console.print(table)
    console.print(label_line(summary))
    for line in ratio_lines(summary):
        console.print(line)
