"""From measurements to a verdict: what bounds training, and what to change.

Pure functions over plain dicts, so recorded measurements can be replayed in
tests and a results file can be re-diagnosed later:

- ``step``: a row from :func:`nbkit.profiling.step_timing.measure_steps`
  (``data_share``, ``mfu``, ``precision``, ``device``, config fields),
- ``ops``: :func:`nbkit.profiling.profiler.op_stats` (``kernels_per_step``,
  ``mean_kernel_us``, ``memory_bound_share``, ``matmul_share``),
- ``telemetry``: GPU samples taken during the steps (``gpu_util_pct``: NVML
  ``utilization.gpu``, the % of time at least one kernel ran;
  ``memory_used_pct``),
- ``ablations``: rows of :func:`nbkit.profiling.step_timing.ablation` (any factors).

The verdict is the first rule that fires, in the order below; changes are
ranked by the speedup measured in the ablation tables (gains larger than
Amdahl's law allows for the phase a change acts on are dropped as noise), then
rule-of-thumb suggestions for the verdict that were not measured.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# Data loading above this share of the step = input-bound. TensorFlow's
# profiler (input-pipeline analysis) calls a step "highly input-bound" above
# 20 % of step time spent waiting for input; we use the same line.
INPUT_BOUND_SHARE = 0.20
# MFU at or above this = the tensor cores are the limit. PaLM (Chowdhery et
# al. 2022, table 3) reports 46 % for a tuned large model; 40 % is nbkit's
# target for BERT-base on an H100/H200.
COMPUTE_BOUND_MFU = 0.40
# Mean CUDA kernel shorter than this = launch overhead dominates: launching a
# kernel costs ~2-5 µs of CPU time (NVIDIA, "Getting started with CUDA
# Graphs", 2019), so kernels this short leave the GPU waiting on the CPU.
LAUNCH_KERNEL_US = 10.0
# NVML utilisation below this with little data time = the GPU is idle between
# kernels (launch gaps). Heuristic: a well-fed training loop shows > 90 %.
LOW_UTIL_PCT = 60.0
# Bandwidth-bound ops (elementwise, norms, softmax, copies) above this share
# of operator time = memory-bound. Heuristic: in a healthy BERT-base step the
# matmuls take most of the time, elementwise work well under half.
MEMORY_BOUND_SHARE = 0.40
# Speedups below this are within the run-to-run noise of short measurements.
MIN_GAIN = 1.03
# Factors that can only shorten one phase of the step. By Amdahl's law a change
# that removes a phase with share s of the step speeds it up at most 1 / (1 - s);
# a measured gain above that (times MIN_GAIN) is noise, not the change.
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
    "mixed": [("compile", "torch.compile the model", False),
              ("batch_size", "a larger batch", False)],
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
    """Return ``(bound, evidence)`` from the first rule that fires.

    Order: input (data share >= :data:`INPUT_BOUND_SHARE`), compute (MFU >=
    :data:`COMPUTE_BOUND_MFU`), launch overhead (mean kernel <
    :data:`LAUNCH_KERNEL_US`, or NVML utilisation < :data:`LOW_UTIL_PCT`),
    memory (bandwidth-bound op share >= :data:`MEMORY_BOUND_SHARE`), compute
    again when matmuls take most of the operator time, else ``mixed``.
    """
    ops, telemetry = ops or {}, telemetry or {}
    data_share = step.get("data_share") or 0.0
    mfu = step.get("mfu")
    util = telemetry.get("gpu_util_pct")
    kernel_us = ops.get("mean_kernel_us")
    mem_share = ops.get("memory_bound_share")
    mm_share = ops.get("matmul_share")
    if data_share >= INPUT_BOUND_SHARE:
        return "input-bound", [f"data loading takes {data_share:.0%} of the step "
                               f"(>= {INPUT_BOUND_SHARE:.0%})"]
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
        return "memory-bound", [f"elementwise/norm/softmax/copy ops take {mem_share:.0%} of operator "
                                f"time (>= {MEMORY_BOUND_SHARE:.0%})"]
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
    """Why a measured ``gain`` for ``factor`` cannot be real, or None when it can.

    Only for factors in :data:`PHASE_OF_FACTOR` with that phase's ``<phase>_share``
    in ``step``: the gain must not exceed :func:`amdahl_limit` of the share
    (times :data:`MIN_GAIN` for noise).
    """
    phase = PHASE_OF_FACTOR.get(factor)
    share = step.get(f"{phase}_share") if phase else None
    if share is None:
        return None
    limit = amdahl_limit(share)
    if gain <= limit * MIN_GAIN:
        return None
    return (f"{factor}: measured x{gain:.2f}, but {phase} loading is {share:.1%} of the step, so it can "
            f"give at most x{limit:.2f} (Amdahl's law): run-to-run noise, not the change")


def noise_ratio(ablations: list[dict], current: dict) -> float:
    """Run-to-run spread of the configuration being diagnosed: max / min tokens/s (1.0 = no estimate).

    Every ablation table re-measures ``current`` in the row whose ``value``
    equals ``current[factor]``; with ``current["tokens_per_s"]`` those are
    repeated measurements of one configuration, so their spread is the noise
    any claimed gain has to beat.
    """
    rates = [r["tokens_per_s"] for r in ablations
             if r.get("tokens_per_s") and r["factor"] in current and r["value"] == current[r["factor"]]]
    if current.get("tokens_per_s"):
        rates.append(current["tokens_per_s"])
    return max(rates) / min(rates) if len(rates) >= 2 else 1.0


def measured_changes(ablations: list[dict], current: dict | None = None,
                     rejected: list[str] | None = None) -> list[Change]:
    """Best measured value per factor, as :class:`Change` s ranked by speedup.

    For each ``factor`` in ``ablations`` the reference row is the one whose
    ``value`` equals ``current[factor]`` (the configuration being diagnosed),
    else the table's first row. Changes below :data:`MIN_GAIN` are dropped, as
    are gains within the measured noise (:func:`noise_ratio`: the same
    configuration measured several times varied that much) and gains larger
    than the factor's phase allows (:func:`implausible_gain`, judged against
    ``current``'s phase shares); the reason for each of the last two is
    appended to ``rejected`` when given.
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
            why = (f"{_action(factor, best['value'])}: measured x{gain:.2f}, but the unchanged "
                   f"configuration itself varied x{noise:.2f} between measurements: within noise")
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
        "batch_size": f"batch size {value} (scale the learning rate, or keep the effective batch "
                      "with gradient accumulation)",
        "precision": f"{value} autocast",
        "attn": f"attention implementation {value!r} (model.set_attn_implementation)",
        "compile": "torch.compile the model" if value else "run without torch.compile",
        "pin_memory": f"pin_memory={value}",
        "mlm_head": ("the MLM head on masked positions only (nbkit.models.mlm_head; the nbkit loop does this "
                     "in eager mode)" if value == "masked" else f"mlm_head={value!r}"),
    }.get(factor, f"{factor}={value}")


def diagnose(step: dict, ops: dict | None = None, telemetry: dict | None = None,
             ablations: list[dict] | None = None, max_changes: int = MAX_CHANGES) -> Verdict:
    """Verdict plus at most ``max_changes`` changes: measured ones first, by speedup.

    Unmeasured suggestions for the verdict follow, skipping factors the
    ablations already measured (a measured "no gain" beats a rule of thumb).
    Measured gains larger than their phase allows are left out, with the
    reason added to the evidence.
    On CPU the launch-overhead and MFU rules cannot fire (no kernels, no peak).
    """
    bound, evidence = classify(step, ops, telemetry)
    measured = measured_changes(ablations or [], step, rejected=evidence)
    tried = {r["factor"] for r in ablations or []}
    changes = list(measured)
    for factor, action, cuda_only in SUGGESTIONS[bound]:
        if factor is not None and factor in tried:
            continue
        if cuda_only and step.get("device") == "cpu":
            continue  # TF32, fused AdamW, CUDA graphs: nothing to gain on a CPU
        if factor == "precision" and (step.get("precision") in ("bf16", "fp16")
                                      or step.get("device") == "cpu"):
            continue  # already reduced precision, or a CPU without bf16 matmul units
        changes.append(Change(action, factor, None))
    return Verdict(bound, evidence, changes[:max_changes])
