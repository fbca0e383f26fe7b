"""Size an MLM pretraining run for a corpus of ``n_tokens`` tokens on a device, at a speed measured here.

The rules, each with its source, so the printed plan says *why*:

- **Model**: the largest preset with at most ``n_tokens / 20`` parameters (Chinchilla's ~20 training tokens per
  parameter, Hoffmann et al. 2022), never below ``mini`` on a GPU nor above ``narrow`` on a CPU (the gpu and cpu
  presets' models, docs/pretraining.md).
- **Speed**: :func:`measure_speed` times a few real training steps of that model here (a loaded machine runs far
  below the recorded idle speeds, :data:`TOKENS_PER_S`); without a measurement the plan says it used those.
- **Tokens**: at least the ``gpu`` recipe's 49 M, at most 40 passes (BERT's ~40 epochs, Devlin et al. 2019) and
  at most what the device reads in ``budget_s`` after the evaluations: a big corpus is read once, or a share of it.
- **Steps** = tokens / (batch x block x world_size); **lr**: 1e-3 up to ``mini``, 5e-4 for ``small``, 1e-4 with
  10 % warm-up for ``base`` (its plateau fix, nbkit.evaluate.probes).
- **A checkpoint to continue** (``init``, :func:`checkpoint_figures`): its model, lr and warm-up; a speed not
  measured here is the recorded preset nearest in FLOPs per token scaled by the ratio (:func:`estimated_speed`).
"""
from __future__ import annotations

import math

#: parameters of each preset with an 8,000-token vocabulary (models.count_parameters), smallest first
PARAMS = {"tiny": 0.6e6, "narrow": 1.9e6, "mini": 5.3e6, "small": 17.0e6, "base": 92.0e6}
#: recorded training speed (tokens/s) at block 128 on idle machines: H200 bf16 (bench/results/gpu_h200_2026-11-30:
#: mini 609 k in notebook 02, base 441,722 in gpu_check's bert_eager), 2-core CPU fp32 (docs/pretraining.md:
#: narrow 10,900). NOT measured, interpolated (:data:`INTERPOLATED`): small on the H200 and tiny on the CPU.
TOKENS_PER_S = {"cuda": {"mini": 609_000, "small": 520_000, "base": 441_722},
                "cpu": {"tiny": 20_000, "narrow": 10_900}}
INTERPOLATED = {("cuda", "small"), ("cpu", "tiny")}
BATCH = {"cuda": 128, "cpu": 64}   # blocks per step (per process)
MIN_TOKENS = 49_152_000   # the gpu recipe: 3,000 steps x 128 blocks x 128 tokens
MAX_PASSES = 40.0
DEFAULT_BUDGET_S = {"cuda": 4 * 3600.0, "cpu": 15 * 60.0}
#: evaluations in a sized run: the untrained score, ~6 during the run (eval_every = steps / 6), the last
EVALS_PER_RUN = 8
#: an evaluation's tokens/s over training's: forward only, ~2N of the ~6N FLOPs per token (Kaplan et al. 2020)
EVAL_SPEEDUP = 3.0
#: fewest held-out blocks :func:`size_run` lowers ``eval_blocks`` to (an evaluation's noise grows below)
MIN_EVAL_BLOCKS = 64
FAR_LARGER = 0.5   # passes below this: the plan says how much of the corpus the budget cannot read


def device_kind(device) -> str:
    """``"cuda"`` for any ``cuda``/``cuda:N``, else the name; ValueError for one without :data:`TOKENS_PER_S`."""
    kind = "cuda" if str(device).startswith("cuda") else str(device)
    if kind not in TOKENS_PER_S:
        raise ValueError(f"device={device!r}: size_run knows 'cuda' and 'cpu'")
    return kind


def choose_model(n_tokens: int, device: str = "cuda") -> tuple[str, str]:
    """``(preset, reason)``: the largest preset of ``device``'s with at most ``n_tokens / 20`` parameters
    (Chinchilla's ~20 tokens per parameter), else its smallest."""
    kind = device_kind(device)
    allowed = list(TOKENS_PER_S[kind])                                # smallest first
    fits = [m for m in allowed if PARAMS[m] <= n_tokens / 20]
    model = fits[-1] if fits else allowed[0]
    return model, (f"model {model} ({PARAMS[model] / 1e6:.1f} M parameters): "
                   + (f"the largest {kind} preset with <= n_tokens/20 = {n_tokens / 20 / 1e6:.2f} M parameters "
                      "(~20 tokens per parameter, Chinchilla)" if fits else
                      f"the smallest {kind} preset; the corpus ({n_tokens:,} tokens) is too small for 20 tokens per "
                      "parameter even there, so it is read several times"))


def recorded_speed(device: str, model: str) -> tuple[float, str]:
    """``(tokens/s, where it comes from)`` of :data:`TOKENS_PER_S` for ``model`` on ``device``."""
    kind = device_kind(device)
    where = "interpolated between recorded speeds" if (kind, model) in INTERPOLATED else (
        "recorded on an idle H200" if kind == "cuda" else "recorded on an idle 2-core CPU")
    return float(TOKENS_PER_S[kind][model]), where


#: share of a block's positions the sparse MLM head scores (BERT's 15 % targets), for FLOPs per token
MLM_SHARE = 0.15


def train_flops_per_token(config, block_size: int) -> float:
    """Training model FLOP per input token of an MLM step at ``block_size``: the encoder on every position, the
    sparse head on :data:`MLM_SHARE` of them (:func:`nbkit.models.flops.bert_batch_flops`)."""
    from nbkit.models.flops import bert_batch_flops

    return bert_batch_flops(config, block_size, block_size, MLM_SHARE * block_size) / block_size


def checkpoint_figures(folder, block_size: int) -> dict:
    """``{"parameters", "flops_per_token"}`` of the checkpoint in ``folder`` (built from its ``config.json`` on the
    meta device): an MLM's by :func:`train_flops_per_token`, a causal LM's by
    :func:`nbkit.models.flops.causal_flops_per_token`."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from nbkit.models.bert import count_parameters
    from nbkit.models.causal import MODEL_TYPES, causal_class
    from nbkit.models.loading import checkpoint_model_type

    kind = checkpoint_model_type(folder)
    if kind in MODEL_TYPES:
        from transformers import AutoConfig

        from nbkit.models.flops import causal_flops_per_token

        config = AutoConfig.from_pretrained(str(folder))
        with torch.device("meta"):
            n = count_parameters(causal_class(kind)(config))
        return {"parameters": n, "flops_per_token": causal_flops_per_token(config, block_size)}
    config = BertConfig.from_pretrained(str(folder))
    with torch.device("meta"):
        n = count_parameters(BertForMaskedLM(config))
    return {"parameters": n, "flops_per_token": train_flops_per_token(config, block_size)}


#: FLOPs ratios within which :func:`estimated_speed` calls its scaling an estimate (beyond: a rough guess)
CLOSE_FLOPS = (0.5, 2.0)


def estimated_speed(device: str, flops_per_token: float, block_size: int = 128) -> tuple[float, str, bool]:
    """``(tokens/s, how, close)`` for a model of ``flops_per_token`` on ``device`` without a measurement: the
    recorded preset (:data:`TOKENS_PER_S`) nearest in FLOPs per token, scaled by the ratio (compute-bound).
    ``close``: the ratio is within :data:`CLOSE_FLOPS`; else ``how`` calls it a rough guess."""
    from nbkit.models.bert import build_config

    kind = device_kind(device)
    flops = {m: train_flops_per_token(build_config(m, 8000, max_position_embeddings=max(block_size, 128)), block_size)
             for m in TOKENS_PER_S[kind]}
    near = min(flops, key=lambda m: abs(math.log(flops[m] / flops_per_token)))
    speed, where = recorded_speed(kind, near)
    ratio = flops[near] / flops_per_token
    close = CLOSE_FLOPS[0] <= ratio <= CLOSE_FLOPS[1]
    return speed * ratio, (f"estimated, not measured: {near}'s {speed:,.0f} tokens/s ({where}) x {ratio:.2g}, the "
                           f"ratio of training FLOPs per token ({flops[near] / 1e9:.2g} vs {flops_per_token / 1e9:.2g} "
                           "GFLOP)" + ("" if close else "; a rough guess, no recorded model is near its size")), close


def measure_speed(model: str, vocab_size: int, block_size: int, batch_size: int, device: str = "cpu",
                  steps: int = 2, warmup: int = 1, model_dir=None) -> dict:
    """Time ``warmup + steps`` real training steps (``Loop.train_step`` through
    :func:`nbkit.profiling.step_timing.measure_steps`) of a fresh ``model`` preset, or the checkpoint in
    ``model_dir``, on random blocks of ``batch_size`` x ``block_size`` tokens at the run's precision and head, on
    ``device`` (None: the loop's default; under torchrun the ranks time DDP steps together). The global RNGs are
    as before afterwards.

    Returns ``{"tokens_per_s" (timed steps, input tokens), "step_s", "seconds" (wall, building included),
    "how" (one phrase for the plan)}``.
    """
    import contextlib
    import io
    import time
    from pathlib import Path

    from nbkit.profiling.step_timing import StepConfig, measure_steps, model_factory, step_loop
    from nbkit.switches import isolated_rng

    t0 = time.perf_counter()
    factory, _ = model_factory(model, vocab_size, block_size, model_dir=model_dir)
    if model_dir is not None:
        model = Path(model_dir).name
    with contextlib.redirect_stdout(io.StringIO()), isolated_rng():   # its precision line; the run's RNG untouched
        built = factory()
        sparse = getattr(built, "supports_predict_mask", False)      # a causal LM: its head on every position
        cfg = StepConfig(batch_size=batch_size, seq_len=block_size, precision="auto",
                         mlm_head="masked" if sparse else "all", steps=steps, warmup=warmup)
        res = measure_steps(step_loop(built, cfg, device=device), cfg)
    wall = time.perf_counter() - t0
    return {"tokens_per_s": res["tokens_per_s"], "step_s": res["step_s"], "seconds": wall,
            "how": (f"measured here: {steps} training steps of {model} at {batch_size} x {block_size} tokens "
                    f"after {warmup} warm-up ({res['step_s']:.2f} s a step; {wall:.0f} s to time)")}


def size_run(n_tokens: int, device: str = "cuda", block_size: int = 128, budget_s: float | None = None,
             max_passes: float | None = None, world_size: int = 1, tokens_per_s: float | None = None,
             measured: str | None = None, eval_blocks: int | None = None, init: dict | None = None) -> dict:
    """A pretraining plan for ``n_tokens`` training tokens on ``device`` (``"cuda"`` or ``"cpu"``).

    ``budget_s``: wall-clock seconds for steps and evaluations (None: 4 h on a GPU, 15 min on a CPU);
    ``max_passes``: the run's own cap on passes (``PretrainConfig.max_passes``); ``world_size``: processes training
    together, each at the per-device speed (linear scaling, an upper bound); ``tokens_per_s``: this machine's speed
    per process (:func:`measure_speed`; None: :func:`recorded_speed`, said so), ``measured`` how it was measured.
    ``eval_blocks``: held-out blocks per evaluation (None: evaluations not counted); their :data:`EVALS_PER_RUN`
    at :data:`EVAL_SPEEDUP` x the training speed come out of the budget, and over a quarter of it ``eval_blocks``
    is lowered to fit a quarter (never below :data:`MIN_EVAL_BLOCKS`). ``init``: a continued run's checkpoint
    (:func:`checkpoint_figures` plus ``name``, ``lr``, ``warmup_ratio``), whose model, lr and warm-up the plan keeps,
    its speed :func:`estimated_speed` where not measured.

    Returns:
        ``{"model", "batch_size", "grad_accum_steps", "block_size", "max_steps", "lr", "warmup_ratio",
        "eval_every", "train_tokens", "passes", "estimated_s" (steps + evaluations), "tokens_per_s" (per
        process), "speed_source", "one_pass_s" (here), "gpu_one_pass_s" (on one GPU; None on a GPU or when the
        budget reads half a pass or more), "reasons"}`` (one sentence per choice), ``"eval_blocks"`` when lowered.

    Raises:
        ValueError: ``n_tokens`` < 1, ``block_size`` < 3, ``max_passes`` <= 0, ``world_size`` < 1,
            ``tokens_per_s`` <= 0 or an unknown ``device``.
    """
    from nbkit.units import fmt_duration

    kind = device_kind(device)
    if n_tokens < 1 or block_size < 3:
        raise ValueError(f"need n_tokens >= 1 and block_size >= 3, got {n_tokens} and {block_size}")
    if world_size < 1:
        raise ValueError(f"world_size={world_size} must be >= 1")
    if max_passes is not None and not max_passes > 0:
        raise ValueError(f"max_passes={max_passes} must be > 0 (None: no cap of the run's own)")
    if tokens_per_s is not None and not tokens_per_s > 0:
        raise ValueError(f"tokens_per_s={tokens_per_s} must be > 0 (None: the recorded speed)")
    if init is None:
        model, why_model = choose_model(n_tokens, kind)
        recorded, where = recorded_speed(kind, model)
        idle = "the recorded idle-machine speed"
    else:
        model = init["name"]
        why_model = (f"model {model} ({init['parameters'] / 1e6:.1f} M parameters): init's checkpoint, whose "
                     "architecture continued pretraining keeps")
        recorded, where, close = estimated_speed(kind, init["flops_per_token"], block_size)
        idle = "the estimate from its FLOPs for an idle machine" if close else None
    reasons = [why_model]
    per_process = recorded if tokens_per_s is None else float(tokens_per_s)
    source = (measured or "measured") if tokens_per_s is not None else f"{where}; not measured on this machine"
    reasons.append(f"speed {per_process:,.0f} tokens/s per process ({source})"
                   + (f"; {idle} is {recorded:,.0f}" if tokens_per_s is not None and idle else ""))
    batch = BATCH[kind]
    speed = per_process * world_size
    budget = DEFAULT_BUDGET_S[kind] if budget_s is None else float(budget_s)
    eval_rate = EVAL_SPEEDUP * speed / block_size                        # held-out blocks scored per s
    eval_s, fewer = EVALS_PER_RUN * (eval_blocks or 0) / eval_rate, None
    if eval_s > budget / 4:
        quarter = math.floor(budget / 4 * eval_rate / EVALS_PER_RUN)
        fewer = max(MIN_EVAL_BLOCKS, quarter)
        if fewer < eval_blocks:                                          # lower it, never raise it
            reasons.append(f"eval_blocks {eval_blocks:,} -> {fewer:,}: {EVALS_PER_RUN} evaluations of "
                           f"{eval_blocks:,} blocks would take ~{fmt_duration(eval_s)} of the {fmt_duration(budget)} "
                           f"(forward only, ~{EVAL_SPEEDUP:g}x the training speed); {fewer:,} keep them to about a "
                           "quarter" + ("" if fewer == quarter else f" or as near as {MIN_EVAL_BLOCKS} blocks allow"))
            eval_s = EVALS_PER_RUN * fewer / eval_rate
        else:
            fewer = None
        if eval_s > budget / 4:
            over = "alone take" if eval_s > budget else "take"
            reasons.append(f"evaluations {over} ~{fmt_duration(eval_s)} of the {fmt_duration(budget)} at this speed "
                           f"({EVALS_PER_RUN} evaluations of {eval_blocks if fewer is None else fewer:,} blocks), "
                           + ("so the run takes longer than the budget" if eval_s > budget else "over a quarter")
                           + "; give more time (budget_minutes) or set fewer eval_blocks")
    step_budget = max(0.0, budget - eval_s)
    tokens = max(MIN_TOKENS, n_tokens)
    why = f"at least one pass and at least the gpu recipe's {MIN_TOKENS / 1e6:.0f} M tokens"
    if tokens > MAX_PASSES * n_tokens:
        tokens, why = MAX_PASSES * n_tokens, f"at most {MAX_PASSES:.0f} passes (BERT's ~40 epochs)"
    if max_passes is not None and tokens > max_passes * n_tokens:
        tokens, why = max_passes * n_tokens, f"at most {max_passes:g} passes (the run's max_passes)"
    ranks = f" x {world_size} processes" if world_size > 1 else ""
    per_step = batch * block_size * world_size                           # tokens one optimizer step reads
    if tokens > speed * step_budget:
        left = f" ({fmt_duration(step_budget)} of it for steps, after the evaluations)" if eval_s else ""
        each = f" ({per_process:,.0f} per process{ranks})" if world_size > 1 else ""   # speed: all processes'
        tokens, why = speed * step_budget, f"what {speed:,.0f} tokens/s{each} reads in {fmt_duration(budget)}{left}"
    steps = max(1, math.floor(tokens / per_step))   # floor: never past a cap
    train_tokens = steps * per_step
    passes = train_tokens / n_tokens
    reasons.append(f"{steps:,} steps x {batch}{ranks} x {block_size} = {train_tokens / 1e6:,.1f} M tokens, "
                   f"{_passes(passes)} passes over the corpus: {why}")
    one_pass_s = n_tokens / speed
    gpu_one_pass_s = None
    if passes < FAR_LARGER:
        line = (f"the corpus ({n_tokens / 1e6:,.1f} M tokens) is far larger than this budget reads: "
                f"{_passes(passes)} passes; one pass would take ~{fmt_duration(one_pass_s)} here")
        if kind != "cuda":   # with init its own FLOPs' estimate, never another model's measured speed
            gpu_model, about = (choose_model(n_tokens, "cuda")[0], "") if init is None else (model, "~")
            gpu_speed, gpu_where, close = ((*recorded_speed("cuda", gpu_model), True) if init is None else
                                           estimated_speed("cuda", init["flops_per_token"], block_size))
            if close:
                gpu_one_pass_s = n_tokens / gpu_speed
                line += (f"; on one GPU ~{fmt_duration(gpu_one_pass_s)} ({gpu_model} at {about}{gpu_speed:,.0f} "
                         f"tokens/s, {gpu_where})")
            else:
                line += f"; on one GPU: not measured for {model} (no recorded model of its size)"
        reasons.append(line + "; give more time (budget_minutes) or use a GPU to read more of it")
    if init is not None:
        lr, warmup = init["lr"], init["warmup_ratio"]
        reasons.append(f"lr {lr:g} with {warmup:.0%} warm-up (the run's: continued pretraining of init)")
    else:
        lr, warmup = {"base": (1e-4, 0.1), "small": (5e-4, 0.06)}.get(model, (1e-3, 0.06))
        reasons.append(f"lr {lr:g} with {warmup:.0%} warm-up"
                       + (" (post-LN BERT-base leaves the unigram plateau only at a low lr)" if model == "base" else
                          " (the presets' value for this width)"))
    return {"model": model, "batch_size": batch, "grad_accum_steps": 1, "block_size": block_size,
            "max_steps": steps, "lr": lr, "warmup_ratio": warmup, "eval_every": max(1, min(2000, steps // 6)),
            "train_tokens": train_tokens, "passes": passes, "estimated_s": train_tokens / speed + eval_s,
            "tokens_per_s": per_process, "speed_source": source, "one_pass_s": one_pass_s,
            "gpu_one_pass_s": gpu_one_pass_s, "reasons": reasons, **({"eval_blocks": fewer} if fewer else {})}


def _passes(x: float) -> str:
    return f"{x:.2f}" if x >= 0.01 else f"{x:.1e}"


def plan_text(plan: dict) -> str:
    """The plan as lines a notebook prints: the knobs, then the reasons."""
    from nbkit.units import fmt_duration

    knobs = ", ".join(f"{k}={plan[k]}" for k in ("model", "batch_size", "block_size", "max_steps", "lr", "eval_every"))
    applied = f" [{plan['applied']}]" if "applied" in plan else ""
    return "\n".join([f"run sized for the corpus: {knobs} (~{fmt_duration(plan['estimated_s'])} of steps and "
                      f"evaluations){applied}", *(f"  - {r}" for r in plan["reasons"])])


def steps_for_epochs(n_examples: int, batch_size: int, epochs: float) -> int:
    """Optimizer steps (>= 1) for ``epochs`` passes over ``n_examples`` at the global ``batch_size``; ValueError
    when either is not positive."""
    if n_examples <= 0 or batch_size <= 0:
        raise ValueError(f"need n_examples > 0 and batch_size > 0, got {n_examples} and {batch_size}")
    return max(1, math.ceil(n_examples * epochs / batch_size))
