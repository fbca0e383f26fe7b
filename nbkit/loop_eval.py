"""Held-out evaluation for the loop: token-weighted loss, perplexity, accuracy.

``eval_loss`` is the mean cross-entropy per label token over the whole eval
set (sum of per-token losses / label tokens), not a mean of batch means, so
it does not depend on batch size or padding. It runs under
``isolated_rng(seed)``: the same masks every time (comparable across evals)
and the training RNG untouched (exact resume).
"""
from __future__ import annotations

import math

import torch

from nbkit.errors import ConfigError
from nbkit.batching import isolated_rng


@torch.no_grad()
def evaluate(loop, max_batches: int | None = None) -> dict:
    """Evaluate ``loop.model`` on ``loop.eval_data``.

    Returns ``eval_loss`` (mean CE per label token, nats), ``eval_tokens``
    (label tokens scored), ``eval_perplexity`` = exp(eval_loss) for MLM
    (labels (B, T)), ``eval_accuracy`` for classification (labels (B,)).
    ``max_batches`` defaults to ``loop.config.eval_batches`` (None = all).
    Raises ``ConfigError`` when the loop has no eval_data.
    """
    from nbkit.train import token_loss_sum

    if loop.eval_data is None:
        raise ConfigError("evaluate() needs eval data: pass Loop(..., eval_data=...).")
    cfg, model = loop.config, loop.model
    max_batches = max_batches or cfg.eval_batches
    was_training = model.training
    model.eval()
    loss_sum = torch.zeros((), device=loop.device)
    correct = torch.zeros((), device=loop.device)
    n, mlm = 0, True
    with isolated_rng(cfg.seed):
        loader = torch.utils.data.DataLoader(loop.eval_data, batch_size=cfg.batch_size,
                                             collate_fn=loop.collate_fn, num_workers=cfg.num_workers)
        for i, raw in enumerate(loader):
            if max_batches and i >= max_batches:
                break
            batch = loop._prepare(raw)
            labels = batch.pop("labels")                                  # (B, T) or (B,)
            with loop.precision.autocast():
                logits = model(**batch).logits                            # (B, T, V) or (B, C)
                loss_sum += token_loss_sum(logits, labels)
            mask = labels != -100
            n += int(mask.sum())
            mlm = labels.dim() == 2
            correct += ((logits.argmax(-1) == labels) & mask).sum()
    if was_training:
        model.train()
    loss = loss_sum.item() / max(n, 1)
    metrics = {"eval_loss": loss, "eval_tokens": n}
    if mlm:
        metrics["eval_perplexity"] = math.exp(min(loss, 700.0))  # exp overflows float64 above ~709
    else:
        metrics["eval_accuracy"] = correct.item() / max(n, 1)
    return metrics
