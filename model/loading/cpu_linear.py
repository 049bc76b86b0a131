"""Dense bf16 linear layers on CPU at decoding widths: lm_head (a 35B checkpoint's largest read per
token, 1 GB) and the routers, through the AVX-512 BF16 kernel (kernels/cpu/native.py, 1-6 rows of x)
where it is built, else the numba matrix-vector kernel (kernels/cpu/gemv.py, one row). The module
stays an nn.Linear with the same parameter, so state dicts and tied weights are as before; any
other input (more rows, another dtype or device) takes torch's own path."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

MIN_OUT = 256  # smaller matrices: the kernel's start-up costs more than it saves


class CpuGemvLinear(nn.Linear):
    def forward(self, x: Tensor) -> Tensor:
        from clover.kernels.cpu import gemv, native

        if self.bias is None and not torch.is_grad_enabled():
            if native.bf16_takes(x, self.weight) and native.bf16_available():
                return native.bf16_linear(x, self.weight)
            if gemv.takes(x, self.weight):
                return gemv.linear(x, self.weight)
        return F.linear(x, self.weight, self.bias)


def use_cpu_kernels(model: nn.Module) -> int:
    """Swap the dense bf16 CPU linears with at least MIN_OUT outputs for `CpuGemvLinear` (when the
    CPU kernels are available); returns how many."""
    from clover.kernels import cpu

    if not cpu.available():
        return 0
    swapped = 0
    for module in model.modules():
        if (
            type(module) is nn.Linear
            and module.bias is None
            and module.weight.device.type == "cpu"
            and module.weight.dtype == torch.bfloat16
            and module.out_features >= MIN_OUT
        ):
            module.__class__ = CpuGemvLinear
            swapped += 1
    return swapped
