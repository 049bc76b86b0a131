"""clover.engines: the vLLM plugin's registration and weight mapping, checked without vLLM (and
without a GPU); the engine itself, when an environment with vLLM is at hand, serves the embedded
Clover and must give our greedy tokens."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from clover.engines.weights import clover_to_qwen3_next
from clover.model.config import tiny
from clover.model.loading.load import load_checkpoint
from clover.model.modeling import CloverForCausalLM

IDS = torch.tensor([[5, 9, 3, 17, 2, 44, 8]])
EMBEDDED = Path(__file__).resolve().parents[1] / "model" / "weights"


def test_vllm_plugin_entry_point_is_declared():
    found = {e.name: e.value for e in entry_points(group="vllm.general_plugins")}
    assert found.get("clover") == "clover.engines.vllm_plugin:register"


def test_plugin_import_needs_no_engine():
    code = (
        "import sys, clover.engines.vllm_plugin as p, clover.engines.weights; "
        "print(callable(p.register), [m for m in ('vllm', 'transformers') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True []"


def _hf_ordering(mixed_qkvz, mixed_ba, nk, nv, dk, dv):
    """transformers' Qwen3NextGatedDeltaNet.fix_query_key_value_ordering, restated for the test."""
    r = nv // nk
    qkvz = mixed_qkvz.view(*mixed_qkvz.shape[:-1], nk, 2 * dk + 2 * r * dv)
    ba = mixed_ba.view(*mixed_ba.shape[:-1], nk, 2 * r)
    q, k, v, z = torch.split(qkvz, [dk, dk, r * dv, r * dv], dim=-1)
    b, a = torch.split(ba, [r, r], dim=-1)
    lead = mixed_qkvz.shape[:-1]
    flat = [x.reshape(*lead, -1) for x in (q, k, v, z, b, a)]
    return torch.cat(flat[:3], -1), flat[3], flat[4], flat[5]


def test_weight_mapping_is_a_qwen3_next_checkpoint(tmp_path):
    torch.manual_seed(0)
    model = CloverForCausalLM(tiny(linear_num_value_heads=6, linear_num_key_heads=2)).eval()
    cfg = model.config
    mapped = dict(clover_to_qwen3_next(model.state_dict().items(), cfg))
    assert not any(
        n.endswith(("block_logit_scale", "memory_logit", "block_size_calibration")) for n in mapped
    )
    assert not any(".in_proj_qkv." in n or ".in_proj_b." in n for n in mapped)
    assert f"model.layers.0.mlp.experts.{cfg.num_experts - 1}.down_proj.weight" in mapped
    # the engine reads the fused projections the Qwen3-Next way and gets exactly our projections
    gdn = model.model.layers[0].linear_attn
    x = torch.randn(3, cfg.hidden_size)
    qkv, z, b, a = _hf_ordering(
        x @ mapped["model.layers.0.linear_attn.in_proj_qkvz.weight"].T,
        x @ mapped["model.layers.0.linear_attn.in_proj_ba.weight"].T,
        cfg.linear_num_key_heads,
        cfg.linear_num_value_heads,
        cfg.linear_key_head_dim,
        cfg.linear_value_head_dim,
    )
    with torch.no_grad():
        for got, want in (
            (qkv, gdn.in_proj_qkv(x)),
            (z, gdn.in_proj_z(x)),
            (b, gdn.in_proj_b(x)),
            (a, gdn.in_proj_a(x)),
        ):
            torch.testing.assert_close(got, want)
    # and the mapped names and layout load back (as a Qwen3-Next checkpoint) into the same network
    save_file({n: t.contiguous() for n, t in mapped.items()}, str(tmp_path / "model.safetensors"))
    cfg.save(tmp_path / "config.json")
    net = load_checkpoint(tmp_path).model
    with torch.no_grad():
        torch.testing.assert_close(net(IDS), model(IDS))


def test_hf_config_reads_a_clover_config():
    pytest.importorskip("transformers", minversion="5.0")
    from clover.engines.hf_config import CloverHFConfig

    d = tiny(eos_token_ids=[1, 2]).to_dict()
    cfg = CloverHFConfig(**{k: v for k, v in d.items() if k not in ("model_type", "architectures")})
    assert cfg.rope_parameters["rope_theta"] == d["rope_theta"]
    assert cfg.rope_parameters["partial_rotary_factor"] == d["partial_rotary_factor"]
    assert cfg.layer_types == d["layer_types"] and cfg.eos_token_id == [1, 2]
    assert cfg.mamba_ssm_dtype == "float32" and cfg.decoder_sparse_step == 1 and not cfg.mlp_only_layers


def _vllm_python() -> str | None:
    """A Python with vLLM: this one, or CLOVER_VLLM_PYTHON (vLLM is too big for the project's venv)."""
    try:
        import vllm  # noqa: F401

        return sys.executable
    except ImportError:
        pass
    other = os.environ.get("CLOVER_VLLM_PYTHON")
    return other if other and shutil.which(other) else None


def clover_logits_along(directory: Path, prompt: list[int], tokens: list[int]) -> torch.Tensor:
    """Our fp32 logits for each of `tokens` given everything before it (teacher forcing)."""
    model = load_checkpoint(directory, dtype=torch.float32).model
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens]))[0]
    return logits[len(prompt) - 1 : -1].float()


# bf16 kernels (the engine's) and fp32 (ours) may order two logits that are this close either way
NEAR_TIE = 0.05


PROMPT = [
    1,
    633,
    212,
    8002,
    311,
    1123,
    328,
    1389,
    80,
    529,
    39,
    1038,
    2438,
    25,
    351,
    22,
    2060,
    289,
    360,
    351,
    27,
    2,
    212,
    1,
    717,
    212,
]  # a ChatML user turn asking to fix a bug, then the assistant's header


@pytest.mark.slow
def test_vllm_serves_clover_with_our_greedy_tokens():
    python = _vllm_python()
    if python is None:
        pytest.skip("no vLLM here (install it, or point CLOVER_VLLM_PYTHON at a Python that has it)")
    n = 24
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [
        python,
        "-m",
        "clover.engines.vllm_greedy",
        str(EMBEDDED),
        "--max-tokens",
        str(n),
        "--prompt-ids",
        ",".join(map(str, PROMPT)),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    result = [
        line for line in out.stdout.splitlines() if line.startswith('{"tokens"')
    ]  # vLLM logs to stdout too
    assert result, out.stdout[-2000:]
    engine = json.loads(result[-1])["tokens"]
    assert len(engine) == n
    # every engine token is our greedy choice on the engine's own path, or within a near tie of it
    logits = clover_logits_along(EMBEDDED, PROMPT, engine)
    best = logits.max(dim=-1)
    gaps = best.values - logits[torch.arange(n), torch.tensor(engine)]
    exact = sum(int(i) == t for i, t in zip(best.indices, engine, strict=True))
    assert float(gaps.max()) <= NEAR_TIE, (engine, best.indices.tolist(), gaps.tolist())
    assert exact >= n - 2, (engine, best.indices.tolist())
