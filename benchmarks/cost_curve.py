"""One forward's cost against its width, split by component, and what a token's weights cost to read
(used by benchmarks/realsize.py).

- `bandwidth`: a STREAM-like copy (bytes read + written per second) and a read-only sum.
- `layer_traffic` / `Depth`: the bytes a forward reads (counted off the loaded modules, whatever their
  form) and the measured layers scaled to the full model's depth, layer type by layer type.
- `cost_curve`: after a prompt, one forward of W tokens in both shapes the decoders use: causal (a
  B = 1 step at W = 1, a verify check of W tokens) and a denoising round of a block of W (every
  position masked but the first: a block's first round). The total is the best of `repeats` plain
  runs; a further run with forward hooks splits it into attention, GDN, router, routed experts,
  shared expert, lm_head and the rest, and counts the distinct experts each layer touched.
"""

from __future__ import annotations

import time
from collections import defaultdict

import torch
from torch import nn

from clover.model.config import FULL_ATTENTION
from clover.model.layers.moe import Experts
from clover.model.loading.quantized import PackedWeight, QuantExperts

GB = 1e9
COMPONENTS = ("attention", "gdn", "router", "experts", "shared", "lm_head", "rest")
_CLOCK = [time.perf_counter]


def use_cpu_clock(cpu: bool) -> None:
    """Time by the process's CPU time instead of the wall clock: with one thread on a shared machine,
    what a quiet core would take (the time other processes hold the core is not counted)."""
    _CLOCK[0] = time.process_time if cpu else time.perf_counter


def now() -> float:
    return _CLOCK[0]()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bandwidth(device: torch.device, mb: int = 512, repeats: int = 5) -> dict[str, float]:
    """Copy (read + write bytes / s) and read (sum) bandwidth, best of `repeats`."""
    n = mb * (1 << 20) // 4
    a, b = torch.ones(n, device=device), torch.empty(n, device=device)
    copy = read = float("inf")
    for _ in range(repeats):
        _sync(device)
        t0 = now()
        b.copy_(a)
        _sync(device)
        copy = min(copy, now() - t0)
        t0 = now()
        a.sum()
        _sync(device)
        read = min(read, now() - t0)
    return {"copy_gb_s": 2 * n * 4 / copy / GB, "read_gb_s": n * 4 / read / GB}


# ---------------------------------------------------------------------- weight bytes


def matrix_bytes(module: nn.Module) -> int:
    """Bytes of the matrices a forward of `module` reads, whatever their form."""
    total = 0
    for m in module.modules():
        if isinstance(m, PackedWeight):
            total += m.nbytes()
        elif isinstance(m, (nn.Linear, nn.Conv1d)):
            total += m.weight.numel() * m.weight.element_size()
    return total


def expert_bytes(experts: nn.Module) -> int:
    """Bytes of one routed expert (gate, up and down)."""
    if isinstance(experts, QuantExperts):
        return (experts.gate_up.nbytes() + experts.down.nbytes()) // experts.gate_up.shape[0]
    assert isinstance(experts, Experts)
    p = experts.gate_up_proj
    return (p[0].numel() + experts.down_proj[0].numel()) * p.element_size()


def layer_traffic(layer: nn.Module, experts_touched: float) -> int:
    """Bytes one forward of `layer` reads when it touches `experts_touched` distinct experts."""
    mlp = layer.mlp
    dense = matrix_bytes(layer.mixer) + matrix_bytes(mlp.gate) + matrix_bytes(mlp.shared_expert)
    dense += matrix_bytes(mlp.shared_expert_gate)
    return int(dense + experts_touched * expert_bytes(mlp.experts))


def resident_bytes(module: nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))


class Depth:
    """The measured layers -> the full model's layers, per layer type (every 4th is attention)."""

    def __init__(self, model, full_layers: int) -> None:
        cfg = model.config
        self.types = list(cfg.layer_types)
        interval = cfg.full_attention_interval
        full = [FULL_ATTENTION if (i + 1) % interval == 0 else "linear_attention" for i in range(full_layers)]
        missing = set(full) - set(self.types)
        if missing:
            raise ValueError(
                f"cannot extrapolate: no {', '.join(sorted(missing))} layer among the measured ones"
            )
        self.scale = {t: full.count(t) / self.types.count(t) for t in set(self.types)}
        self.full_layers = full_layers

    def layers(self, per_layer: list[float]) -> float:
        """The full model's sum of a per-layer figure measured on these layers."""
        return sum(v * self.scale[t] for v, t in zip(per_layer, self.types, strict=True))


# ---------------------------------------------------------------------- the curve


class Split:
    """Forward hooks timing each component (synchronising a GPU at each edge) and counting the
    distinct experts each layer touches."""

    def __init__(self, model) -> None:
        self.model, self.handles, self.dev = model, [], model.device
        self.per_layer_parts: list[dict[str, float]] = [defaultdict(float) for _ in model.model.layers]
        self.lm_head = 0.0
        self.touched: list[int] = []
        self._starts: dict[int, float] = {}
        self._restore: list = []
        self.excluded = 0.0  # seconds the split itself spent inside the hooked forward

    def _watch(self, module: nn.Module, on_done) -> None:
        def pre(mod, args):
            _sync(self.dev)
            self._starts[id(mod)] = now()

        def post(mod, args, out):
            _sync(self.dev)
            on_done(now() - self._starts.pop(id(mod)), args)

        self.handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]

    def __enter__(self) -> Split:
        for layer, parts in zip(self.model.model.layers, self.per_layer_parts, strict=True):
            kind = "attention" if layer.layer_type == FULL_ATTENTION else "gdn"

            def add(name: str, dt: float, parts=parts) -> None:
                parts[name] += dt

            def experts(dt: float, args, add=add) -> None:
                add("experts", dt)
                self.touched.append(int(args[1].unique().numel()))

            self._watch(layer, lambda dt, a, add=add: add("layer", dt))
            self._watch(layer.mixer, lambda dt, a, add=add, kind=kind: add(kind, dt))
            self._watch(layer.mlp, lambda dt, a, add=add: add("mlp", dt))
            self._watch(layer.mlp.experts, experts)
            self._watch_routed(layer.mlp, add)
            self._watch(layer.mlp.shared_expert, lambda dt, a, add=add: add("shared", dt))
            self._watch(layer.mlp.shared_expert_gate, lambda dt, a, add=add: add("shared", dt))
        self._watch(self.model.lm_head, lambda dt, a: setattr(self, "lm_head", self.lm_head + dt))
        return self

    def _watch_routed(self, mlp: nn.Module, add) -> None:
        """Quantized experts on CPU route and run in one kernel call (`forward_routed`, not
        `forward`): that call counts as experts (its routing included; the router's own part is then
        ~0), and the experts it touched are counted off a torch routing outside the timed span."""
        experts = mlp.experts
        routed = getattr(experts, "forward_routed", None)
        if routed is None:
            return

        def timed(x, gate, top, renorm):
            _sync(self.dev)
            t0 = now()
            y = routed(x, gate, top, renorm)
            _sync(self.dev)
            if y is not None:
                add("experts", now() - t0)
                t1 = now()
                ids = (x.float() @ gate.float().t()).topk(top, dim=-1).indices
                self.touched.append(int(ids.unique().numel()))
                counting = now() - t1  # not the model's: out of the MLP's and the layer's time
                add("mlp", -counting)
                add("layer", -counting)
                self.excluded += counting
            return y

        experts.forward_routed = timed
        self._restore.append(lambda: experts.__dict__.pop("forward_routed", None))

    def __exit__(self, *exc) -> None:
        for h in self.handles:
            h.remove()
        for undo in self._restore:
            undo()

    def parts(self, total: float, depth: Depth | None = None) -> dict[str, float]:
        """Seconds per component (each layer's scaled by `depth`); router = the MoE block less its
        experts; rest = what no hook saw (embedding, norms, glue), counted once."""

        def over_layers(name: str) -> float:
            values = [p.get(name, 0.0) for p in self.per_layer_parts]
            return depth.layers(values) if depth else sum(values)

        out = {k: over_layers(k) for k in ("attention", "gdn", "experts", "shared")}
        out["router"] = over_layers("mlp") - out["experts"] - out["shared"]
        out["lm_head"] = self.lm_head
        outside = (
            total - self.excluded - sum(p.get("layer", 0.0) for p in self.per_layer_parts) - self.lm_head
        )
        layer_rest = over_layers("layer") - sum(over_layers(k) for k in ("attention", "gdn", "mlp"))
        out["rest"] = outside + layer_rest
        return {k: out[k] for k in COMPONENTS}


def one_forward(model, cache, kind: str, width: int, gen: torch.Generator) -> None:
    ids = torch.randint(0, model.config.vocab_size, (1, width), generator=gen).to(model.device)
    ids[ids == model.config.mask_token_id] = 0
    if kind == "causal":  # a B = 1 step (the causal pass and its logits) or a verify check of W tokens
        model.lm_head(model.peek(ids, cache))
    else:  # a block's first denoising round: every position masked but the first
        block = torch.full((1, width), model.config.mask_token_id, device=model.device)
        block[0, 0] = ids[0, 0]
        model.denoise(block, cache)


def cost_curve(
    model, prompt: list[int], widths: list[int], repeats: int, depth: Depth, log=print
) -> list[dict]:
    """Rows of {kind, width, seconds, seconds_full, parts, parts_full, experts_touched, break_even_tpf}."""
    cache = model.new_cache(1)
    model.prefill(torch.tensor([prompt], device=model.device), cache)
    gen, dev = torch.Generator().manual_seed(0), model.device
    rows = []
    for kind in ("causal", "denoise"):
        for w in widths:
            if kind == "denoise" and w == 1:
                continue  # B = 1 takes its logits from the committed prefix: no forward
            one_forward(model, cache, kind, w, gen)  # warm-up
            total = float("inf")
            for _ in range(repeats):
                _sync(dev)
                t0 = now()
                one_forward(model, cache, kind, w, gen)
                _sync(dev)
                total = min(total, now() - t0)
            with Split(model) as split:
                t0 = now()
                one_forward(model, cache, kind, w, gen)
                _sync(dev)
                hooked = now() - t0
            share = total / (hooked - split.excluded)  # the hooks' own cost taken out pro rata
            parts = {k: v * share for k, v in split.parts(hooked).items()}
            full = {k: v * share for k, v in split.parts(hooked, depth).items()}
            rows.append(
                {
                    "kind": kind,
                    "width": w,
                    "seconds": total,
                    "seconds_full": sum(full.values()),
                    "parts": parts,
                    "parts_full": full,
                    "experts_touched": sum(split.touched) / max(len(split.touched), 1),
                }
            )
            log(_line(rows[-1]))
    base = next(r for r in rows if r["kind"] == "causal" and r["width"] == 1)
    for r in rows:
        r["break_even_tpf"] = r["seconds_full"] / base["seconds_full"]
    return rows


def _line(r: dict) -> str:
    p = r["parts_full"]
    split = " ".join(f"{k} {p[k] * 1e3:.0f}" for k in COMPONENTS)
    return (
        f"  {r['kind']:8} W={r['width']:<3} {r['seconds'] * 1e3:9.1f} ms measured, {r['seconds_full'] * 1e3:9.1f} ms "
        f"full depth [{split}]; experts touched per layer {r['experts_touched']:.1f}"
    )
