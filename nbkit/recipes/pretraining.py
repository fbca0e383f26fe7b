"""The pretraining recipe: corpus -> tokenizer -> MLM blocks -> BERT -> training loop -> saved model.

The one pretraining driver in nbkit: notebook 02 calls the stages cell by cell, notebook 05 on the
user's text, ``python -m nbkit.jobs.pretrain`` and ``bench/pretrain_value.py`` call
:func:`run_pretraining` with overrides of :class:`PretrainConfig`::

    cfg = PretrainConfig.for_scale("cpu")                   # every decision, printed as a table
    source, what_went_in = corpus(cfg)                      # the mix (or cfg.corpus's store)
    tok = tokenizer(cfg, source)                            # notebook 01's (or the store's)
    cfg, plan = size(cfg, source)                           # a store: the run sized for its tokens
    data = blocks(cfg, tok, source)                         # {"train", "validation"} MLM blocks
    bert = model(cfg, tok)                                  # random weights of cfg.model
    lp = loop(cfg, bert, tok, data, out_dir)                # nbkit.train.Loop, collator, checkpoints
    result = fit(cfg, lp)                                   # untrained eval, then train
    summary = save(cfg, lp, result, tok, out_dir)           # out_dir/model + metrics.json

Checkpoints: the loop's layout ``out_dir/checkpoints/step-000500/`` (``model/`` loads with
``from_pretrained``; :func:`model_dir_at`); ``save_steps`` keeps those steps' checkpoints.
"""
from __future__ import annotations

import math
from pathlib import Path

from nbkit.recipes.pretrain_config import PretrainConfig
from nbkit.recipes.pretrain_data import blocks, corpus, is_store, size, tokenizer

__all__ = ["PretrainConfig", "corpus", "is_store", "tokenizer", "size", "blocks", "model", "collator", "train_config",
           "loop", "fit", "save", "model_dir_at", "run_pretraining"]


def model(cfg: PretrainConfig, tok):
    """A ``BertForMaskedLM`` of preset ``cfg.model`` (sparse MLM head) with ``tok``'s vocabulary and
    ``cfg.block_size`` positions, weights drawn from ``cfg.seed`` (the same on every rank)."""
    import torch

    from nbkit.models.bert import build_mlm_model

    torch.manual_seed(cfg.seed)
    drop = {} if cfg.dropout is None else {"hidden_dropout_prob": cfg.dropout,
                                           "attention_probs_dropout_prob": cfg.dropout}
    return build_mlm_model(cfg.model, tok, cfg.block_size, seed=cfg.seed, **drop)


def collator(cfg: PretrainConfig, tok):
    """:class:`nbkit.text.mlm.MLMCollator`: ``cfg.mlm_probability`` of the tokens as targets (80/10/10),
    whole words with ``cfg.whole_word``; padding and special tokens never chosen."""
    from nbkit.text.mlm import MLMCollator

    return MLMCollator(tok, mlm_probability=cfg.mlm_probability, whole_word=cfg.whole_word)


def train_config(cfg: PretrainConfig, out_dir, n_blocks: int | None = None, save_steps=(), world_size: int = 1):
    """The loop's :class:`nbkit.train.config.TrainConfig`.

    ``cfg.max_passes`` with ``n_blocks`` (training blocks) caps the steps at that many passes (a small
    corpus is not read hundreds of times; evaluations shrink to >= 4 per run), counted at the global
    batch ``batch_size * grad_accum_steps * world_size`` (:func:`loop` passes torchrun's world size). ``save_steps``: the
    checkpoint interval becomes their greatest common divisor with ``checkpoint_every`` and all are
    kept until :func:`fit` prunes the others.

    Raises:
        ConfigError: a save step outside ``1..max_steps``.
    """
    from nbkit.errors import ConfigError
    from nbkit.pipeline.artifacts import steps_for_epochs
    from nbkit.train import TrainConfig

    steps, every = cfg.max_steps, cfg.eval_every
    if n_blocks and cfg.max_passes:
        steps = min(steps, steps_for_epochs(n_blocks, cfg.batch_size * cfg.grad_accum_steps * world_size,
                                                  cfg.max_passes))
        every = max(1, min(every, steps // 4))
    ckpt = every if cfg.checkpoint_every is None else (cfg.checkpoint_every or None)
    bad = [s for s in save_steps if not 1 <= int(s) <= steps]
    if bad:
        raise ConfigError(f"save_steps {bad} outside 1..{steps} (max_steps): raise max_steps or drop those steps")
    if save_steps:
        ckpt = math.gcd(*(int(s) for s in save_steps), *([ckpt] if ckpt else []))
    return TrainConfig(max_steps=steps, batch_size=cfg.batch_size, grad_accum_steps=cfg.grad_accum_steps,
                       lr=cfg.lr, warmup_ratio=cfg.warmup_ratio, scheduler=cfg.schedule,
                       weight_decay=cfg.weight_decay, precision=cfg.precision, eval_every=every,
                       checkpoint_every=ckpt, keep_last=0 if save_steps else cfg.keep_last,
                       output_dir=Path(out_dir), seed=cfg.seed, num_workers=cfg.num_workers,
                       log_every=cfg.log_every or max(1, min(10, steps // 20)), resume=cfg.resume,
                       eval_batches=-(-cfg.eval_blocks // cfg.batch_size) if cfg.eval_blocks else None,
                       progress=cfg.progress)


def loop(cfg: PretrainConfig, bert, tok, data: dict, out_dir, callbacks=(), save_steps=(), device=None):
    """A :class:`nbkit.train.Loop` over ``data["train"]`` (held-out loss on ``data["validation"]``), with
    :func:`collator`, :func:`train_config` and, when ``cfg.patience``, :class:`nbkit.train.EarlyStopping`."""
    from nbkit.train import EarlyStopping, Loop
    from nbkit.train.ddp_loop import launch_world_size

    extra = [EarlyStopping(patience=cfg.patience)] if cfg.patience else []
    tcfg = train_config(cfg, out_dir, len(data["train"]), save_steps, world_size=launch_world_size())
    lp = Loop(bert, tcfg, data["train"], data["validation"],
              collate_fn=collator(cfg, tok), callbacks=[*callbacks, *extra], device=device)
    lp.save_steps = tuple(sorted(int(s) for s in save_steps))
    return lp


def fit(cfg: PretrainConfig, lp, untrained: bool = True):
    """Train ``lp`` (resuming from its checkpoints when ``cfg.resume``) and return its ``TrainResult``.

    ``untrained``: first score the held-out loss of the initial weights (``result.metrics
    ["untrained_eval_loss"]``, ``["untrained_eval_perplexity"]``). Afterwards only the checkpoints at
    the loop's ``save_steps`` and the newest are kept.
    """
    first = lp.evaluate() if untrained else {}
    result = lp.fit()
    result.metrics["untrained_eval_loss"] = first.get("eval_loss")
    result.metrics["untrained_eval_perplexity"] = first.get("eval_perplexity")
    if getattr(lp, "save_steps", ()) and lp.dist.is_main:
        from nbkit.train.checkpoint import list_checkpoints
        from nbkit.train.ckpt_cleanup import discard_checkpoint

        for ckpt in list_checkpoints(lp.config.output_dir, warn=False)[:-1]:
            if ckpt.step not in lp.save_steps:
                discard_checkpoint(ckpt.path)
    return result


def model_dir_at(out_dir, step: int) -> Path:
    """``out_dir/checkpoints/step-NNNNNN/model``: the ``from_pretrained`` directory of one kept checkpoint
    (``build_classifier(pretrained=...)`` takes it).

    Raises:
        CheckpointError: no complete checkpoint at ``step`` (the kept steps are named).
    """
    from nbkit.errors import CheckpointError
    from nbkit.train.checkpoint import list_checkpoints

    found = {c.step: c for c in list_checkpoints(out_dir, warn=False)}
    if step not in found:
        raise CheckpointError(f"no checkpoint at step {step} in {Path(out_dir) / 'checkpoints'}; kept: "
                              f"{sorted(found) or 'none'} (pass save_steps=({step},) to run_pretraining)")
    return found[step].model_dir


def save(cfg: PretrainConfig, lp, result, tok, out_dir) -> dict:
    """Save the model + tokenizer to ``out_dir/model`` and write ``out_dir/metrics.json``; return it.

    ``out_dir/model`` loads with ``AutoModelForMaskedLM``/``AutoTokenizer.from_pretrained``; notebook
    03 starts from it; its ``tokenizer_config.json`` caps ``model_max_length`` at the model's positions (a
    store's tokenizer says 512), and the folder is written through :func:`nbkit.atomic.atomic_dir`
    (``WriteError`` on a full disk, nothing half-written). Keys: ``scale``, ``model``, ``parameters``, ``hidden_size``, ``layers``,
    ``block_size``, ``batch_size``, ``grad_accum_steps``, ``lr``, the loop's summary (``steps``,
    ``train_tokens``, ``tokens_per_s``, ``mfu``, ``device``, ``precision``, ``eval_loss``,
    ``eval_perplexity``), ``untrained_eval_loss``, ``first_eval_loss``/``first_eval_step``,
    ``model_dir``, ``checkpoints`` (step -> model dir of every kept checkpoint), ``history``
    (every log/eval entry), ``config`` (every field), ``world_size``, ``written_at``.
    """
    import time

    from nbkit import jsonio
    from nbkit.atomic import atomic_dir
    from nbkit.models.bert import count_parameters, quiet_transformers
    from nbkit.text.tokenizer_files import save_tokenizer
    from nbkit.train.checkpoint import list_checkpoints

    model_dir = Path(out_dir) / "model"
    positions = lp.model.config.max_position_embeddings
    with atomic_dir(model_dir, what="model") as tmp, quiet_transformers():   # the one write path (atomic, ENOSPC named)
        lp.model.save_pretrained(tmp)
        # a store's tokenizer says 512; this model has `positions`: truncation=True must cut there
        # (else pipeline("fill-mask") on a long text fails with a tensor-size error)
        save_tokenizer(tok, tmp, model_max_length=min(int(tok.model_max_length), positions))
    evals = [h for h in result.history if "eval_loss" in h]
    mc = lp.model.config
    metrics = {"scale": cfg.scale, "model": cfg.model, "parameters": count_parameters(lp.model),
               "hidden_size": mc.hidden_size, "layers": mc.num_hidden_layers, "block_size": cfg.block_size,
               "batch_size": lp.config.batch_size, "grad_accum_steps": lp.config.grad_accum_steps,
               "lr": lp.config.lr, **result.metrics,
               "first_eval_loss": evals[0]["eval_loss"] if evals else None,
               "first_eval_step": evals[0]["step"] if evals else None,
               "model_dir": str(model_dir),
               "checkpoints": {c.step: str(c.model_dir) for c in list_checkpoints(out_dir, warn=False)},
               "history": list(result.history), "config": cfg.to_dict(), "world_size": lp.dist.world_size,
               "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    if evals:   # the last evaluation's, also when the loop's summary lacks it
        metrics.update(eval_loss=evals[-1]["eval_loss"], eval_perplexity=evals[-1].get("eval_perplexity"))
    return jsonio.write_json(Path(out_dir) / "metrics.json", metrics)


def run_pretraining(cfg: PretrainConfig, out_dir, *, tokenizer=None, callbacks=(), save_steps=(),
                    labeled=None, texts=None, backend: str | None = None, corpus_wait_s: float = 6 * 3600.0,
                    device=None) -> dict:
    """Every stage end to end; returns the dict written to ``out_dir/metrics.json`` (see :func:`save`).

    ``tokenizer``: None loads notebook 01's (or the store's); ``save_steps``: steps whose checkpoints
    are kept (``metrics["checkpoints"]``: step -> loadable model dir); ``labeled``/``texts``: the
    labelled data and own texts for the mix (:func:`corpus`). Under torchrun every rank calls it:
    with ``cfg.corpus`` global rank 0 prepares the store before the process group forms (the others
    poll for its manifest at most ``corpus_wait_s``), rank 0 trains a missing tokenizer while the
    others wait, every rank trains, rank 0 saves (the others return the loop's summary).
    """
    from nbkit.train import distributed as D

    source = _store_rank0_first(cfg, corpus_wait_s) if cfg.corpus is not None else None
    info = D.init_distributed(backend)
    if source is None:
        source = _rank0_first(info, lambda: corpus(cfg, labeled, texts)[0])
    tok = tokenizer if tokenizer is not None else _rank0_first(info, lambda: _tokenizer(cfg, source))
    cfg, _ = size(cfg, source)
    lp = loop(cfg, model(cfg, tok), tok, blocks(cfg, tok, source, info.rank), out_dir, callbacks, save_steps,
              device)
    result = fit(cfg, lp)
    metrics = save(cfg, lp, result, tok, out_dir) if info.is_main else dict(result.metrics)
    D.barrier()
    return metrics


def _tokenizer(cfg, source):
    return tokenizer(cfg, source)


def _rank0_first(info, make):
    """Rank 0 makes it first (training and caching what is missing), the others after a barrier."""
    from nbkit.train import distributed as D

    made = make() if info.is_main else None
    D.barrier()
    return made if made is not None else make()


def _store_rank0_first(cfg: PretrainConfig, wait_s: float) -> Path:
    """Global rank 0 prepares (or checks) the store; the others poll for its manifest (no collective:
    preparing a big corpus takes longer than any process-group timeout)."""
    from nbkit.corpus.store import given_store, wait_for_store
    from nbkit.pipeline.pretraining_text import store_dir_for
    from nbkit.train.distributed import DistInfo

    if DistInfo.from_env().rank == 0:
        return corpus(cfg)[0]
    store = given_store(cfg.corpus) or store_dir_for(cfg.corpus, cfg.scale)
    wait_for_store(store, timeout_s=wait_s)
    return store

