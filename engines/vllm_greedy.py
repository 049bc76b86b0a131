"""Greedy tokens from vLLM for a Clover checkpoint, as one JSON line: the engine side of the parity
check (tests/test_engine_vllm.py) and of the GPU script (benchmarks/gpu_run.sh).

    python -m clover.engines.vllm_greedy CHECKPOINT --prompt-ids 1,2,3 --max-tokens 16 [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--prompt-ids", required=True, help="comma-separated token ids")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--dtype", default="bfloat16", help="vLLM's CPU GDN kernels need bfloat16")
    ap.add_argument("--tensor-parallel-size", type=int, default=1)
    ap.add_argument("--ssm-state-dtype", default="float32", help="GDN state dtype (Clover keeps fp32)")
    a = ap.parse_args(argv)
    try:
        from vllm import LLM, SamplingParams
    except ImportError:
        print("vllm is not installed in this environment", file=sys.stderr)
        return 2
    prompt = [int(t) for t in a.prompt_ids.split(",") if t.strip()]
    t0 = time.perf_counter()
    llm = LLM(
        model=a.checkpoint,
        dtype=a.dtype,
        enforce_eager=True,
        max_model_len=max(256, len(prompt) + a.max_tokens),
        max_num_seqs=1,
        tensor_parallel_size=a.tensor_parallel_size,
        mamba_ssm_cache_dtype=a.ssm_state_dtype,
    )
    ready = time.perf_counter() - t0
    params = SamplingParams(temperature=0.0, max_tokens=a.max_tokens, ignore_eos=True)
    t1 = time.perf_counter()
    out = llm.generate({"prompt_token_ids": prompt}, params, use_tqdm=False)
    tokens = list(out[0].outputs[0].token_ids)
    print(
        json.dumps({"tokens": tokens, "startup_s": ready, "generate_s": time.perf_counter() - t1}), flush=True
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
