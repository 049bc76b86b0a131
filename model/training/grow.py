"""Deepen a trained Clover without changing what it computes, so training goes on with more layers.

After each run of `period` layers (one full_attention_interval: a pattern of linear-attention layers
and one attention layer) a copy of that run is inserted whose output projections (attention o_proj,
GDN out_proj, the experts' and the shared expert's down projections) are zero. A pre-norm residual
block whose outputs are zero is the identity, so the deeper network gives the same logits as the
original; the copies start from trained weights and learn from there (the zeroed projections get
gradients at once).

    python -m clover.model.training.grow --from model/weights --to run/deep
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from safetensors.torch import load_file, save_file

ZEROED = (
    "linear_attn.out_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.experts.down_proj",
    "mlp.shared_expert.down_proj.weight",
)


def deepen(config: dict, state: dict, period: int) -> tuple[dict, dict]:
    """(config, weights) with an identity-initialised copy after each run of `period` layers."""
    n = config["num_hidden_layers"]
    if period < 1 or n % period:
        raise ValueError(f"{n} layers do not split into runs of {period}")
    order: list[tuple[int, bool]] = []  # new layer -> (source layer, outputs zeroed)
    for start in range(0, n, period):
        run = range(start, start + period)
        order += [(i, False) for i in run] + [(i, True) for i in run]
    out = {k: v for k, v in state.items() if ".layers." not in k}
    for new, (old, zero) in enumerate(order):
        prefix = f"model.layers.{old}."
        for k, v in state.items():
            if k.startswith(prefix):
                rest = k[len(prefix) :]
                t = v.clone()
                if zero and rest in ZEROED:
                    t.zero_()
                out[f"model.layers.{new}.{rest}"] = t
    grown = dict(config, num_hidden_layers=len(order))
    if isinstance(config.get("layer_types"), list):
        grown["layer_types"] = [config["layer_types"][i] for i, _ in order]
    return grown, out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m clover.model.training.grow", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--from",
        dest="src",
        type=Path,
        required=True,
        help="checkpoint directory (config.json, model.safetensors)",
    )
    p.add_argument("--to", dest="dst", type=Path, required=True, help="where to write the deeper checkpoint")
    p.add_argument("--period", type=int, default=0, help="layers per copied run (0: full_attention_interval)")
    a = p.parse_args(argv)
    try:
        config = json.loads((a.src / "config.json").read_text(encoding="utf-8"))
        state = load_file(a.src / "model.safetensors")
        grown, weights = deepen(config, state, a.period or int(config.get("full_attention_interval") or 1))
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 1
    a.dst.mkdir(parents=True, exist_ok=True)
    save_file(weights, a.dst / "model.safetensors", metadata={"format": "pt"})
    (a.dst / "config.json").write_text(json.dumps(grown, indent=2) + "\n", encoding="utf-8")
    for extra in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (a.src / extra).is_file():
            shutil.copy(a.src / extra, a.dst / extra)
    print(f"{config['num_hidden_layers']} -> {grown['num_hidden_layers']} layers: {a.dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
