"""From measurements to a verdict: what bounds training, and what to change. Pure functions over plain dicts
(replayable in tests, re-diagnosable from a results file).

Inputs: ``step`` (a :func:`~nbkit.profiling.step_timing.measure_steps` row), ``ops``
(:func:`~nbkit.profiling.profiler.op_stats`), ``telemetry`` (``gpu_util_pct``: NVML ``utilization.gpu``,
%; ``memory_used_pct``) and ``ablations`` (:func:`~nbkit.profiling.step_timing.ablation` rows). The verdict
is the first rule that fires; changes are ranked by measured speedup, then rules of thumb.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# Data loading above this share of the step = input-bound. TensorFlow's profiler (input-pipeline analysis) calls a
# step "highly input-bound" above 20 % of step time spent waiting for input; we use the same line.
INPUT_BOUND_SHARE = 0.20
# MFU at or above this = the tensor cores are the limit. PaLM (Chowdhery et al. 2022, table 3) reports 46 % for a
# tuned large model; 40 % is nbkit's target for BERT-base on an H100/H200.
COMPUTE_BOUND_MFU = 0.40
# Mean CUDA kernel shorter than this = launch overhead dominates: launching a kernel costs ~2-5 µs of CPU time
# (NVIDIA, "Getting started with CUDA Graphs", 2019), so kernels this short leave the GPU waiting on the CPU.
LAUNCH_KERNEL_US = 10.0
# NVML utilisation below this with little data time = the GPU is idle between kernels (launch gaps). Heuristic: a
# well-fed training loop shows > 90 %.
LOW_UTIL_PCT = 60.0
# Bandwidth-bound ops (elementwise, norms, softmax, copies) above this share of operator time = memory-bound.
# Heuristic: in a healthy BERT-base step the matmuls take most of the time, elementwise work well under half.
MEMORY_BOUND_SHARE = 0.40
# Speedups below this are within the run-to-run noise of short measurements.
MIN_GAIN = 1.03
# Factors that can only shorten one phase of the step. By Amdahl's law a change that removes a phase with share s of
# the step speeds it up at most 1 / (1 - s); a measured gain above that (times MIN_GAIN) is noise, not the change.
PHASE_OF_FACTOR = {"num_workers": "data", "pin_memory": "data"}
MAX_CHANGES = 3

# Rule-of-thumb changes per verdict: (factor it maps to or None, action, needs a CUDA GPU).
SUGGESTIONS = {
    "input-bound": [("num_workers", "more DataLoader workers (num_workers=4) with pin_memory=True", False),
                    (None, "pre-tokenise and pre-block the corpus once (datasets.map, saved to disk)", False)],
    "launch-overhead-bound": [("batch_size", "a larger batch (fewer, larger kernels)", False),
                              ("compile", "torch.compile the model (fuses small kernels)", False),
                              (None, "CUDA graphs (torch.compile mode='reduce-overhead')", True)],
    "memory-bound": [("compile", "torch.compile the model (fuses elementwise ops)", False),
                     ("attn", "SDPA attention (fused softmax, no T x T matrix in memory)", False),
                     ("precision", "bf16 autocast (halves bytes moved)", False)],
    "compute-bound": [("precision", "bf16 autocast if still in fp32", False),
                      (None, "TF32 matmuls for what stays fp32 (torch.backends.cuda.matmul.allow_tf32)", True),
                      (None, "fused AdamW (torch.optim.AdamW(fused=True))", True)],
    "mixed": [("compile", "torch.compile the model", False), ("batch_size", "a larger batch", False)],
}


@dataclass
class Change:
    """One recommended change; ``speedup`` is measured (tokens/s ratio) or None."""

    action: str
    factor: str | None = None
    speedup: float | None = None


@dataclass
class Verdict:
    """What bounds the step, the evidence, and the changes ranked by effect."""

    bound: str
    evidence: list[str] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)

    def text(self) -> str:
        """A short human-readable report (verdict, evidence, ranked changes)."""
        lines = [f"Verdict: {self.bound}"]
        lines += [f"  - {e}" for e in self.evidence]
        lines.append("Changes, most effective first:")
        for i, c in enumerate(self.changes, 1):
            gain = f"measured x{c.speedup:.2f} tokens/s" if c.speedup else "not measured here"
            lines.append(f"  {i}. {c.action} ({gain})")
        if not self.changes:
            lines.append("  (none measured above noise)")
        return "\n".join(lines)


def classify(step: dict, ops: dict | None = None, telemetry: dict | None = None) -> tuple[str, list[str]]:
    """``(bound, evidence)`` from the first rule that fires: data share >= :data:`INPUT_BOUND_SHARE` (input),
    MFU >= :data:`COMPUTE_BOUND_MFU` (compute), mean kernel < :data:`LAUNCH_KERNEL_US` µs or utilisation
    < :data:`LOW_UTIL_PCT` % (launch overhead), bandwidth-bound op share >= :data:`MEMORY_BOUND_SHARE`
    (memory), matmuls >= half of operator time (compute), else ``mixed``.
    """
    ops, telemetry = ops or {}, telemetry or {}
    data_share, mfu, util = step.get("data_share") or 0.0, step.get("mfu"), telemetry.get("gpu_util_pct")
    kernel_us, mem_share, mm_share = ops.get("mean_kernel_us"), ops.get("memory_bound_share"), ops.get("matmul_share")
    if data_share >= INPUT_BOUND_SHARE:
        return "input-bound", [f"data loading takes {data_share:.0%} of the step (>= {INPUT_BOUND_SHARE:.0%})"]
    if mfu is not None and mfu >= COMPUTE_BOUND_MFU:
        return "compute-bound", [f"MFU {mfu:.0%} (>= {COMPUTE_BOUND_MFU:.0%}): tensor cores are busy"]
    if kernel_us is not None and kernel_us < LAUNCH_KERNEL_US:
        ev = [f"mean kernel {kernel_us:.1f} µs (< {LAUNCH_KERNEL_US:.0f} µs, near launch cost)"]
        if ops.get("kernels_per_step"):
            ev.append(f"{ops['kernels_per_step']:.0f} kernel launches per step")
        return "launch-overhead-bound", ev
    if util is not None and util < LOW_UTIL_PCT:
        return "launch-overhead-bound", [f"GPU busy only {util:.0f}% of the time (< {LOW_UTIL_PCT:.0f}%) "
                                         f"while data loading is {data_share:.0%} of the step"]
    if mem_share is not None and mem_share >= MEMORY_BOUND_SHARE:
        return "memory-bound", [f"elementwise/norm/softmax/copy ops take {mem_share:.0%} of operator time "
                                f"(>= {MEMORY_BOUND_SHARE:.0%})"]
    if mm_share is not None and mm_share >= 0.5:
        ev = [f"matmuls take {mm_share:.0%} of operator time"]
        if mfu is not None:
            ev.append(f"MFU {mfu:.0%}: below {COMPUTE_BOUND_MFU:.0%}, so the matmuls themselves are slow")
        return "compute-bound", ev
    return "mixed", ["no single rule fired: time is spread over data, matmuls and other ops"]


def amdahl_limit(share: float) -> float:
    """Largest speedup from removing a phase that takes ``share`` (0-1) of the step: 1 / (1 - share)."""
    return float("inf") if share >= 1.0 else 1.0 / (1.0 - max(share, 0.0))


def implausible_gain(factor: str, gain: float, step: dict) -> str | None:
    """Why ``gain`` for ``factor`` cannot be real (above :func:`amdahl_limit` of its phase's ``<phase>_share``
    in ``step``, times :data:`MIN_GAIN`), or None when it can.
    """
    phase = PHASE_OF_FACTOR.get(factor)
    share = step.get(f"{phase}_share") if phase else None
    if share is None:
        return None
    limit = amdahl_limit(share)
    return None if gain <= limit * MIN_GAIN else (
        f"{factor}: measured x{gain:.2f}, but {phase} loading is {share:.1%} of the step, so it can give at most "
        f"x{limit:.2f} (Amdahl's law): run-to-run noise, not the change")


def noise_ratio(ablations: list[dict], current: dict) -> float:
    """Run-to-run spread (max / min tokens/s) of the configuration diagnosed: the ablation rows that re-measure
    ``current`` plus ``current`` itself; 1.0 with fewer than two.
    """
    rates = [r["tokens_per_s"] for r in ablations if r.get("tokens_per_s") and r["factor"] in current
             and r["value"] == current[r["factor"]]]
    if current.get("tokens_per_s"):
        rates.append(current["tokens_per_s"])
    return max(rates) / min(rates) if len(rates) >= 2 else 1.0


def measured_changes(ablations: list[dict], current: dict | None = None,
                     rejected: list[str] | None = None) -> list[Change]:
    """The best value per ablated factor as :class:`Change` s, by speedup over the row matching ``current``
    (else the first). Gains below :data:`MIN_GAIN`, within :func:`noise_ratio` or beyond
    :func:`implausible_gain` are dropped, the reasons of the last two appended to ``rejected``.
    """
    current = current or {}
    noise = noise_ratio(ablations, current)
    by_factor: dict[str, list[dict]] = {}
    for row in ablations:
        by_factor.setdefault(row["factor"], []).append(row)
    changes = []
    for factor, rows in by_factor.items():
        rows = [r for r in rows if r.get("tokens_per_s")]
        if not rows:
            continue
        ref = next((r for r in rows if factor in current and r["value"] == current[factor]), rows[0])
        best = max(rows, key=lambda r: r["tokens_per_s"])
        gain = best["tokens_per_s"] / ref["tokens_per_s"]
        if gain < MIN_GAIN or best is ref:
            continue
        why = implausible_gain(factor, gain, current)
        if why is None and gain <= noise:
            why = (f"{_action(factor, best['value'])}: measured x{gain:.2f}, but the unchanged configuration itself "
                   f"varied x{noise:.2f} between measurements: within noise")
        if why:
            if rejected is not None:
                rejected.append(why)
            continue
        changes.append(Change(_action(factor, best["value"]), factor, gain))
    changes.sort(key=lambda c: c.speedup, reverse=True)
    return changes


def _action(factor: str, value) -> str:
    return {
        "num_workers": f"DataLoader num_workers={value} (with pin_memory=True)",
        "batch_size": f"batch size {value} (scale the learning rate, or keep the effective batch with gradient "
                      "accumulation)",
        "precision": f"{value} autocast",
        "attn": f"attention implementation {value!r} (model.set_attn_implementation)",
        "compile": "torch.compile the model" if value else "run without torch.compile",
        "pin_memory": f"pin_memory={value}",
        "mlm_head": ("the MLM head on masked positions only (nbkit.models.mlm_head; the nbkit loop does this in "
                     "eager mode)" if value == "masked" else f"mlm_head={value!r}"),
    }.get(factor, f"{factor}={value}")


def diagnose(step: dict, ops: dict | None = None, telemetry: dict | None = None, ablations: list[dict] | None = None,
             max_changes: int = MAX_CHANGES) -> Verdict:
    """:class:`Verdict` with at most ``max_changes`` changes: measured ones by speedup, then the verdict's
    rules of thumb for factors not measured (on CPU none needing CUDA or reduced precision).
    """
    bound, evidence = classify(step, ops, telemetry)
    changes = measured_changes(ablations or [], step, rejected=evidence)
    tried = {r["factor"] for r in ablations or []}
    for factor, action, cuda_only in SUGGESTIONS[bound]:
        if factor is not None and factor in tried:
            continue
        if cuda_only and step.get("device") == "cpu":
            continue  # TF32, fused AdamW, CUDA graphs: nothing to gain on a CPU
        if factor == "precision" and (step.get("precision") in ("bf16", "fp16") or step.get("device") == "cpu"):
            continue  # already reduced precision, or a CPU without bf16 matmul units
        changes.append(Change(action, factor, None))
    return Verdict(bound, evidence, changes[:max_changes])
