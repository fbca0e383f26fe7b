"""Held-out evaluation for the loop: token-weighted loss, perplexity, accuracy.

``eval_loss`` is the mean cross-entropy per label token over the whole eval
set (sum of per-token losses / label tokens), not a mean of batch means, so
it does not depend on batch size or padding. It runs under
``isolated_rng(seed)``: the same masks every time (comparable across evals)
and the training RNG untouched (exact resume).

For MLM it also splits the loss by what the collator did to each target: replaced by
``[MASK]``, by a random token, or kept unchanged. ``eval_loss`` mixes the three, and the kept
targets (10 % of them) a model can copy from its input: on notebook 02's cpu model all targets
scored well below the unigram entropy while the ``[MASK]``-replaced ones sat on it (case D14).
"""
from __future__ import annotations

import math
import warnings

import torch

from nbkit.errors import ConfigError, DataError
from nbkit.evaluate.metrics import macro_f1
from nbkit.switches import model_mode
from nbkit.train.batching import isolated_rng
from nbkit.train.loss import token_loss_sum


@torch.no_grad()
def evaluate(loop, max_batches: int | None = None) -> dict:
    """Held-out metrics of ``loop`` (see :func:`_evaluate`), in eval mode; the model's
    train/eval mode is restored afterwards, also when evaluation raises."""
    with model_mode(loop.model, training=False):
        return _evaluate(loop, max_batches)


def _evaluate(loop, max_batches: int | None = None) -> dict:
    """Evaluate ``loop.model`` on ``loop.eval_data``.

    Returns ``eval_loss`` (mean CE per label token, nats), ``eval_tokens``
    (label tokens scored), ``eval_perplexity`` = exp(eval_loss) for MLM
    (labels (B, T)); for classification (labels (B,)) ``eval_accuracy`` (fraction),
    ``eval_macro_f1`` (unweighted mean of per-class F1 over the classes that occur in
    the labels or the predictions, as ``pipeline.classification_report``: accuracy
    alone hides a class that is never predicted) and ``eval_examples`` (examples
    scored; ``eval_tokens`` equals it, kept for compatibility). With 0 labels scored the metrics are NaN (and a warning says
    why), never loss 0 / perplexity 1.
    MLM with a collator that names its ``mask_id`` (``nbkit.text.mlm.MLMCollator``) adds
    ``eval_mask_loss`` / ``eval_random_loss`` / ``eval_kept_loss`` (mean CE, nats; NaN when none)
    and ``eval_mask_tokens`` / ``eval_random_tokens`` / ``eval_kept_tokens`` for the targets whose
    input was ``[MASK]``, a random other token, or the target itself (:func:`target_kinds`);
    ``eval_mask_loss`` is the one that shows whether the model uses context.
    ``max_batches`` defaults to ``loop.config.eval_batches`` (None = all).
    Batch ``i`` is collated under ``isolated_rng(seed + i)``, so its masks do not
    depend on which batches came before. Under DDP every rank must call it: rank r
    scores batches r, r+W, ... (:func:`eval_shard`) with the plain
    module (no DDP collectives) and the sums are all-reduced, so the result equals
    the one-process result up to float summation order.
    Raises ``ConfigError`` when the loop has no eval_data or its sequences exceed the
    model's ``max_position_embeddings`` (checked once per loop,
    ``nbkit.train.preflight.check_sequence_length``), ``DataError`` when it gives no batch (empty).
    """
    from nbkit.models.mlm_head import forward_logits, uses_sparse_head
    from nbkit.train.ddp import group as D

    if loop.eval_data is None:
        raise ConfigError("evaluate() needs eval data: pass Loop(..., eval_data=...).")
    if not getattr(loop, "_eval_length_checked", False):  # evaluate() may run before fit() (untrained loss)
        from nbkit.train.preflight import check_sequence_length, check_token_ids

        check_sequence_length(loop.model, loop.eval_data, "eval_data", getattr(loop, "_pad_multiple", None))
        check_token_ids(loop.model, loop.eval_data, "eval_data")
        loop._eval_length_checked = True
    cfg, model = loop.config, loop.model
    max_batches = max_batches or cfg.eval_batches
    collate = loop.collate_fn or torch.utils.data.default_collate
    sparse = uses_sparse_head(model, False)  # eval runs the plain module, never compiled
    loss_sum = torch.zeros((), device=loop.device)
    correct = torch.zeros((), device=loop.device)
    k = getattr(getattr(model, "config", None), "num_labels", None) or 0
    confusion = torch.zeros(k * k, device=loop.device)                # (C*C,) true x predicted, classification
    n, n_mlm, n_batches = 0, 0, 0
    mask_id = getattr(collate, "mask_id", None)
    by_kind = torch.zeros(len(TARGET_KINDS), 2, dtype=torch.float64, device=loop.device)  # (kind, [CE sum, n])
    info = getattr(loop, "dist", None) or D.DistInfo()
    for i, idx in eval_shard(len(loop.eval_data), cfg.batch_size, max_batches, info):
        with isolated_rng(cfg.seed + i):
            raw = collate([loop.eval_data[j] for j in idx])
        batch = loop._prepare(raw)
        labels = batch.pop("labels")                                  # (B, T) or (B,)
        n_mlm += labels.dim() == 2
        kinds = target_kinds(batch["input_ids"], labels, mask_id) if mask_id is not None and labels.dim() == 2 else None
        with loop.precision.autocast():
            logits, scored = forward_logits(model, batch, labels, sparse)  # (B, T, V) or (N, V) or (B, C)
            if kinds is None:
                loss_sum += token_loss_sum(logits, scored)
        if kinds is not None:  # one per-target CE gives the loss and its split by kind
            sums = _kind_sums(logits, scored, kinds[labels != -100] if sparse else kinds)   # (K, 2)
            by_kind += sums
            loss_sum += sums[:, 0].sum()
        labels = scored
        mask = labels != -100
        n += int(mask.sum())
        n_batches += 1
        correct += ((logits.argmax(-1) == labels) & mask).sum()
        if labels.dim() == 1 and logits.shape[-1] == k:
            confusion += torch.bincount((labels * k + logits.argmax(-1))[mask], minlength=k * k)
    kind_sums = {f"{kind}_{what}": v for kind, row in zip(TARGET_KINDS, by_kind.tolist())
                 for what, v in zip(("sum", "n"), row)} if mask_id is not None else {}
    tot = D.all_reduce_dict({"loss_sum": loss_sum.item(), "n": n, "correct": correct.item(),
                             "n_mlm": n_mlm, "n_batches": n_batches, **kind_sums})   # sums over ranks
    if tot["n_batches"] == 0:
        raise DataError(f"evaluation got no batch: eval_data has {len(loop.eval_data)} examples; pass a "
                        "non-empty eval_data (or eval_data=None to train without evaluation).")
    n = int(tot["n"])
    if n == 0:  # no score from nothing: NaN, not loss 0 / perplexity 1
        warnings.warn(f"evaluation scored 0 labels in {int(tot['n_batches'])} batches (every label is -100); "
                      "its metrics are NaN. Check that collate_fn sets labels for eval_data.",
                      UserWarning, stacklevel=3)
    loss = tot["loss_sum"] / n if n else math.nan
    metrics = {"eval_loss": loss, "eval_tokens": n}
    if tot["n_mlm"] > 0:
        metrics["eval_perplexity"] = math.exp(min(loss, 700.0))  # exp overflows float64 above ~709
        for kind in TARGET_KINDS if kind_sums else ():
            k_n = int(tot[f"{kind}_n"])
            metrics[f"eval_{kind}_loss"] = tot[f"{kind}_sum"] / k_n if k_n else math.nan
            metrics[f"eval_{kind}_tokens"] = k_n
    else:  # one label per example: eval_tokens kept (= examples) for existing readers
        metrics["eval_examples"] = n
        metrics["eval_accuracy"] = tot["correct"] / n if n else math.nan
        if k:  # every rank takes this branch (n_mlm is summed), so the all-reduce matches
            metrics["eval_macro_f1"] = macro_f1(D.all_reduce_sum(confusion).view(k, k))
    return metrics


TARGET_KINDS = ("mask", "random", "kept")  # what the collator put at a target: [MASK], another token, itself


def target_kinds(input_ids: torch.Tensor, labels: torch.Tensor, mask_id: int) -> torch.Tensor:
    """Index into :data:`TARGET_KINDS` per position: 0 where the input is ``[MASK]``, 2 where it is the target
    itself, 1 otherwise (a random replacement). input_ids, labels: (B, T); returns (B, T) int64, meaningful
    where ``labels != -100``. Exact because a target is never ``[MASK]`` itself (special tokens are never
    chosen, ``nbkit.text.mlm.MLMCollator``)."""
    kinds = torch.ones_like(labels)
    kinds[input_ids == labels] = 2
    kinds[input_ids == mask_id] = 0
    return kinds


def _kind_sums(logits: torch.Tensor, labels: torch.Tensor, kinds: torch.Tensor) -> torch.Tensor:
    """(len(TARGET_KINDS), 2) float64: CE sum (nats) and target count per kind; logits (..., V), labels and kinds (...)."""
    import torch.nn.functional as F

    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1),
                         ignore_index=-100, reduction="none").double()              # (N,)
    valid = labels.reshape(-1) != -100
    one_hot = F.one_hot(kinds.reshape(-1)[valid], len(TARGET_KINDS)).double()      # (n, K)
    return torch.stack([ce[valid] @ one_hot, one_hot.sum(0)], dim=1)                # (K, 2)


def eval_shard(n_examples: int, batch_size: int, max_batches: int | None, info) -> list[tuple[int, list[int]]]:
    """This rank's evaluation batches ``[(batch_index, example indices), ...]``: the one-process batches
    (``batch_size`` each, at most ``max_batches``), rank r taking batches r, r + W, ..."""
    n_batches = -(-n_examples // batch_size)
    if max_batches:
        n_batches = min(n_batches, max_batches)
    return [(i, list(range(i * batch_size, min((i + 1) * batch_size, n_examples))))
            for i in range(info.rank, n_batches, info.world_size)]
