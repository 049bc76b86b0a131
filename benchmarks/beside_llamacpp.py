"""Clover beside llama.cpp on the same weights, threads and prompts, on this CPU.

    python -m benchmarks.beside_llamacpp --model /work/big/clover-35b-gptq [--gguf FILE] \\
        [--threads 2] [--rounds 2] [--repeats 3] [--llama-bench PATH] [--json OUT]

The checkpoint is a GPTQ-Int4 one from benchmarks/write_realsize.py; its GGUF (benchmarks/gguf_write.py,
Q4_0: the same weights value for value) is written beside it when `--gguf` does not exist yet. Each
program runs in a process of its own, one after the other (two ~20 GB models do not fit in 24 GB
together), in alternating order over `--rounds` rounds; in each process a warm-up, then `--repeats`
of every figure:
- load: seconds to a model that answers, and the process's peak RSS (VmHWM) after the load and at
  the end of the run (llama.cpp maps the GGUF: its mapped pages count once touched);
- prefill tok/s of 512 and 2,048 prompt tokens (no cache);
- decode tok/s at B = 1 after a 64-token prompt (greedy, no stop), and for Clover its block
  decoder at the width model/decoder/decode_width.py chooses from the measured cost curve (verify order),
  with the forward cost of that width over one token's;
- an agent's first turn (the chat system prompt and every tool, ~2-3k tokens): its prefill time
  (time to first token), and the second turn (the first reply and a tool result appended) on each
  program's prompt cache (Clover's backends/prefix_cache.py, llama.cpp's cache_prompt).
llama.cpp runs in-process in its child through `xllamacpp` (pip's prebuilt CPU build) and, with
`--llama-bench`, as a native build's `llama-bench` (pp512, pp2048, tg64). The weight-traffic bound
beside them is the copy bandwidth over the bytes one token's forward reads in each format.
Figures are medians with the range (min-max) over every repeat of every round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

PREFILLS = (512, 2048)
DECODE_PROMPT = 64


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def random_ids(n: int, seed: int) -> list[int]:
    """Prompt tokens both programs accept: ids of the checkpoint's real vocabulary (below 8,000)
    above its special tokens."""
    import random

    rng = random.Random(seed)
    return [rng.randrange(300, 8000) for _ in range(n)]


def agent_turns(model_dir: Path) -> tuple[list[int], list[int]]:
    """Token ids of an agent's first prompt (system prompt + every tool + a task) and of its second
    (the first reply, a tool call, and its result appended), rendered as `clover chat` does."""
    from clover.core.tool_protocol import tool_spec
    from clover.model.config import CloverConfig
    from clover.model.text.chat import encode_prompt, render_messages
    from clover.model.text.tokenizer import CloverTokenizer
    from clover.prompts import system_prompt
    from clover.tools.registry import default_tools

    config = CloverConfig.load(model_dir)
    tok = CloverTokenizer.from_dir(model_dir)
    specs = [tool_spec(t) for t in default_tools()]
    first = [
        {"role": "system", "content": system_prompt("/work/project", "chat")},
        {"role": "user", "content": "Write a function that reverses a string, in calc.py."},
    ]
    call = {"id": "c1", "name": "view", "arguments": {"path": "calc.py"}}
    second = first + [
        {"role": "assistant", "content": "I will look at calc.py first.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "def add(a, b):\n    return a + b\n"},
    ]

    def ids(messages):
        return encode_prompt(tok, config, render_messages(messages, specs, think=False))

    return ids(first), ids(second)


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


# ---------------------------------------------------------------------- Clover's process


def clover_child(a) -> dict:
    import torch

    from benchmarks.cost_curve import layer_traffic, matrix_bytes, one_forward
    from clover.backends.prefix_cache import PrefixCache
    from clover.model.decoder.decode_width import choose_width
    from clover.model.decoder.generate import DecodeSettings, generate
    from clover.model.loading.load import load_checkpoint

    torch.set_num_threads(a.threads)
    torch.set_grad_enabled(False)
    base = _status("VmRSS")
    t0 = time.perf_counter()
    model = load_checkpoint(a.model).model
    load_s = time.perf_counter() - t0
    out = {"load_s": [load_s], "rss_load": _status("VmHWM"), "rss_base": base}
    k = model.config.num_experts_per_tok
    out["bytes_per_token"] = sum(layer_traffic(m, k) for m in model.model.layers) + matrix_bytes(
        model.lm_head
    )

    def settings(block: int, n: int, order: str | None = None) -> DecodeSettings:
        return DecodeSettings(
            block_size=block, order=order, max_new_tokens=n, stop_token_ids=[], repetition=None
        )

    prompt = random_ids(DECODE_PROMPT, 1)
    generate(model, [prompt], settings(1, 4))  # warm-up: kernels built and compiled, pages touched
    cache = model.new_cache(1)
    model.prefill(torch.tensor([random_ids(64, 2)]), cache)
    gen = torch.Generator().manual_seed(0)
    forward = {}
    for w in (1, 2, 4, 8):
        one_forward(model, cache, "causal", w, gen)  # warm-up of this width
        times = []
        for _ in range(a.repeats):
            t = time.perf_counter()
            one_forward(model, cache, "causal", w, gen)
            times.append(time.perf_counter() - t)
        forward[w] = min(times)
    out["forward_s"] = forward
    choice = choose_width(model.config, "cpu", {w: s / forward[1] for w, s in forward.items()})
    out["width"], out["width_reason"] = choice.width, choice.reason
    block = max(choice.width, 4)  # the block decoder is measured even where B = 1 is chosen
    out["block"] = block
    for n in PREFILLS:
        rates = []
        for r in range(a.repeats):
            c = model.new_cache(1)
            t = time.perf_counter()
            model.prefill(torch.tensor([random_ids(n, 10 + r)]), c)
            rates.append(n / (time.perf_counter() - t))
            del c
        out[f"prefill_{n}"] = rates
    runs = {"b1": (1, None), "block": (block, "verify")}
    for key, (b, order) in runs.items():
        res = [generate(model, [prompt], settings(b, a.new_tokens, order)).stats for _ in range(a.repeats)]
        out[f"decode_{key}"] = [s["tok_per_s"] for s in res]
        out[f"tpf_{key}"] = [s["tokens_per_forward"] for s in res]
    first, second = agent_turns(a.model)
    out["agent_tokens"] = [len(first), len(second)]
    ttft1, ttft2, cached = [], [], []
    for _ in range(a.repeats):
        pc = PrefixCache()
        s1 = pc.generate(model, first, settings(1, 1)).stats
        s2 = pc.generate(model, second, settings(1, 1)).stats
        ttft1.append(s1["prefill_seconds"])
        ttft2.append(s2["prefill_seconds"])
        cached.append(s2["cached_prompt_tokens"])
    out["agent_ttft_1"], out["agent_ttft_2"], out["agent_cached_2"] = ttft1, ttft2, cached
    out["rss_peak"] = _status("VmHWM")
    return out


# ---------------------------------------------------------------------- llama.cpp's processes


def llama_child(a) -> dict:
    import xllamacpp as xl

    first, second = agent_turns(a.model)
    p = xl.CommonParams()
    p.model.path = str(a.gguf)
    p.n_ctx = max(max(PREFILLS), len(second)) + a.new_tokens + 64
    p.n_batch, p.n_ubatch, p.n_parallel = 2048, 512, 1
    p.cpuparams.n_threads = p.cpuparams_batch.n_threads = a.threads
    p.cache_ram_mib = 0  # no prompt cache in RAM beside the slot's: a first turn pays its prefill
    base = _status("VmRSS")
    t0 = time.perf_counter()
    server = xl.Server(p)
    out = {"load_s": [time.perf_counter() - t0], "rss_load": _status("VmHWM"), "rss_base": base}

    def complete(ids: list[int], n: int, cache: bool) -> dict:
        r = server.handle_completions(
            {"prompt": ids, "n_predict": n, "ignore_eos": True, "cache_prompt": cache, "temperature": 0}
        )
        if "timings" not in r:
            raise RuntimeError(f"llama.cpp: {json.dumps(r)[:300]}")
        return r["timings"]

    prompt = random_ids(DECODE_PROMPT, 1)
    complete(prompt, 4, False)  # warm-up
    for n in PREFILLS:
        out[f"prefill_{n}"] = [
            complete(random_ids(n, 10 + r), 1, False)["prompt_per_second"] for r in range(a.repeats)
        ]
    out["decode_b1"] = [
        complete(prompt, a.new_tokens, False)["predicted_per_second"] for _ in range(a.repeats)
    ]
    out["agent_tokens"] = [len(first), len(second)]
    ttft1, ttft2, cached = [], [], []
    for _ in range(a.repeats):
        complete(random_ids(32, 99), 1, True)  # another prompt in the slot: the first turn pays
        t1 = complete(first, 1, True)
        t2 = complete(second, 1, True)
        ttft1.append(t1["prompt_ms"] / 1e3)
        ttft2.append(t2["prompt_ms"] / 1e3)
        cached.append(t2.get("cache_n", 0))
    out["agent_ttft_1"], out["agent_ttft_2"], out["agent_cached_2"] = ttft1, ttft2, cached
    out["rss_peak"] = _status("VmHWM")
    return out


def llama_bench_child(a) -> dict:
    """A native llama.cpp build's own benchmark, its peak RSS from the kernel's accounting."""
    import resource

    cmd = [str(a.llama_bench), "-m", str(a.gguf), "-t", str(a.threads), "-p", ",".join(map(str, PREFILLS)),
           "-n", str(a.new_tokens), "-r", str(a.repeats), "-o", "json"]  # fmt: skip
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"llama-bench exit {done.returncode}: {done.stderr.strip()[-300:]}")
    rows = json.loads(done.stdout)
    out = {
        "seconds": time.perf_counter() - t0,
        "rss_peak": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
    }
    for row in rows:
        key = f"prefill_{row['n_prompt']}" if row["n_prompt"] else "decode_b1"
        out[key] = row["samples_ts"]
    return out


CHILDREN = {"clover": clover_child, "llama": llama_child, "llama-bench": llama_bench_child}


# ---------------------------------------------------------------------- the parent: rounds and the table


def gguf_bytes_per_token(path: Path) -> int:
    """Bytes one token's forward reads from the GGUF: every matrix but the embedding, and k of E
    experts of each expert tensor."""
    from gguf import GGUFReader

    r = GGUFReader(str(path))
    kv = {f.name: f for f in r.fields.values()}
    top = int(kv["qwen35moe.expert_used_count"].parts[-1][0])
    count = int(kv["qwen35moe.expert_count"].parts[-1][0])
    total = 0
    for t in r.tensors:
        if t.name == "token_embd.weight":
            continue
        total += int(t.n_bytes) * top // count if "_exps" in t.name else int(t.n_bytes)
    return total


def run_child(kind: str, a) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.beside_llamacpp", "--child", kind, "--model", str(a.model),
           "--gguf", str(a.gguf), "--threads", str(a.threads), "--repeats", str(a.repeats),
           "--new-tokens", str(a.new_tokens)]  # fmt: skip
    if a.llama_bench:
        cmd += ["--llama-bench", str(a.llama_bench)]
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"beside_llamacpp: the {kind} run failed: {done.stderr.strip()[-600:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def merge(runs: list[dict]) -> dict:
    """Every repeat of every round, per figure."""
    out: dict = {}
    for r in runs:
        for key, v in r.items():
            if isinstance(v, list) and v and isinstance(v[0], (int, float)):
                out.setdefault(key, []).extend(v)
            else:
                out.setdefault(key, v)
            if key in ("rss_load", "rss_peak"):
                out[key + "_all"] = out.get(key + "_all", []) + [v]
    return out


def fmt(s: dict | None, digits: int = 1) -> str:
    if s is None:
        return "-"
    lo, hi = s["min"], s["max"]
    return f"{s['median']:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def table(results: dict, bw: dict, a) -> str:
    gb = 1e9
    rows = [
        "| program | format | load s | peak RSS GB | prefill tok/s 512 | prefill tok/s 2048 | decode tok/s B = 1 "
        "| decode tok/s chosen width | bound tok/s (GB/token) | agent turn 1 s / turn 2 s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        s = {
            k: spread(v) for k, v in r.items() if isinstance(v, list) and v and isinstance(v[0], (int, float))
        }
        bound = bw["copy_gb_s"] * gb / r["bytes_per_token"] if r.get("bytes_per_token") else None
        width = "-"
        if "decode_block" in s:
            w = r.get("width", 1)
            chosen = s["decode_b1"] if w == 1 else s["decode_block"]
            width = f"W = {w}: {fmt(chosen, 2)}; W = {r['block']} verify {fmt(s['decode_block'], 2)}"
        rss = max(r.get("rss_peak_all", [r.get("rss_peak", 0)])) / gb
        agent = f"{fmt(s['agent_ttft_1'])} / {fmt(s['agent_ttft_2'], 2)}" if "agent_ttft_1" in s else "-"
        rows.append(
            f"| {name} | {r['format']} | {fmt(s.get('load_s'))} | {rss:.2f} | {fmt(s.get('prefill_512'))} | "
            f"{fmt(s.get('prefill_2048'))} | {fmt(s.get('decode_b1'), 2)} | {width} | "
            + (f"{bound:.2f} ({r['bytes_per_token'] / gb:.2f})" if bound else "-")
            + f" | {agent} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True, help="GPTQ-Int4 checkpoint (write_realsize)")
    ap.add_argument("--gguf", type=Path, help="its GGUF (default: MODEL.q4_0.gguf, written if absent)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2, help="processes per program, in alternating order")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of each figure in each process")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--llama-bench", type=Path, help="a native llama.cpp build's llama-bench")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.gguf = a.gguf or a.model.with_name(a.model.name + ".q4_0.gguf")
    if a.child:
        print(json.dumps(CHILDREN[a.child](a)))
        return 0
    if not (a.model / "config.json").is_file():
        print(f"beside_llamacpp: {a.model} holds no checkpoint", file=sys.stderr)
        return 2
    if not a.gguf.is_file():
        from benchmarks.gguf_write import write_gguf

        print(f"writing {a.gguf} from {a.model} ...", flush=True)
        write_gguf(a.model, a.gguf)
    import torch

    from benchmarks.cost_curve import bandwidth

    torch.set_num_threads(a.threads)
    bw = bandwidth(torch.device("cpu"))
    print(f"copy bandwidth {bw['copy_gb_s']:.1f} GB/s, {a.threads} threads", flush=True)
    programs = ["clover", "llama"] + (["llama-bench"] if a.llama_bench else [])
    runs: dict[str, list[dict]] = {p: [] for p in programs}
    for rnd in range(a.rounds):
        order = programs if rnd % 2 == 0 else programs[::-1]
        for kind in order:
            t = time.perf_counter()
            runs[kind].append(run_child(kind, a))
            print(f"round {rnd + 1}: {kind} done in {time.perf_counter() - t:.0f} s", flush=True)
    results = {
        "Clover (numba + int8-dot kernels)": merge(runs["clover"])
        | {"format": "GPTQ-Int4 (int4v, 4.25 bit)"},
        "llama.cpp (xllamacpp wheel)": merge(runs["llama"])
        | {"format": "GGUF Q4_0 (4.5 bit)", "bytes_per_token": gguf_bytes_per_token(a.gguf)},
    }
    if a.llama_bench:
        results["llama.cpp (native build, llama-bench)"] = merge(runs["llama-bench"]) | {
            "format": "GGUF Q4_0 (4.5 bit)",
            "bytes_per_token": gguf_bytes_per_token(a.gguf),
        }
    print(table(results, bw, a))
    c = results["Clover (numba + int8-dot kernels)"]
    f = c["forward_s"]
    print(
        "Clover forward ms at W = 1/2/4/8: "
        + " / ".join(f"{f[w] * 1e3:.0f}" for w in sorted(f, key=int))
        + f"; chosen width {c['width']} ({c['width_reason']})"
    )
    if a.json:
        a.json.write_text(json.dumps({"bandwidth": bw, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
