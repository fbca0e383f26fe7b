"""Mixed-precision choice for the loop: bf16, fp16 + GradScaler, or fp32.

``choose_precision("auto")`` follows the usual rule (PyTorch AMP docs,
"Automatic Mixed Precision"; NVIDIA's Ampere whitepaper for bf16 support):

- CUDA with compute capability >= 8.0 (Ampere and newer: A100, A10, L4,
  H100, RTX 30xx/40xx) -> ``bf16`` autocast. bf16 has fp32's exponent range,
  so no loss scaling is needed.
- older CUDA GPUs (V100 = 7.0, T4 = 7.5) -> ``fp16`` autocast with a
  ``torch.amp.GradScaler`` (fp16 overflows/underflows without loss scaling).
- CPU (or MPS) -> ``fp32``.

An explicit request the hardware cannot do (``fp16`` on CPU, ``bf16`` on a
pre-Ampere GPU) falls back with a ``UserWarning`` instead of crashing a guided
notebook. A GradScaler is created only for fp16. Model weights stay fp32 in
every mode: autocast only lowers the precision of matmuls/activations.
"""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass

from nbkit.errors import ConfigError

PRECISIONS = ("auto", "bf16", "fp16", "fp32")


@dataclass(frozen=True)
class Precision:
    """The precision a run uses and why.

    name: ``"bf16"``, ``"fp16"`` or ``"fp32"``.
    device_type: ``"cuda"``, ``"cpu"``, ... (what ``torch.autocast`` expects).
    use_scaler: True only for fp16 (dynamic loss scaling).
    reason: one sentence for the notebook, e.g. "bf16: CUDA compute capability 9.0 >= 8.0".
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
    """Pick the precision for ``device`` and print the reason.

    requested: ``"auto"``, ``"bf16"``, ``"fp16"`` or ``"fp32"``.
    device: a ``torch.device`` or string; default CUDA if available, else CPU.
    capability: CUDA compute capability ``(major, minor)``; read from the device
        when None (tests pass it to simulate GPUs they do not have).
    verbose: print ``"precision: <name> (<reason>)"``.

    Raises ``nbkit.errors.ConfigError`` for an unknown name. Warns
    (``UserWarning``) and falls back when the hardware cannot do the request:
    fp16 on CPU -> fp32; bf16 on a GPU below compute capability 8.0 -> fp16
    with a GradScaler. bf16 on CPU is allowed (CPU autocast supports it).
    """
    import torch

    if requested not in PRECISIONS:
        raise ConfigError(f"precision={requested!r} is unknown; use one of {', '.join(PRECISIONS)}.")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
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
        why = {"bf16": "bf16 as requested", "fp16": "fp16 with a GradScaler as requested",
               "fp32": "fp32 as requested"}[requested]
        choice = Precision(requested, dtype, requested == "fp16", why + (f" (compute capability {cc})" if cc else ""))
    if verbose:
        print(f"precision: {choice.name} ({choice.reason})")
    return choice


def matmul_precision_name(choice: Precision) -> str:
    """Name of the peak-throughput column for MFU: bf16/fp16, or tf32/fp32 for fp32 runs.

    fp32 matmuls run on TF32 tensor cores when
    ``torch.get_float32_matmul_precision()`` is not ``"highest"``, so the tf32
    peak applies then.
    """
    if choice.name != "fp32":
        return choice.name
    import torch

    if choice.device_type == "cuda" and torch.get_float32_matmul_precision() != "highest":
        return "tf32"
    return "fp32"
