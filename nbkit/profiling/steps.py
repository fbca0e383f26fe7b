"""Where a training step's time goes, and what each knob changes, measured.

:func:`measure_steps` runs a small explicit MLM training step on any Hugging
Face masked-LM model and times four phases separately:

- data: ``next(iterator)`` on the DataLoader plus the host-to-device copy,
- forward: model forward + cross-entropy loss,
- backward: ``loss.backward()``,
- optimizer: ``optimizer.step()`` + ``zero_grad``.

On CUDA each phase ends with ``torch.cuda.synchronize()`` (otherwise the
asynchronous launch returns at once and the time lands in the next phase);
this removes the overlap of data loading with GPU work, so the sum is a
slight upper bound on an unsynchronised step. On CPU wall time is exact.

The loss is the loop's (``nbkit.train.loop``): cross-entropy summed over label
tokens (``labels != -100``) divided by their count.

:func:`ablation` re-measures with one knob changed at a time (``num_workers``,
batch size, precision, attention implementation, ``torch.compile``) and
reports tokens/s, MFU and the speedup over the first value.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from nbkit.errors import ConfigError
from nbkit.models.flops import bert_batch_flops, bert_flops_per_token, mfu, peak_tflops
from nbkit.profiling.stepdata import MaskingCollator, RandomMLMDataset, model_factory, random_mlm_loader

__all__ = ["PHASES", "StepConfig", "measure_steps", "ablation", "to_device", "gpu_utilization_during",
           "MaskingCollator", "RandomMLMDataset", "model_factory", "random_mlm_loader"]

PHASES = ("data", "forward", "backward", "optimizer")


@dataclass
class StepConfig:
    """One point in the ablation space (what :func:`measure_steps` runs).

    ``precision``: ``fp32``, ``bf16`` (autocast, no scaler) or ``fp16``
    (autocast + GradScaler, CUDA only). ``attn``: ``sdpa`` or ``eager``
    (``model.set_attn_implementation``). ``compile``: wrap the model in
    ``torch.compile(backend=compile_backend)``. ``steps`` are timed after
    ``warmup`` untimed steps (the first steps pay for cuBLAS heuristics,
    allocator growth and compilation). ``mlm_head``: ``all`` (the head and
    softmax on every position, as ``BertForMaskedLM`` does) or ``masked`` (only
    the positions with a label, as the nbkit loop does in eager mode; needs a
    model with ``supports_predict_mask``, see :mod:`nbkit.models.mlm_head`).
    """

    batch_size: int = 16
    seq_len: int = 128
    precision: str = "fp32"
    attn: str = "sdpa"
    num_workers: int = 0
    pin_memory: bool = False
    compile: bool = False
    compile_backend: str = "inductor"
    fused_optimizer: bool = True
    mlm_head: str = "all"
    lr: float = 1e-4
    steps: int = 5
    warmup: int = 2

    def replace(self, **changes) -> "StepConfig":
        """Copy with some fields changed."""
        return dataclasses.replace(self, **changes)


def to_device(batch: dict, device) -> dict:
    """Copy a batch to ``device`` (``non_blocking``), dropping an all-ones attention mask.

    A batch without padding needs no mask; checking on the host before the
    copy costs no GPU sync, and without a mask transformers' SDPA path can use
    the flash kernel (with one, it must build a 4-D mask, and under
    ``torch.compile`` it cannot prove the mask is all ones).
    """
    mask = batch.get("attention_mask")
    if mask is not None and mask.device.type == "cpu" and bool(mask.all()):
        batch = {k: v for k, v in batch.items() if k != "attention_mask"}
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _autocast(device, precision: str):
    import contextlib

    import torch

    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    return torch.autocast(device_type=device.type, dtype=dtype)


def _compile_counts() -> tuple[int, int]:
    """(graphs compiled, graph breaks) so far; (0, 0) when dynamo never loaded."""
    import sys

    if "torch._dynamo" not in sys.modules:  # importing dynamo costs seconds: only if used
        return 0, 0
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())


def measure_steps(model, loader, cfg: StepConfig, device=None, optimizer=None) -> dict:
    """Run ``cfg.warmup + cfg.steps`` training steps and time each phase.

    ``model``: a Hugging Face masked-LM (``logits`` of shape ``(B, T, V)``),
    moved to ``device``. ``loader`` yields dicts with ``input_ids``,
    ``attention_mask`` and ``labels`` of shape ``(B, T)`` (see :func:`to_device`
    for the mask); it must hold at least
    ``warmup + steps`` batches. Returns a dict with per-step means in seconds
    (``data_s``, ``forward_s``, ``backward_s``, ``optimizer_s``, ``step_s``),
    ``*_share`` (fraction of ``step_s``), ``tokens_per_s`` (input tokens
    ``B*T`` per second, padding included since it costs the same compute),
    ``flops_per_token`` (:func:`nbkit.models.flops.bert_batch_flops` per token, MLM,
    training; with ``mlm_head="masked"`` the head counts for scored tokens only), ``mfu`` (None on CPU or unknown GPUs), ``peak_memory_mib``
    (CUDA only), ``compiled_graphs`` and ``recompiles`` (graphs compiled after
    the first step: shape or guard changes), ``graph_breaks``.

    Raises:
        ConfigError: unknown precision, fp16 on CPU, or a loader that runs out.
    """
    import torch

    from nbkit.models.mlm_head import forward_logits
    from nbkit.profiling.microbench import device_name, resolve_device

    if cfg.precision not in ("fp32", "bf16", "fp16"):
        raise ConfigError(f"precision {cfg.precision!r}: use fp32, bf16 or fp16")
    masked_head = cfg.mlm_head == "masked"
    if cfg.mlm_head not in ("all", "masked") or (masked_head and not getattr(model, "supports_predict_mask", False)):
        raise ConfigError(f"mlm_head={cfg.mlm_head!r}: use 'all', or 'masked' with a model that supports it "
                          "(nbkit.models.mlm_head.SparseHeadBertForMaskedLM, what modeling.build_mlm_model returns)")
    device = resolve_device(device)
    if cfg.precision == "fp16" and device.type != "cuda":
        raise ConfigError("fp16 training needs a CUDA GPU; use bf16 or fp32 on CPU")
    model.to(device).train()
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(cfg.attn)
    run = torch.compile(model, backend=cfg.compile_backend) if cfg.compile else model
    if optimizer is None:
        fused = cfg.fused_optimizer and device.type == "cuda"
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, fused=fused or None)
    scaler = torch.amp.GradScaler("cuda") if cfg.precision == "fp16" else None
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    graphs0, breaks0 = _compile_counts()
    graphs_after_first = None
    totals = dict.fromkeys(PHASES, 0.0)
    tokens = head_rows = 0
    it = iter(loader)
    for i in range(cfg.warmup + cfg.steps):
        t0 = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            raise ConfigError(f"the loader ran out after {i} batches; give it at least "
                              f"warmup + steps = {cfg.warmup + cfg.steps}") from None
        batch = to_device(batch, device)
        _sync(device)
        t1 = time.perf_counter()
        labels = batch["labels"]                                  # (B, T)
        with _autocast(device, cfg.precision):
            logits, scored = forward_logits(run, {"input_ids": batch["input_ids"],
                                                  "attention_mask": batch.get("attention_mask")},
                                            labels, sparse=masked_head)  # (B, T, V) or (N, V)
        loss = torch.nn.functional.cross_entropy(
            logits.float().reshape(-1, logits.size(-1)), scored.reshape(-1),  # (B*T or N, V)
            ignore_index=-100, reduction="sum") / (labels != -100).sum().clamp(min=1)
        _sync(device)
        t2 = time.perf_counter()
        (scaler.scale(loss) if scaler else loss).backward()
        _sync(device)
        t3 = time.perf_counter()
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        _sync(device)
        t4 = time.perf_counter()
        if i == 0:
            graphs_after_first = _compile_counts()[0]
        if i >= cfg.warmup:
            for phase, dt in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                totals[phase] += dt
            tokens += batch["input_ids"].numel()
            head_rows += scored.numel()        # rows the MLM head ran on: B*T, or the scored ones
    graphs, breaks = _compile_counts()
    n = max(cfg.steps, 1)
    out = {f"{p}_s": totals[p] / n for p in PHASES}
    out["step_s"] = sum(totals.values()) / n
    for p in PHASES:
        out[f"{p}_share"] = out[f"{p}_s"] / out["step_s"] if out["step_s"] else 0.0
    out["tokens_per_s"] = tokens / sum(totals.values()) if tokens else 0.0
    cfg_model = getattr(model, "config", None)
    if cfg_model is None:
        out["flops_per_token"] = None
    elif tokens:  # what ran: the head on every position, or on the scored ones (mlm_head="masked")
        out["flops_per_token"] = bert_batch_flops(cfg_model, tokens, cfg.seq_len, head_rows) / tokens
    else:         # nothing timed (steps=0): the full-head figure, as before
        out["flops_per_token"] = bert_flops_per_token(cfg_model, cfg.seq_len)
    peak = peak_tflops(device_name(device), cfg.precision) if device.type == "cuda" else None
    out["peak_tflops"] = peak
    out["mfu"] = mfu(out["tokens_per_s"], out["flops_per_token"], peak) if out["flops_per_token"] else None
    out["peak_memory_mib"] = (torch.cuda.max_memory_allocated(device) / 2 ** 20
                              if device.type == "cuda" else None)
    out["compiled_graphs"] = graphs - graphs0
    out["recompiles"] = graphs - (graphs_after_first if graphs_after_first is not None else graphs)
    out["graph_breaks"] = breaks - breaks0
    out.update(device=device.type, **{k: getattr(cfg, k) for k in
               ("batch_size", "seq_len", "precision", "attn", "num_workers", "compile", "mlm_head")})
    return out


def ablation(model_factory, base: StepConfig, factor: str, values, device=None,
             loader_factory=None, vocab_size: int | None = None) -> list[dict]:
    """Measure ``base`` with ``factor`` set to each of ``values`` in turn.

    ``model_factory()`` returns a fresh model (each variant gets its own, so
    optimizer state and compilation do not leak between rows).
    ``loader_factory(cfg, n_batches)`` returns a DataLoader for a config; by
    default :func:`random_mlm_loader` with ``vocab_size`` (or the model's).
    Rows carry the :func:`measure_steps` fields plus ``factor``, ``value`` and
    ``speedup`` (tokens/s over the first value's; 1.0 for the first).

    Raises:
        ConfigError: ``factor`` is not a :class:`StepConfig` field.
    """
    import gc

    import torch

    if factor not in {f.name for f in dataclasses.fields(StepConfig)}:
        raise ConfigError(f"unknown factor {factor!r}; use a StepConfig field such as "
                          "num_workers, batch_size, precision, attn or compile")
    rows = []
    for value in values:
        cfg = base.replace(**{factor: value})
        model = model_factory()
        vs = vocab_size or model.config.vocab_size
        n_batches = cfg.warmup + cfg.steps
        loader = (loader_factory or (lambda c, n: random_mlm_loader(vs, c, n)))(cfg, n_batches)
        if factor == "compile" and value:
            torch._dynamo.reset()  # count this variant's compilations only
        row = measure_steps(model, loader, cfg, device=device)
        row.update(factor=factor, value=value)
        ref = rows[0]["tokens_per_s"] if rows else None
        row["speedup"] = row["tokens_per_s"] / ref if ref else 1.0
        rows.append(row)
        del model, loader
        gc.collect()
    return rows


def gpu_utilization_during(fn, device_index: int = 0, interval_s: float = 0.05, nvml=None):
    """Run ``fn()`` while sampling NVML; return ``(fn(), telemetry or None)``.

    Uses nbkit's own telemetry (:class:`nbkit.gpu.nvml.Nvml` read by a
    :class:`nbkit.gpu.sampler.Sampler` thread every ``interval_s`` seconds), so no
    CUDA context is created and every NVML failure is a named state.
    ``telemetry``: ``gpu_util_pct`` (mean of NVML's utilisation.gpu over the
    run, % of time a kernel ran) and ``memory_used_pct`` (max of
    memory.used / memory.total, %) of GPU ``device_index``. None when NVML is
    unavailable (CPU machines, no permission) or reported nothing.
    """
    from nbkit.gpu.nvml import Nvml
    from nbkit.gpu.sampler import Sampler

    nv = nvml if nvml is not None else Nvml(pcie=False)
    if nv.state.name != "ok":
        return fn(), None

    def read():
        return next((d for d in nv.sample() if d.index == device_index and not d.mig), None)

    sampler = Sampler(read, interval=interval_s, maxlen=100_000).start()
    try:
        result = fn()
    finally:
        sampler.stop()
    snaps = [d for d in sampler.snapshot() if d is not None]
    util = [d.util_gpu_pct for d in snaps if d.util_gpu_pct is not None]
    mem = [100.0 * d.mem_used_mib / d.mem_total_mib for d in snaps
           if d.mem_used_mib is not None and d.mem_total_mib]
    if not util:
        return result, None
    return result, {"gpu_util_pct": sum(util) / len(util), "memory_used_pct": max(mem) if mem else None}
