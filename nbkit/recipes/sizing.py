"""Size an MLM pretraining run for a corpus of ``n_tokens`` tokens on a device: a pure function.

The rules, each with its source, so the printed plan says *why*:

- **Model**: the largest preset with at most ``n_tokens / 20`` parameters (about 20 training
  tokens per parameter: Hoffmann et al. 2022, "Chinchilla"), never below ``mini`` on a GPU
  (the ``gpu`` preset's model: it left the unigram plateau on ~1 M tokens of reviews, while
  BERT-base stayed on it; docs/pretraining.md) and never above ``narrow`` on a CPU (the ``cpu``
  preset's: wider models run at ~2,900 tokens/s on 2 cores, docs/pretraining.md).
- **Tokens to train on**: at least the ``gpu`` recipe's 49 M (3,000 steps x 128 x 128, where
  its fine-tuning gain passed two points), at most 40 passes over the corpus (BERT's own
  ~40 epochs, Devlin et al. 2019) and at most what the device reads in ``budget_s`` at the
  measured speed of that model (``TOKENS_PER_S``): a big corpus is read about once.
- **Steps** = tokens / (batch x block x world_size); **lr**: 1e-3 up to ``mini`` (the gpu and cpu presets),
  5e-4 for ``small``, 1e-4 with 10 % warm-up for ``base`` (its plateau fix, nbkit.evaluate.probes).
"""
from __future__ import annotations

import math

#: parameters of each preset with an 8,000-token vocabulary (models.count_parameters), smallest first
PARAMS = {"tiny": 0.6e6, "narrow": 1.9e6, "mini": 5.3e6, "small": 17.0e6, "base": 92.0e6}
#: measured training speed (tokens/s) at block 128: H200 bf16 (bench/results/gpu_h200_2026-11-30:
#: mini 609 k in notebook 02, base 441,722 in gpu_check's bert_eager), 2-core CPU fp32 (docs/pretraining.md:
#: narrow 10,900). NOT measured, interpolated: small on the H200 and tiny on the CPU.
TOKENS_PER_S = {"cuda": {"mini": 609_000, "small": 520_000, "base": 441_722},
                "cpu": {"tiny": 20_000, "narrow": 10_900}}
MIN_TOKENS = 49_152_000   # the gpu recipe: 3,000 steps x 128 blocks x 128 tokens
MAX_PASSES = 40.0
DEFAULT_BUDGET_S = {"cuda": 4 * 3600.0, "cpu": 15 * 60.0}


def size_run(n_tokens: int, device: str = "cuda", block_size: int = 128, budget_s: float | None = None,
             max_passes: float | None = None, world_size: int = 1) -> dict:
    """A pretraining plan for ``n_tokens`` training tokens on ``device`` (``"cuda"`` or ``"cpu"``).

    Args:
        n_tokens: tokens in the store's training split (``StoreMLMDataset.n_tokens``).
        device: ``"cuda"`` (any ``"cuda:N"``) or ``"cpu"``; speeds are the measured ones above.
        block_size: tokens per block, ``[CLS]``/``[SEP]`` included.
        budget_s: wall-clock budget for the steps (s); default 4 h on a GPU, 15 min on a CPU.
        max_passes: the run's own cap on passes over the corpus (``PretrainConfig.max_passes``), applied
            when below :data:`MAX_PASSES`, so the plan states the steps the loop will really run.
        world_size: processes training together (torchrun): each optimizer step reads
            ``batch_size * block_size * world_size`` tokens, and the budget assumes each process runs
            at the measured per-device speed (linear scaling, an upper bound).

    Returns:
        ``{"model", "batch_size", "grad_accum_steps", "block_size", "max_steps", "lr",
        "warmup_ratio", "eval_every", "train_tokens", "passes", "estimated_s", "reasons"}``
        (``reasons``: one sentence per choice, for the notebook to print).

    Raises:
        ValueError: ``n_tokens`` < 1, ``block_size`` < 3, ``max_passes`` <= 0, ``world_size`` < 1 or an
            unknown ``device``.
    """
    kind = "cuda" if str(device).startswith("cuda") else str(device)
    if kind not in TOKENS_PER_S:
        raise ValueError(f"device={device!r}: size_run knows 'cuda' and 'cpu'")
    if n_tokens < 1 or block_size < 3:
        raise ValueError(f"need n_tokens >= 1 and block_size >= 3, got {n_tokens} and {block_size}")
    if world_size < 1:
        raise ValueError(f"world_size={world_size} must be >= 1")
    if max_passes is not None and not max_passes > 0:
        raise ValueError(f"max_passes={max_passes} must be > 0 (None: no cap of the run's own)")
    allowed = list(TOKENS_PER_S[kind])                                # smallest first
    fits = [m for m in allowed if PARAMS[m] <= n_tokens / 20]
    model = fits[-1] if fits else allowed[0]
    reasons = [f"model {model} ({PARAMS[model] / 1e6:.1f} M parameters): "
               + (f"the largest {kind} preset with <= n_tokens/20 = {n_tokens / 20 / 1e6:.2f} M parameters "
                  "(~20 tokens per parameter, Chinchilla)" if fits else
                  f"the smallest {kind} preset; the corpus ({n_tokens:,} tokens) is too small for 20 tokens per "
                  "parameter even there, so it is read several times")]
    batch = 128 if kind == "cuda" else 64
    speed = TOKENS_PER_S[kind][model] * world_size
    budget = DEFAULT_BUDGET_S[kind] if budget_s is None else float(budget_s)
    tokens = max(MIN_TOKENS, n_tokens)
    why = f"at least one pass and at least the gpu recipe's {MIN_TOKENS / 1e6:.0f} M tokens"
    if tokens > MAX_PASSES * n_tokens:
        tokens, why = MAX_PASSES * n_tokens, f"at most {MAX_PASSES:.0f} passes (BERT's ~40 epochs)"
    if max_passes is not None and tokens > max_passes * n_tokens:
        tokens, why = max_passes * n_tokens, f"at most {max_passes:g} passes (the run's max_passes)"
    ranks = f" x {world_size} processes" if world_size > 1 else ""
    per_step = batch * block_size * world_size                           # tokens one optimizer step reads
    if tokens > speed * budget:
        tokens, why = speed * budget, f"what {speed:,} tokens/s (measured, {model} on {kind}{ranks}) reads in {budget:,.0f} s"
    steps = max(1, math.floor(tokens / per_step))   # floor: never past a cap
    train_tokens = steps * per_step
    reasons.append(f"{steps:,} steps x {batch}{ranks} x {block_size} = {train_tokens / 1e6:,.1f} M tokens, "
                   f"{train_tokens / n_tokens:.2f} passes over the corpus: {why}")
    lr, warmup = {"base": (1e-4, 0.1), "small": (5e-4, 0.06)}.get(model, (1e-3, 0.06))
    reasons.append(f"lr {lr:g} with {warmup:.0%} warm-up"
                   + (" (post-LN BERT-base leaves the unigram plateau only at a low lr)" if model == "base" else
                      " (the presets' value for this width)"))
    return {"model": model, "batch_size": batch, "grad_accum_steps": 1, "block_size": block_size,
            "max_steps": steps, "lr": lr, "warmup_ratio": warmup, "eval_every": max(1, min(2000, steps // 6)),
            "train_tokens": train_tokens, "passes": train_tokens / n_tokens,
            "estimated_s": train_tokens / speed, "reasons": reasons}


def plan_text(plan: dict) -> str:
    """The plan as lines a notebook prints: the knobs, then the reasons."""
    knobs = ", ".join(f"{k}={plan[k]}" for k in ("model", "batch_size", "block_size", "max_steps", "lr", "eval_every"))
    applied = f" [{plan['applied']}]" if "applied" in plan else ""
    return "\n".join([f"run sized for the corpus: {knobs} (~{plan['estimated_s'] / 60:,.0f} min of steps){applied}",
                      *(f"  - {r}" for r in plan["reasons"])])


def steps_for_epochs(n_examples: int, batch_size: int, epochs: float) -> int:
    """Optimizer steps for ``epochs`` passes over ``n_examples`` at ``batch_size`` (the global batch; >= 1).

    Raises:
        ValueError: ``n_examples`` or ``batch_size`` is not positive.
    """
    if n_examples <= 0 or batch_size <= 0:
        raise ValueError(f"need n_examples > 0 and batch_size > 0, got {n_examples} and {batch_size}")
    return max(1, math.ceil(n_examples * epochs / batch_size))
