"""`clover bench` / clover.evals.bench: the real agent loop and tools on real SynthFix repos,
graded with pytest. The tiny RANDOM checkpoint fails the tasks; the tests check the plumbing and that
the success counting itself works (gold patch resolves, empty patch does not)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from clover.backends.scripted import ScriptedModel
from clover.bench import bench_command
from clover.evals.bench.config import BenchConfig
from clover.evals.bench.run import main, run_bench
from clover.evals.bench.stats import DECODER_KEYS, Decoder, summarize
from clover.evals.bench.task import TaskRunner
from clover.evals.bench.workspace import WORK_DIR_ENV, hold
from clover.evals.grading import grade
from clover.evals.synthfix import generate

RATIO_KEYS = {"wall_clock_speedup", "total_time_speedup", "tok_per_s_speedup", "tokens_per_forward_ratio"}


@pytest.fixture(autouse=True)
def own_work_dir(tmp_path, monkeypatch):
    """Each test's agents work in its own directory: a bench run elsewhere on the machine holds the default."""
    monkeypatch.setenv(WORK_DIR_ENV, str(tmp_path / "bench-work"))


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def _task_files(out: Path) -> list[Path]:
    return sorted(p for p in (out / "tasks").glob("*/*.json"))


@pytest.mark.parametrize("oracle, count, blocks", [("gold", 2, "32,1"), ("empty", 1, "1")])
def test_oracle_patches_prove_the_grading(tmp_path, capsys, oracle, count, blocks):
    out = tmp_path / oracle
    assert main(["--oracle", oracle, "--count", str(count), "--block-size", blocks, "--out", str(out)]) == 0
    summary = _summary(out)
    resolved = count if oracle == "gold" else 0
    assert [d["resolved"] for d in summary["decoders"]] == [resolved] * len(blocks.split(","))
    assert len(_task_files(out)) == count * len(blocks.split(","))
    for path in _task_files(out):
        rec = json.loads(path.read_text())
        assert rec["grade"]["patch_applied"]
        fail_to_pass = set(rec["grade"]["FAIL_TO_PASS"].values())
        assert fail_to_pass == ({"PASSED"} if oracle == "gold" else {"FAILED"})
    assert "Traceback" not in capsys.readouterr().err


def test_relative_out_dir_works(tmp_path, monkeypatch):
    # The default --out is relative (runs/bench): clones and grading used to fail on every task.
    monkeypatch.chdir(tmp_path)
    assert main(["--oracle", "gold", "--count", "1", "--block-size", "1", "--out", "rel/bench"]) == 0
    assert [d["resolved"] for d in _summary(tmp_path / "rel" / "bench")["decoders"]] == [1]


def _new_file_patch(path: str, text: str) -> str:
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 "
        f"+1,{len(lines)} @@\n{body}"
    )


def test_grading_needs_every_pass_to_pass_test(tmp_path):
    row = generate(tmp_path, "heldout", 1, 3)[0]
    assert grade(row, row["patch"])["resolved"]
    # The gold fix, plus a conftest that makes one PASS_TO_PASS test error: not resolved.
    victim = json.loads(row["PASS_TO_PASS"])[-1]
    hook = f"def pytest_runtest_setup(item):\n    if item.nodeid == {victim!r}:\n        raise RuntimeError('broken')\n"
    report = grade(row, row["patch"] + _new_file_patch("tests/conftest.py", hook))
    assert report["patch_applied"] and not report["resolved"]
    assert report["PASS_TO_PASS"][victim] == "ERROR"
    assert set(report["FAIL_TO_PASS"].values()) == {"PASSED"}
    assert not grade(row, "not a patch\n")["patch_applied"]


def test_scripted_agent_counts_malformed_calls_and_resolves(tmp_path):
    out = tmp_path / "run"
    row = generate(out / "instances", "heldout", 1, 0)[0]  # run_bench regenerates the same instance
    turns = [
        {"raw": "<tool_call>\n<function=view>\n</function>\n</tool_call>"},  # missing path
        {"tool_calls": [{"name": "no_such_tool", "arguments": {}}]},
        {"tool_calls": [{"name": "create", "arguments": {"path": "fix.diff", "file_text": row["patch"]}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "git apply fix.diff && rm fix.diff"}}]},
        {"text": "Fixed."},
    ]
    cfg = BenchConfig(out=out, model="scripted:unused", count=1, max_steps=8)
    summary = run_bench(cfg, model=ScriptedModel(turns), log=lambda line: None)
    for d in summary["decoders"]:
        assert (d["resolved"], d["tasks"], d["malformed_tool_calls"], d["tool_calls"]) == (1, 1, 2, 4)
        assert d["steps_mean"] == 5 and d["exit_statuses"] == {"submitted": 1}
    rec = json.loads(_task_files(out)[0].read_text())
    assert rec["patch"].strip() and Path(rec["trajectory"]).is_file()


def _paths_written(turns: list[dict], out: Path, **cfg: object) -> set[str]:
    """The work-tree paths `pwd` showed the agent in one run with two decoders (from its patches)."""
    config = BenchConfig(out=out, model="scripted:unused", count=1, max_steps=4, block_sizes=[8, 1], **cfg)
    summary = run_bench(config, model=ScriptedModel(turns), log=lambda line: None)
    patches = [json.loads(p.read_text())["patch"] for p in _task_files(out)]
    assert len(patches) == 2
    _paths_written.labels = summary["labels"]  # type: ignore[attr-defined]
    return {line[1:] for patch in patches for line in patch.splitlines() if line.startswith("+/")}


PWD_TURNS = [
    {"tool_calls": [{"name": "bash", "arguments": {"command": "pwd > where.txt"}}]},
    {"text": "Done."},
]


def test_a_pinned_work_dir_does_not_move_with_out_or_the_decoder(tmp_path):
    """Pinned (here by $CLOVER_BENCH_WORK_DIR): a workspace's path depends on the task alone, so the
    same weights give the same run under any --out, and the summary says the path was pinned."""
    where = _paths_written(PWD_TURNS, tmp_path / "a") | _paths_written(PWD_TURNS, tmp_path / "other-out")
    iid = json.loads(_task_files(tmp_path / "a")[0].read_text())["instance_id"]
    assert where == {str(tmp_path / "bench-work" / iid)}
    assert _paths_written.labels["work_dir"] == f"pinned: {tmp_path / 'bench-work'}"  # type: ignore[attr-defined]
    assert not (tmp_path / "bench-work" / iid).exists() and not (tmp_path / "a" / "work").exists()


def test_by_default_each_run_works_at_a_fresh_real_path_with_real_timings(tmp_path, monkeypatch):
    """No pinned directory and no rewritten durations unless asked for. One run's decoders
    share its workspace path; two runs get two paths, removed afterwards; the labels say so."""
    monkeypatch.delenv(WORK_DIR_ENV)
    first, second = _paths_written(PWD_TURNS, tmp_path / "a"), _paths_written(PWD_TURNS, tmp_path / "b")
    assert len(first) == len(second) == 1 and first != second
    assert not any(Path(p).exists() or Path(p).parent.exists() for p in first | second)
    labels = _paths_written.labels  # type: ignore[attr-defined]
    assert labels["timings"] == "real" and labels["work_dir"] == "fresh temporary directory (real paths)"
    assert labels["test_guard"].startswith("on")
    assert "timings: real; work dir: fresh temporary directory" in (tmp_path / "b" / "summary.md").read_text()


def test_fixed_timings_are_asked_for_and_labelled(tmp_path):
    out = tmp_path / "o"
    assert (
        main(["--oracle", "empty", "--count", "1", "--block-size", "1", "--out", str(out), "--fixed-timings"])
        == 0
    )
    assert _summary(out)["labels"]["timings"].startswith("fixed")
    assert BenchConfig(out=out).labels()["timings"] == "real"


def test_a_work_dir_in_use_is_refused_in_one_line(tmp_path, capsys):
    argv = ["--oracle", "gold", "--count", "1", "--block-size", "1", "--out", str(tmp_path / "o")]
    with hold(tmp_path / "bench-work"):  # another run holds the default
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "another clover bench is working in" in err and "--work-dir" in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert main([*argv, "--work-dir", str(tmp_path / "beside")]) == 0
    assert [d["resolved"] for d in _summary(tmp_path / "o")["decoders"]] == [1]


def test_kept_workspaces_are_under_out(tmp_path):
    out = tmp_path / "o"
    assert (
        main(
            [
                "--oracle",
                "empty",
                "--count",
                "1",
                "--block-size",
                "8,1",
                "--out",
                str(out),
                "--keep-workspaces",
            ]
        )
        == 0
    )
    kept = sorted(p.relative_to(out / "work").parts for p in (out / "work").glob("*/*"))
    assert [k[0] for k in kept] == ["ar-b1", "diffusion-b8-t0.9"] and all(
        (out / "work" / k[0] / k[1] / ".git").is_dir() for k in kept
    )


def test_summary_ratios_are_against_the_ar_baseline():
    def rec(key: str, seconds: float, tokens: int, forwards: int, ok: bool) -> dict:
        return {
            "decoder_key": key,
            "resolved": ok,
            "steps": 3,
            "turns": 3,
            "generated_tokens": tokens,
            "forwards": forwards,
            "decode_seconds": tokens / 100,
            "seconds": seconds,
            "malformed_tool_calls": 1,
            "tool_calls": 2,
            "exit_status": "submitted",
        }

    diff, ar = Decoder(32, 0.9), Decoder(1, 0.9)
    records = [rec(diff.key, 2.0, 400, 100, True), rec(ar.key, 6.0, 300, 300, False)]
    s = summarize(records, [diff, ar])
    d, a = s["decoders"]
    assert d["tokens_per_forward"] == 4.0 and a["forwards_per_token"] == 1.0 and d["success_rate"] == 1.0
    (q,) = s["ratios"]
    assert q["wall_clock_speedup"] == 3.0 and q["tokens_per_forward_ratio"] == 4.0
    assert q["success_rate_delta"] == 1.0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--block-size", "32,x"], "--block-size"),
        (["--block-size", "0"], "--block-size"),
        (["--count", "0"], "--count"),
        (["--threshold", "2"], "threshold"),
        (["--model", "/nonexistent/ckpt"], "checkpoint directory"),
        (["--set", "grounded_spans"], "KEY=VALUE"),
        (["--set", "grounded_spans=maybe"], "grounded_spans must be auto, on or off"),
        (["--set", "no_such_setting=1"], "unknown setting"),
        (["--set", "block_size=4"], "the bench sets it"),
        (["--drafts", "2", "--set", "drafts=0"], "the bench sets it"),  # both CLIs: one parser
    ],
)
def test_bad_options_are_one_line(tmp_path, capsys, argv, message):
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o" / "instances").exists()  # failed before generating anything


def test_tiny_random_checkpoint_end_to_end(tmp_path, ckpt_dir):
    """Two held-out tasks, both decoders, the real local model (it fails them: random weights)."""
    app = typer.Typer()
    app.command()(bench_command)
    out = tmp_path / "bench"
    result = CliRunner().invoke(
        app,
        [
            "--model",
            str(ckpt_dir),
            "--count",
            "2",
            "--max-steps",
            "2",
            "--max-tokens",
            "24",
            "--block-size",
            "8,1",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.exception is None and "Traceback" not in result.output
    summary = _summary(out)
    assert [d["block_size"] for d in summary["decoders"]] == [8, 1]
    for d in summary["decoders"]:
        assert set(DECODER_KEYS) <= set(d)
        assert d["tasks"] == 2 and 0 <= d["resolved"] <= 2
        assert sum(d["exit_statuses"].values()) == 2
        assert 1 <= d["steps_mean"] <= 2 and d["turns"] >= 2
        assert d["forwards"] >= 1 and d["generated_tokens"] >= d["turns"]
        assert d["tokens_per_forward"] == pytest.approx(d["generated_tokens"] / d["forwards"])
        assert d["forwards_per_token"] == pytest.approx(1 / d["tokens_per_forward"])
        assert d["tok_per_s"] > 0 and d["median_seconds"] > 0
    # B = 1: one network pass per token, except each turn's first token (the prefill's logits give it)
    # and the tokens the grammar placed without a pass
    assert d["generated_tokens"] - d["turns"] - d["forced_tokens"] <= d["forwards"] <= d["generated_tokens"]
    (ratio,) = summary["ratios"]
    assert set(ratio) >= RATIO_KEYS and ratio["baseline"] == "B=1 (AR)"
    files = _task_files(out)
    assert len(files) == 4 and {p.parent.name for p in files} == {"diffusion-b8-t0.9", "ar-b1"}
    for p in files:
        rec = json.loads(p.read_text())
        # the step limit's wrap-up turn (the random checkpoint does not decline it) is no step
        assert Path(rec["trajectory"]).is_file() and rec["turns"] - rec["steps"] == (
            rec["exit_status"] == "limits_exceeded"
        )
    assert "| B=8 τ=0.9 |" in (out / "summary.md").read_text()
    assert not (out / "work").exists()


def test_model_defaults_follow_the_checkpoints_decode_block_size(tmp_path, ckpt_dir):
    import shutil

    from clover.evals.bench.config import resolve_model_defaults
    from clover.model.config import CloverConfig

    own = tmp_path / "ckpt"
    shutil.copytree(ckpt_dir, own)
    cfg = CloverConfig.load(own)
    cfg.decode_block_size, cfg.decode_order = 1, "left"
    cfg.save(own)
    bench = BenchConfig(out=tmp_path / "out", model=str(own), block_sizes=[0, cfg.block_size], order="auto")
    resolve_model_defaults(bench)
    assert bench.block_sizes == [1, cfg.block_size] and bench.order == "left"
    # the bench's default `model,1` is then one decoder (it was refused as "a block size twice")
    bench = BenchConfig(out=tmp_path / "out", model=str(own), block_sizes=[0, 1], order="auto")
    resolve_model_defaults(bench)
    assert bench.block_sizes == [1]


@pytest.fixture(scope="module")
def ckpt_dir():
    pytest.importorskip("torch")
    from tests.tiny_checkpoint import tiny_checkpoint_dir

    return tiny_checkpoint_dir()


def test_task_runner_reuses_one_model_per_decoder(tmp_path):
    runner = TaskRunner(BenchConfig(out=tmp_path, model="scripted:unused"), model=ScriptedModel([]))
    a, b = runner.model_for(Decoder(32, 0.9)), runner.model_for(Decoder(1, 0.9))
    assert a is runner.model_for(Decoder(32, 0.9)) and a is not b


def test_set_reaches_every_decoders_settings(tmp_path):
    """`--set KEY=VALUE`: a setting the bench has no option for (CLOVER_* variables do not reach it)."""
    from clover.evals.bench.config import BenchError, parse_settings

    cfg = BenchConfig(
        out=tmp_path, block_sizes=[16, 1], extra=parse_settings(["grounded-spans=off", "edit_repairs=off"])
    )
    assert [(s.grounded_spans, s.edit_repairs) for s in map(cfg.settings, cfg.decoders())] == [
        ("off", "off")
    ] * 2
    assert BenchConfig(out=tmp_path).settings(cfg.decoders()[0]).grounded_spans == "auto"
    # drafts: unset by its own option (--drafts), --set may give it
    assert BenchConfig(out=tmp_path, extra={"drafts": "0"}).settings(cfg.decoders()[0]).drafts == 0
    with pytest.raises(BenchError, match="the bench sets it"):
        BenchConfig(out=tmp_path, drafts=3, extra={"drafts": "0"}).settings(cfg.decoders()[0])


def test_grounding_side_by_side_and_the_value_errors_it_rules_out(tmp_path):
    from clover.evals.bench.config import BenchError, parse_grounding
    from clover.evals.bench.stats import trajectory_stats

    cfg = BenchConfig(out=tmp_path, block_sizes=[32, 1], grounding=parse_grounding("on,off"))
    keys = [d.key for d in cfg.decoders()]
    assert keys == ["diffusion-b32-t0.9", "ar-b1", "diffusion-b32-t0.9-ungrounded", "ar-b1-ungrounded"]
    assert [cfg.settings(d).grounded for d in cfg.decoders()] == [True, True, False, False]
    with pytest.raises(BenchError):
        parse_grounding("maybe")
    traj = [
        {"type": "assistant", "completion_tokens": 50, "stats": {"forwards": 10, "grammar_tokens": 30}},
        {
            "type": "tool",
            "name": "str_replace",
            "is_error": True,
            "output": "old_str was not found in a.py. ...",
        },
        {
            "type": "tool",
            "name": "str_replace",
            "is_error": True,
            "output": "str_replace: old_str occurs 2 times in a.py",
        },
        {"type": "tool", "name": "view", "is_error": True, "output": "src/b.py: no such file"},
        {"type": "tool", "name": "bash", "is_error": True, "output": "cat: x: No such file or directory"},
    ]
    st = trajectory_stats(traj)
    assert (st["forced_tokens"], st["str_replace_misses"], st["missing_paths"]) == (30, 2, 1)
    # tokens per forward with and without the forced tokens; speed on the tasks both decoders solve
    on32, on1 = cfg.decoders()[:2]

    def rec(d, iid, seconds, ok):
        return {
            "decoder_key": d.key,
            "instance_id": iid,
            "resolved": ok,
            "seconds": seconds,
            **st,
            "exit_status": "submitted",
        }

    records = [
        rec(on32, "a", 2.0, True),
        rec(on1, "a", 6.0, True),
        rec(on32, "b", 1.0, False),
        rec(on1, "b", 9.0, True),
    ]
    s = summarize(records, [on32, on1])
    row = s["decoders"][0]
    assert row["tokens_per_forward"] == 5.0 and row["model_tokens_per_forward"] == 2.0
    (q,) = s["ratios"]
    assert (q["both_solved"], q["both_solved_speedup"]) == (1, 3.0)


def test_harm_is_counted_test_file_edits_broken_passing_tests_and_the_guards_catch(tmp_path):
    """The goals are counts: edits of test files, runs that leave a passing test failing
    (graded PASS_TO_PASS), undefined names in the final patch; and what the test guard caught."""
    turns = [
        {
            "tool_calls": [
                {
                    "name": "str_replace",
                    "arguments": {"path": "tests/test_temps.py", "old_str": "== 0", "new_str": "== 0  # ok"},
                }
            ]
        },
        {
            "tool_calls": [
                {
                    "name": "str_replace",
                    "arguments": {
                        "path": "temps.py",
                        "old_str": "(f - 32) * 5 / 9",
                        "new_str": "(f + 32) * 5 / 9",
                    },
                }
            ]
        },
        {"text": "Done."},
    ]
    out = tmp_path / "o"
    cfg = BenchConfig(
        out=out, model="scripted:unused", count=1, max_steps=5, block_sizes=[1], split="handwritten"
    )
    (row,) = run_bench(cfg, model=ScriptedModel(turns), log=lambda line: None)["decoders"]
    assert (row["test_file_edits"], row["broke_passing_tests"], row["guard_caught"], row["rolled_back"]) == (
        1,
        1,
        1,
        0,
    )
    assert row["undefined_names_left"] == 0
    record = json.loads(_task_files(out)[0].read_text())
    assert record["test_guard"]["broken"] == [
        "tests/test_temps.py::test_to_celsius_boiling",
        "tests/test_temps.py::test_to_celsius_freezing",
    ]
