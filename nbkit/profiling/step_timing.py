"""The training step as profiling measures it: :func:`step_loop` (a real ``Loop`` on random token ids),
its timed split (:func:`measure_steps`) and one-knob ablations (:func:`ablation`).

Phases, timed through ``Loop.train_step``'s ``mark`` hook: data (collation, workers, host-to-device
copy), forward (model + the loop's loss), backward, optimizer (unscale, clip, step, zero_grad,
scheduler). On CUDA each mark synchronises, which removes data/GPU overlap: the sum is a slight upper
bound on an unsynchronised step. Timings depend on shapes, not on which tokens or weights.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from nbkit.errors import ConfigError
from nbkit.models.flops import mfu

PHASES = ("data", "forward", "backward", "optimizer")


@dataclass
class StepConfig:
    """One point in the ablation space, the loop :func:`step_loop` builds. ``precision``: ``fp32``, ``bf16``,
    ``fp16`` (with a GradScaler) or ``auto``; ``attn``: ``sdpa`` or ``eager``; ``compile``: with ``compile_backend``;
    ``mlm_head``: ``masked`` (logits only where a label is; a compiled loop runs the full head) or ``all``; ``steps``
    timed after ``warmup`` untimed ones (cuBLAS heuristics, allocator growth, compilation).
    """

    batch_size: int = 16
    seq_len: int = 128
    precision: str = "fp32"
    attn: str = "sdpa"
    num_workers: int = 0
    pin_memory: bool = False
    compile: bool = False
    compile_backend: str = "inductor"
    mlm_head: str = "all"
    grad_accum_steps: int = 1
    lr: float = 1e-4
    steps: int = 5
    warmup: int = 2

    def replace(self, **changes) -> "StepConfig":
        """Copy with some fields changed."""
        return dataclasses.replace(self, **changes)


def ids_tokenizer(vocab_size: int):
    """A ``PreTrainedTokenizerFast`` of ``[PAD] [UNK] [CLS] [SEP] [MASK]`` (ids 0-4) then ``t5 ..``: what the MLM
    collator needs without a trained tokenizer. Raises ``ConfigError`` for ``vocab_size`` below 6.
    """
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    from nbkit.text.tokenizer import SPECIAL_TOKENS

    if vocab_size <= len(SPECIAL_TOKENS):
        raise ConfigError(f"vocab_size={vocab_size}: needs more than the {len(SPECIAL_TOKENS)} special tokens")
    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS)} | {f"t{i}": i for i in range(5, vocab_size)}
    pad, unk, cls, sep, mask = SPECIAL_TOKENS
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(vocab, unk_token=unk)),
                                   pad_token=pad, unk_token=unk, cls_token=cls, sep_token=sep, mask_token=mask)


def step_loop(model, cfg, device=None, tokenizer=None, data=None, seed: int = 0):
    """A :class:`nbkit.train.loop.Loop` for timing ``cfg`` (:class:`StepConfig`): over ``data`` (examples with
    ``input_ids``), default ``batch_size x grad_accum_steps x (warmup + steps)`` random sequences of ``seq_len``
    tokens, collated by ``MLMCollator(tokenizer)`` (default :func:`ids_tokenizer`). Sets ``attn`` and train mode.

    Raises:
        ConfigError: unknown precision or ``mlm_head``, ``mlm_head="masked"`` on a model without
            ``supports_predict_mask``, or ``/dev/shm`` too small for ``num_workers``.
    """
    import torch

    from nbkit.text.mlm import MLMCollator
    from nbkit.train import Loop, TrainConfig
    from nbkit.train.workers import check_worker_shm

    sparse = bool(getattr(model, "supports_predict_mask", False))
    if cfg.mlm_head not in ("all", "masked") or (cfg.mlm_head == "masked" and not sparse):
        raise ConfigError(f"mlm_head={cfg.mlm_head!r}: use 'all', or 'masked' with a model that supports it "
                          "(nbkit.models.mlm_head.SparseHeadBertForMaskedLM, what models.build_mlm_model returns)")
    if cfg.mlm_head == "all" and sparse:
        model.supports_predict_mask = False  # this instance runs the head on every position
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(cfg.attn)
    model.train()
    vocab_size = model.config.vocab_size
    collator = MLMCollator(tokenizer if tokenizer is not None else ids_tokenizer(vocab_size))
    n_steps = cfg.warmup + cfg.steps
    if data is None:   # random ids in [5, V) (0-4: special tokens), one clone per row (a worker gets it alone)
        n = cfg.batch_size * cfg.grad_accum_steps * max(n_steps, 1)
        ids = torch.randint(5, vocab_size, (n, cfg.seq_len), generator=torch.Generator().manual_seed(seed))
        data = [{"input_ids": row.clone()} for row in ids]
    check_worker_shm(data, collator, cfg.batch_size, cfg.num_workers, seed)  # ConfigError, not a hung run
    config = TrainConfig(max_steps=max(n_steps, 1), batch_size=cfg.batch_size, grad_accum_steps=cfg.grad_accum_steps,
                         lr=cfg.lr, precision=cfg.precision, num_workers=cfg.num_workers,
                         pin_memory=cfg.pin_memory, compile=cfg.compile_backend if cfg.compile else False,
                         progress=False, seed=seed)
    return Loop(model, config, data, collate_fn=collator, device=device)


def model_factory(preset: str, vocab_size: int, block_size: int, model_dir=None):
    """``(factory, how)``: ``factory()`` gives a fresh model, loaded from ``model_dir`` (notebook 02's checkpoint)
    when it is a folder, else ``preset`` with random weights (``SparseHeadBertForMaskedLM``, or the GPT-2 / Llama of
    a :data:`nbkit.models.causal.PRESETS` name); ``how`` says which.

    Raises:
        ConfigError: unknown preset.
        CheckpointError: (from ``factory()``) a ``model_dir`` transformers cannot load, with its report.
    """
    from pathlib import Path

    from nbkit.models.bert import build_config
    from nbkit.models.causal import PRESETS as CAUSAL_PRESETS
    from nbkit.models.loading import load_pretrained
    from nbkit.models.mlm_head import SparseHeadBertForMaskedLM

    if model_dir is None and preset in CAUSAL_PRESETS:   # a GPT-2 / Llama preset (causal pretraining's sizing)
        from nbkit.models.causal import build_causal_config, causal_class

        causal = build_causal_config(preset, vocab_size, block_size, pad_token_id=0, bos_token_id=0, eos_token_id=0)
        return lambda: causal_class(causal.model_type)(causal), f"built {preset} from config with random weights"
    if model_dir is not None and Path(model_dir).is_dir():
        from nbkit.models.causal import MODEL_TYPES, causal_class
        from nbkit.models.loading import saved_config

        kind = (saved_config(model_dir) or {}).get("model_type")
        cls = causal_class(kind) if kind in MODEL_TYPES else SparseHeadBertForMaskedLM   # a causal init's own class

        def load():  # quiet (no "Loading weights" bar per ablation row); a bad checkpoint: CheckpointError
            return load_pretrained(cls, model_dir)[0]

        return load, f"checkpoint from notebook 02: {model_dir}"
    config = build_config(preset, vocab_size, max_position_embeddings=block_size)  # ConfigError if unknown
    return (lambda: SparseHeadBertForMaskedLM(config),
            f"no checkpoint found, built BERT-{preset} from config with random weights")


class PhaseTimer:
    """``mark`` for ``Loop.train_step``: ``timer(phase)`` ends the running phase and starts ``phase`` (None: stop);
    ``totals``: seconds per phase. Synchronises CUDA at each call.
    """

    def __init__(self, device):
        self.device, self.totals = device, dict.fromkeys(PHASES, 0.0)
        self._phase, self._t = None, 0.0

    def __call__(self, phase: str | None) -> None:
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)
        now = time.perf_counter()
        if self._phase is not None:
            self.totals[self._phase] += now - self._t
        self._phase, self._t = phase, now


def _compile_counts() -> tuple[int, int]:
    """(graphs compiled, graph breaks) so far; (0, 0) when dynamo never loaded."""
    import sys

    if "torch._dynamo" not in sys.modules:  # importing dynamo costs seconds: only if used
        return 0, 0
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())


def measure_steps(loop, cfg: StepConfig) -> dict:
    """Time ``cfg.warmup + cfg.steps`` calls of ``loop.train_step`` by phase (``grad_accum_steps`` batches each).

    Returns per-step means in seconds (``data_s``, ``forward_s``, ``backward_s``, ``optimizer_s``, ``step_s``),
    ``*_share`` of ``step_s``, ``tokens_per_s`` (padding included), ``flops_per_token``, ``mfu`` (None on CPU or
    unknown GPUs), ``peak_memory_mib`` (CUDA), ``loss``, ``compiled_graphs``, ``recompiles``, ``graph_breaks``
    and the settings as they ran.
    """
    import torch

    device = loop.device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    graphs0, breaks0 = _compile_counts()
    graphs_after_first = None
    totals = dict.fromkeys(PHASES, 0.0)
    tokens = flops = loss_sum = n_label = 0
    stream = loop.batch_stream()
    loop.model.train()
    for i in range(cfg.warmup + cfg.steps):
        timer = PhaseTimer(device)
        timer("data")
        out = loop.train_step([next(stream) for _ in range(loop.config.grad_accum_steps)], mark=timer)
        timer(None)
        if i == 0:
            graphs_after_first = _compile_counts()[0]
        if i >= cfg.warmup:
            for phase in PHASES:
                totals[phase] += timer.totals[phase]
            tokens, flops = tokens + out["tokens"], flops + out["flops"]
            loss_sum, n_label = loss_sum + out["loss_sum"], n_label + out["n_label"]
    graphs, breaks = _compile_counts()
    n = max(cfg.steps, 1)
    res = {f"{p}_s": totals[p] / n for p in PHASES}
    res["step_s"] = sum(totals.values()) / n
    for p in PHASES:
        res[f"{p}_share"] = res[f"{p}_s"] / res["step_s"] if res["step_s"] else 0.0
    res["tokens_per_s"] = tokens / sum(totals.values()) if tokens else 0.0
    res["flops_per_token"] = flops / tokens if tokens and flops else None
    res["peak_tflops"] = loop.peak_tflops                        # the loop's own MFU denominator
    res["mfu"] = mfu(res["tokens_per_s"], res["flops_per_token"], loop.peak_tflops) if res["flops_per_token"] else None
    res["peak_memory_mib"] = torch.cuda.max_memory_allocated(device) / 2 ** 20 if device.type == "cuda" else None
    res["loss"] = loss_sum / n_label if n_label else None
    res["compiled_graphs"] = graphs - graphs0
    res["recompiles"] = graphs - (graphs_after_first if graphs_after_first is not None else graphs)
    res["graph_breaks"] = breaks - breaks0
    res.update(device=device.type, precision=loop.precision.name, mlm_head="masked" if loop.sparse_head else "all",
               **{k: getattr(cfg, k) for k in ("batch_size", "seq_len", "attn", "num_workers", "compile",
                                               "grad_accum_steps")})
    return res


def ablation(model_factory, base: StepConfig, factor: str, values, device=None, tokenizer=None,
             data=None) -> list[dict]:
    """:func:`measure_steps` of ``base`` with ``factor`` set to each of ``values``, each on a fresh ``model_factory()``
    model; rows add ``factor``, ``value`` and ``speedup`` (tokens/s over the first row's).

    Raises:
        ConfigError: ``factor`` is not a :class:`StepConfig` field, or what :func:`step_loop` raises.
    """
    import gc

    import torch

    if factor not in {f.name for f in dataclasses.fields(StepConfig)}:
        raise ConfigError(f"unknown factor {factor!r}; use a StepConfig field such as num_workers, batch_size, "
                          "precision, attn or compile")
    rows = []
    for value in values:
        cfg = base.replace(**{factor: value})
        if factor == "compile" and value:
            torch._dynamo.reset()  # count this variant's compilations only
        loop = step_loop(model_factory(), cfg, device=device, tokenizer=tokenizer, data=data)
        row = {**measure_steps(loop, cfg), "factor": factor, "value": value}
        ref = rows[0]["tokens_per_s"] if rows else None
        rows.append({**row, "speedup": row["tokens_per_s"] / ref if ref else 1.0})
        del loop
        gc.collect()
    return rows


def gpu_utilization_during(fn, device_index: int = 0, interval_s: float = 0.05, nvml=None):
    """``(fn(), telemetry)``: NVML sampled every ``interval_s`` s while ``fn`` runs (no CUDA context), at least once.
    ``telemetry``: ``gpu_util_pct`` (mean ``utilization.gpu``, %) and ``memory_used_pct`` (max ``memory.used`` /
    ``memory.total``, %) of GPU ``device_index``; None without NVML data."""
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
    if sampler.count == 0:   # fn ended before the thread's first read (a short fn, a busy machine): read once now
        sampler.sample_once()
    snaps = [d for d in sampler.snapshot() if d is not None]
    util = [d.util_gpu_pct for d in snaps if d.util_gpu_pct is not None]
    mem = [100.0 * d.mem_used_mib / d.mem_total_mib for d in snaps if d.mem_used_mib is not None and d.mem_total_mib]
    if not util:
        return result, None
    return result, {"gpu_util_pct": sum(util) / len(util), "memory_used_pct": max(mem) if mem else None}
