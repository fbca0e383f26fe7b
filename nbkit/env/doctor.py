"""Environment report (``nbkit doctor``, notebook 00): every layer from OS to Hugging Face, OK/WARN/FAIL + fix.

Works when ``import torch`` fails (a FAIL line); creates no CUDA context unless ``cuda=True``. The checks
are in :mod:`nbkit.env.layer_checks`; benchmarks are :mod:`nbkit.profiling.microbench`'s.
"""
from __future__ import annotations

import html
import time
from dataclasses import asdict
from typing import Any

from nbkit import jsonio
from nbkit.env.layer_checks import ALL_CHECKS, FAIL, OK, WARN, Check, Context
from nbkit.gpu.nvml import Nvml


class Report:
    """The list of :class:`Check` lines with text, JSON and HTML views."""

    def __init__(self, checks: list[Check]):
        self.checks = checks

    @property
    def ok(self) -> bool:
        """True when no line is FAIL."""
        return not any(c.status == FAIL for c in self.checks)

    @property
    def problems(self) -> list[Check]:
        """The FAIL lines first, then the WARN lines."""
        return [c for c in self.checks if c.status == FAIL] + [c for c in self.checks if c.status == WARN]

    def counts(self) -> dict[str, int]:
        """``{"OK": n, "WARN": n, "FAIL": n}``."""
        return {s: sum(c.status == s for c in self.checks) for s in (OK, WARN, FAIL)}

    def text(self) -> str:
        """Aligned plain-text table, one line per check, the fix indented below."""
        w = max(len(c.name) for c in self.checks)
        lines = []
        for c in self.checks:
            lines.append(f"{c.status:<4}  {c.name:<{w}}  {c.value}")
            if c.fix:
                lines.append(f"{'':<4}  {'':<{w}}  fix: {c.fix}")
        n = self.counts()
        lines.append(f"{n[OK]} OK, {n[WARN]} WARN, {n[FAIL]} FAIL")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"ok": bool, "counts": {...}, "checks": [{layer, name, status, value, fix}]}``."""
        return {"ok": self.ok, "counts": self.counts(), "checks": [asdict(c) for c in self.checks]}

    def _repr_html_(self) -> str:
        colour = {OK: "#1a7f37", WARN: "#9a6700", FAIL: "#cf222e"}
        rows = "".join(
            f"<tr><td style='color:{colour[c.status]};font-weight:bold'>{c.status}</td>"
            f"<td>{html.escape(c.layer)}</td><td>{html.escape(c.name)}</td>"
            f"<td style='text-align:left'>{html.escape(c.value)}</td>"
            f"<td style='text-align:left'>{html.escape(c.fix)}</td></tr>" for c in self.checks)
        return f"<table><tr><th>status</th><th>layer</th><th>check</th><th>value</th><th>fix</th></tr>{rows}</table>"

    def __repr__(self) -> str:
        n = self.counts()
        return f"Report({n[OK]} OK, {n[WARN]} WARN, {n[FAIL]} FAIL)"


def report(cuda: bool = False, nvml: Nvml | None = None, env: dict[str, str] | None = None,
           dev_root: str = "/dev") -> Report:
    """Run every check and return the :class:`Report`; never raises (a crashing check becomes a WARN line).

    ``cuda``: also create a CUDA context and launch one kernel; ``nvml``: an :class:`~nbkit.gpu.nvml.Nvml`
    (a test double); ``env``: the variables judged (default ``os.environ``); ``dev_root``: where device nodes are.
    """
    ctx = Context(nvml=nvml if nvml is not None else Nvml(), cuda=cuda, dev_root=dev_root)
    if env is not None:
        ctx.env = dict(env)
    try:
        import torch

        ctx.torch = torch
    except Exception as exc:  # ImportError, OSError (missing libcudart), anything
        ctx.torch_error = exc
    checks: list[Check] = []
    for fn in ALL_CHECKS:
        try:
            checks.extend(fn(ctx))
        except Exception as exc:  # a check bug must not hide the other lines
            checks.append(Check("internal", fn.__name__, WARN, f"check crashed: {exc!r}",
                                "report this as an nbkit bug"))
    return Report(checks)


def doctor_main(as_json: bool = False, cuda: bool = False) -> int:
    """``nbkit doctor [--json] [--cuda]``: print the report; exit code 1 if any line FAILs."""
    r = report(cuda=cuda)
    print(jsonio.dumps(r.to_dict(), indent=2) if as_json else r.text())
    return 0 if r.ok else 1


def keep_busy(device: str = "cpu", seconds: float = 3.0, n: int = 512) -> dict[str, Any]:
    """Back-to-back ``(n, n) @ (n, n)`` matmuls on ``device`` for ``seconds`` s, so the live monitor visibly moves.

    Returns ``{"device", "matmuls", "seconds", "gflops"}`` (GFLOP/s over the period, 2 n³ FLOPs per matmul:
    a load's rate, not a benchmark's). On CUDA this creates a context.
    """
    import torch

    a = torch.randn(n, n, device=device)  # (n, n)
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(8):
            a = (a @ a).clamp_(-1, 1)  # (n, n); clamp keeps values finite
        if a.is_cuda:
            torch.cuda.synchronize(a.device)
        done += 8
    elapsed = time.perf_counter() - t0
    return {"device": str(device), "matmuls": done, "seconds": elapsed, "gflops": 2 * n**3 * done / elapsed / 1e9}
