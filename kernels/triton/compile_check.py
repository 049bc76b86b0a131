"""Compile every kernel for a real GPU target (default sm_90) at the 35B model's shapes, no GPU needed:
catches what the interpreter forgives (tile sizes, types, layouts) and prints shared memory per
kernel. Run without TRITON_INTERPRET: `python -m clover.kernels.triton.compile_check [arch]`."""

from __future__ import annotations

import sys
import time

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from clover.kernels.triton import attention, block_gdn, delta_rule, moe

STAGES = {"delta_rule._state": delta_rule.STATE_STAGES}


def _sig(fn, types: dict[str, str], consts: dict[str, object]) -> dict[str, str]:
    sig = {}
    for name in fn.arg_names:
        if name in consts:
            sig[name] = "constexpr"
        elif name in types:
            sig[name] = types[name]
        elif name.endswith("_ptr"):
            sig[name] = "*fp32"
        else:
            sig[name] = "i32"
    return sig


# One function: the case table is data, one entry per kernel at the 35B shapes.
def cases() -> list[tuple[str, object, dict[str, str], dict[str, object], int]]:
    """(name, kernel, argument types, constexprs, num_warps); num_stages as the launchers use."""
    bf = "*bf16"
    dr = dict(H=32, HK=16, DK=128, DV=128, C=64, BC=64, BK=128, BV=64)
    attn = dict(
        HQ=16, HKV=2, D=256, BD=256, BM=64, BN=32, HAS_MASK=True, HAS_K2=True, HAS_GATE=True, F32=False
    )
    return [
        (
            "delta_rule._prep",
            delta_rule._prep,
            {"k_ptr": bf, "v_ptr": bf, "cu_ptr": "*i32", "cidx_ptr": "*i32"},
            dr,
            4,
        ),
        (
            "delta_rule._state",
            delta_rule._state,
            {"k_ptr": bf, "cu_ptr": "*i32", "coff_ptr": "*i32"},
            {**dr, "BV": delta_rule.STATE_BV, "HAS_H0": True},
            4,
        ),
        (
            "delta_rule._output",
            delta_rule._output,
            {"q_ptr": bf, "k_ptr": bf, "o_ptr": bf, "cu_ptr": "*i32", "cidx_ptr": "*i32"},
            dr,
            4,
        ),
        (
            "block_gdn._block_gdn",
            block_gdn._block_gdn,
            {"v_ptr": bf, "o_ptr": bf, "ln_b": "fp32", "q_scale": "fp32"},
            dict(H=32, B=32, DK=128, DV=128, BB=32, BK=128, BV=64, F32=False),
            4,
        ),
        (
            "attention._attn split",
            attention._attn,
            {
                "q_ptr": bf,
                "k_ptr": bf,
                "v_ptr": bf,
                "k2_ptr": bf,
                "v2_ptr": bf,
                "m_ptr": "*u8",
                "g_ptr": bf,
                "scale": "fp32",
                "skn": "i64",
                "svn": "i64",
            },
            {**attn, "SPLIT": True},
            8,
        ),
        (
            "attention._attn",
            attention._attn,
            {
                "q_ptr": bf,
                "k_ptr": bf,
                "v_ptr": bf,
                "k2_ptr": bf,
                "v2_ptr": bf,
                "m_ptr": "*u8",
                "g_ptr": bf,
                "o_ptr": bf,
                "scale": "fp32",
                "skn": "i64",
                "svn": "i64",
            },
            {**attn, "SPLIT": False},
            8,
        ),
        (
            "moe._gate_up",
            moe._gate_up,
            {
                "x_ptr": bf,
                "w_ptr": bf,
                "act_ptr": bf,
                "ids_ptr": "*i32",
                "eid_ptr": "*i32",
                "total_ptr": "*i32",
            },
            dict(TOPK=8, BM=16, BN=64, BK=64, F32=False),
            4,
        ),
        (
            "moe._down",
            moe._down,
            {
                "act_ptr": bf,
                "w_ptr": bf,
                "out_ptr": bf,
                "ids_ptr": "*i32",
                "eid_ptr": "*i32",
                "total_ptr": "*i32",
                "wt_ptr": bf,
            },
            dict(BM=64, BN=64, BK=64, F32=False),
            4,
        ),
    ]


def main(arch: int = 90) -> int:
    target = GPUTarget("cuda", arch, 32)
    failed = 0
    for name, fn, types, consts, warps in cases():
        t0 = time.time()
        try:
            src = ASTSource(fn=fn, signature=_sig(fn, types, consts), constexprs=consts)
            stages = STAGES.get(name, 3)
            out = triton.compile(src, target=target, options={"num_warps": warps, "num_stages": stages})
            print(f"ok   {name:32s} sm_{arch} shared={out.metadata.shared:6d} B  {time.time() - t0:.1f}s")
        except Exception as exc:  # report every kernel, then fail
            failed += 1
            print(f"FAIL {name:32s} {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    return failed


if __name__ == "__main__":
    sys.exit(1 if main(int(sys.argv[1]) if len(sys.argv) > 1 else 90) else 0)
