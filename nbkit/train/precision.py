"""Mixed-precision choice for the loop: bf16, fp16 + GradScaler, or fp32 (PyTorch's AMP guidance).

``"auto"``: bf16 autocast on CUDA compute capability >= 8.0 (Ampere and newer; fp32's exponent range,
no loss scaling), fp16 with a ``GradScaler`` on older GPUs (V100, T4), fp32 on CPU. A request the
hardware cannot do falls back with a ``UserWarning``. Weights stay fp32 in every mode.
"""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass

from nbkit.errors import ConfigError

PRECISIONS = ("auto", "bf16", "fp16", "fp32")


@dataclass(frozen=True)
class Precision:
    """The precision a run uses and why: ``name`` (bf16, fp16, fp32), ``device_type`` (as ``torch.autocast``
    expects), ``use_scaler`` (fp16 only) and ``reason`` (one sentence for the notebook).
    """

    name: str
    device_type: str
    use_scaler: bool
    reason: str

    @property
    def dtype(self):
        """The autocast ``torch.dtype`` (None for fp32: no autocast)."""
        import torch

        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.name)

    def autocast(self):
        """Context manager for the forward pass: ``torch.autocast`` or a no-op for fp32."""
        if self.name == "fp32":
            return contextlib.nullcontext()
        import torch

        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def make_scaler(self):
        """A ``torch.amp.GradScaler`` for fp16, else None (bf16/fp32 need no scaling)."""
        if not self.use_scaler:
            return None
        import torch

        return torch.amp.GradScaler(self.device_type)


def choose_precision(requested: str = "auto", device=None, capability: tuple[int, int] | None = None,
                     verbose: bool = True) -> Precision:
    """Pick the precision for ``device`` (default CUDA if available, else CPU) and print it with the reason.

    requested: ``"auto"``, ``"bf16"``, ``"fp16"`` or ``"fp32"``; capability: CUDA compute capability
    ``(major, minor)``, read from the device when None (tests simulate GPUs with it). fp16 on CPU falls
    back to fp32, bf16 below capability 8.0 to fp16 + GradScaler (``UserWarning``); bf16 on CPU is allowed.

    Raises:
        ConfigError: an unknown name.
    """
    import torch

    if requested not in PRECISIONS:
        raise ConfigError(f"precision={requested!r} is unknown; use one of {', '.join(PRECISIONS)}.")
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = device.type
    if dtype == "cuda" and capability is None:
        capability = torch.cuda.get_device_capability(device.index)
    cc = f"{capability[0]}.{capability[1]}" if capability else None
    ampere = capability is not None and tuple(capability) >= (8, 0)

    if requested == "auto":
        if dtype == "cuda" and ampere:
            choice = Precision("bf16", dtype, False, f"CUDA compute capability {cc} >= 8.0 supports bf16")
        elif dtype == "cuda":
            choice = Precision("fp16", dtype, True,
                               f"CUDA compute capability {cc} < 8.0 has no fast bf16; fp16 with a GradScaler")
        else:
            choice = Precision("fp32", dtype, False, f"no CUDA GPU (device {dtype}); fp32")
    elif requested == "fp16" and dtype != "cuda":
        warnings.warn(f"precision='fp16' needs a CUDA GPU; falling back to fp32 on {dtype}. "
                      "Use precision='auto' to silence this.", UserWarning, stacklevel=2)
        choice = Precision("fp32", dtype, False, f"fp16 requested but device is {dtype}; fell back to fp32")
    elif requested == "bf16" and dtype == "cuda" and not ampere:
        warnings.warn(f"precision='bf16' needs compute capability >= 8.0 (this GPU is {cc}); "
                      "falling back to fp16 with a GradScaler. Use precision='auto' to silence this.",
                      UserWarning, stacklevel=2)
        choice = Precision("fp16", dtype, True,
                           f"bf16 requested but compute capability {cc} < 8.0; fell back to fp16 + GradScaler")
    else:
        why = f"{requested}{' with a GradScaler' if requested == 'fp16' else ''} as requested"
        choice = Precision(requested, dtype, requested == "fp16", why + (f" (compute capability {cc})" if cc else ""))
    if verbose:
        print(f"precision: {choice.name} ({choice.reason})")
    return choice


def matmul_precision_name(choice: Precision) -> str:
    """The peak column for MFU: bf16/fp16, or for fp32 runs tf32 when CUDA matmuls may use TF32
    (``torch.get_float32_matmul_precision() != "highest"``), else fp32."""
    import torch

    if choice.name == "fp32" and choice.device_type == "cuda" and torch.get_float32_matmul_precision() != "highest":
        return "tf32"
    return choice.name
