"""Checks the loop makes before any work, and on resume: each raises (or warns) naming the fix, so a
mistake costs seconds, not a finished run. Data checks collate under ``isolated_rng``: no training
RNG moves (exact resume).
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path

import torch

from nbkit.errors import ConfigError, DataError
from nbkit.train.config import START_FRESH

#: TrainConfig fields that change what a run computes (compared on resume).
RUN_SETTINGS = ("max_steps", "lr", "scheduler", "warmup_ratio", "weight_decay", "batch_size",
                "grad_accum_steps", "seed", "group_by_length", "max_grad_norm", "precision",
                "compile", "pad_to_multiple_of", "class_weights")
#: Settings an epoch's example order depends on: a resume keeps the checkpoint's for the epoch in progress.
ORDER_SETTINGS = ("seed", "group_by_length")
#: Settings that live in the optimizer / LR-schedule state: a resumed run keeps the checkpoint's.
SCHEDULE_SETTINGS = ("lr", "weight_decay", "scheduler", "warmup_ratio")


def check_device(device: torch.device) -> None:
    """Raise ``ConfigError`` when ``device`` is CUDA and this PyTorch cannot use it (no CUDA build, no
    visible GPU, or an index past the last GPU).
    """
    if device.type != "cuda":
        return
    if not torch.cuda.is_available():
        why = ("this PyTorch was built without CUDA" if torch.version.cuda is None
               else "PyTorch sees no CUDA GPU (driver missing, or CUDA_VISIBLE_DEVICES hides them)")
        raise ConfigError(f"device={str(device)!r} but {why}. Use device='cpu' (or device=None: CUDA when "
                          "available, else CPU), or install a CUDA build of PyTorch; `nbkit doctor` "
                          "shows what this machine has.")
    n = torch.cuda.device_count()
    if device.index is not None and device.index >= n:
        raise ConfigError(f"device={str(device)!r} but only {n} CUDA device(s) are visible (cuda:0..cuda:{n - 1}); "
                          "pick one of those, or device=None.")


def check_output_dir(output_dir) -> None:
    """Raise ``ConfigError`` when ``output_dir`` (or its ``checkpoints/``) is a file, or it or the nearest
    existing folder above it, its ``checkpoints/`` or a ``step-*`` folder in there is not writable.
    """
    if output_dir is None:
        return
    path = Path(output_dir).expanduser()
    for p in (path, path / "checkpoints"):
        if p.exists() and not p.is_dir():
            raise ConfigError(f"output_dir={str(output_dir)!r}: {p} is a file, not a directory, so checkpoints "
                              f"cannot be written there. Choose another output_dir, or move the file away.")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"output_dir={str(output_dir)!r} cannot be created: {existing} is a file. "
                          "Choose another output_dir.")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"output_dir={str(output_dir)!r} is not writable: this user may not write in "
                          f"{existing}. Choose a directory you can write (e.g. under runs/ or your home).")
    root = path / "checkpoints"
    if root.is_dir():
        # checkpoints are written, renamed aside and deleted there
        steps = sorted(p for p in root.iterdir() if p.name.startswith("step-") and p.is_dir())
        locked = [p for p in (root, *steps) if not os.access(p, os.W_OK | os.X_OK)]
        if locked:
            raise ConfigError(
                f"output_dir={str(output_dir)!r}: {', '.join(str(p) for p in locked[:3])}"
                f"{' ...' if len(locked) > 3 else ''} not writable (permissions, or a read-only file system): "
                "training writes checkpoints there, moves an earlier run's into checkpoints/previous-* and deletes "
                f"those keep_last drops. Fix: make them writable (chmod -R u+w {root}), or choose another "
                "output_dir.")


def check_not_empty(data, name: str) -> None:
    """Raise ``DataError`` when ``data`` (``train_data`` or ``eval_data``) has no example."""
    if len(data) == 0:
        skip = " or eval_data=None to train without evaluation" if name == "eval_data" else ""
        raise DataError(f"{name} is empty (0 examples); pass a non-empty dataset{skip}.")


def check_batches(data, collate_fn, seed: int, name: str) -> None:
    """Raise ``DataError`` when a batch of non-empty ``data`` (``[data[0]]`` collated under
    ``isolated_rng(seed)``) lacks ``input_ids`` or ``labels``."""
    from nbkit.switches import isolated_rng

    with isolated_rng(seed):
        batch = (collate_fn or torch.utils.data.default_collate)([data[0]])
    keys = sorted(batch) if isinstance(batch, Mapping) else type(batch).__name__
    fix = ("pass collate_fn=mlm.MLMCollator(tokenizer) for MLM or mlm.classification_collator(tokenizer) "
           "for labelled data (or a collate_fn of your own that adds them)")
    if not isinstance(batch, Mapping) or "labels" not in batch:
        raise DataError(f"batches of {name} have no 'labels' (got {keys}): the loop computes the loss from "
                        f"labels (-100 = ignored position); {fix}.")
    if "input_ids" not in batch:
        raise DataError(f"batches of {name} have no 'input_ids' (got {keys}); tokenize the data first, "
                        f"and {fix}.")


def check_sequence_length(model, data, name: str, pad_multiple: int | None = None) -> None:
    """Raise ``ConfigError`` when an example of ``data``, padded up to ``pad_multiple``, is longer than the
    model's ``max_position_embeddings`` (BERT would fail at the first step with a tensor-size error).

    Data with an int ``block_size`` (``nbkit.corpus.StoreMLMDataset``) is taken at its word, a
    ``datasets.Dataset`` read as one column; models without that field or data without ``input_ids`` pass.
    """
    from nbkit.text.mlm import check_length
    from nbkit.train.batching import input_lengths

    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if limit is None:
        return
    fixed = getattr(data, "block_size", None)   # a store of fixed-size blocks (nbkit.corpus): no full scan
    try:
        lengths = [fixed] if isinstance(fixed, int) else input_lengths(data)
    except DataError:
        return
    longest = max(lengths)
    padded = -(-longest // pad_multiple) * pad_multiple if pad_multiple else longest
    if padded <= limit:
        return
    try:
        check_length("sequence length", padded, max_position_embeddings=limit)
    except ConfigError as err:
        pad = f" (padded to a multiple of {pad_multiple}: {padded})" if padded != longest else ""
        raise ConfigError(
            f"{name} has sequences of up to {longest} tokens{pad} but the model's max_position_embeddings is "
            f"{limit} ({err}). Re-encode with max_length <= {limit} (text.encode_classification(..., max_length="
            f"{limit}) / make_blocks(block_size={limit})), or build the model with max_position_embeddings >= "
            f"{padded}.") from None


def _id_range(data) -> tuple[int, int] | None:
    """``(min, max)`` token id of ``data``'s ``input_ids`` (None without them): a declared ``token_id_range``
    taken at its word, a ``datasets.Dataset`` read as one Arrow column, else example by example.
    """
    declared = getattr(data, "token_id_range", None)   # e.g. a corpus store: its tokenizer's bound, no scan
    if declared is not None:
        return tuple(declared)
    names = getattr(data, "column_names", None)
    if names is not None:
        if "input_ids" not in names:
            return None
        import pyarrow.compute as pc

        flat = pc.list_flatten(data.with_format("arrow")["input_ids"])   # the selected rows (select/shuffle kept)
        got = pc.min_max(flat).as_py()
        return None if got["min"] is None else (int(got["min"]), int(got["max"]))
    lo, hi = None, None
    for i in range(len(data)):
        ex = data[i]
        ids = ex.get("input_ids") if isinstance(ex, Mapping) else None
        if ids is None:
            return None
        t = torch.as_tensor(ids)
        if t.numel() == 0:
            continue
        a, b = int(t.min()), int(t.max())
        lo, hi = (a, b) if lo is None else (min(lo, a), max(hi, b))
    return None if lo is None else (lo, hi)


def check_token_ids(model, data, name: str) -> None:
    """Raise ``DataError`` when a token id of ``data`` is negative or >= the model's embedding rows (the
    data was tokenized with another tokenizer; the first step would fail with a raw ``IndexError``).
    Models without a vocabulary size, and data without ``input_ids``, pass.
    """
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    vocab = getattr(emb, "num_embeddings", None) or getattr(getattr(model, "config", None), "vocab_size", None)
    if not vocab:
        return
    got = _id_range(data)
    if got is None or (got[0] >= 0 and got[1] < vocab):
        return
    lo, hi = got
    what = f"a token id of {hi}" if hi >= vocab else f"a negative token id ({lo})"
    raise DataError(
        f"{name} has {what} but the model's vocab_size is {vocab} (ids 0..{vocab - 1}): the tokenizer that "
        f"encoded the data and the model disagree. Fix: build the model with vocab_size=len(tokenizer) "
        f"(models.build_mlm_model / build_classifier(tokenizer=...) do), or encode the data with the "
        f"model's own tokenizer.")


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else repr(v)


def warn_resume_changes(loop, state: dict, path) -> None:
    """Warn once (``UserWarning``) when the resumed ``loop`` cannot do what its config asks.

    ``state``: the checkpoint's. A checkpoint at/after ``max_steps``: nothing to train. Otherwise each differing
    :data:`RUN_SETTINGS` field is listed ``old -> new`` with what happens to it: :data:`SCHEDULE_SETTINGS` stay
    the checkpoint's (its length re-planned to ``max_steps``), :data:`ORDER_SETTINGS` apply from the next
    epoch, the others from the next step.
    """
    cfg, step = loop.config, loop.state.step
    if step >= cfg.max_steps:
        warnings.warn(f"checkpoint at step {step} >= max_steps={cfg.max_steps}: nothing to train; fit() "
                      f"returns the checkpoint's state ({path}). To train further raise max_steps above "
                      f"{step} with output_dir={str(cfg.output_dir)!r} (a recipe names its run folder after the "
                      f"settings you change, so a new max_steps alone starts another run); to train a new "
                      f"{cfg.max_steps}-step run use {START_FRESH}.", UserWarning, stacklevel=4)
        return
    saved = state.get("config") or {}
    w_old, w_new = int(state.get("world_size", 1)), loop.dist.world_size
    same_global = (saved.get("batch_size", cfg.batch_size) * saved.get("grad_accum_steps", 1) * w_old
                   == cfg.batch_size * cfg.grad_accum_steps * w_new)   # a re-split of one global batch
    diffs = [(k, saved[k], getattr(cfg, k)) for k in RUN_SETTINGS if k in saved and saved[k] != getattr(cfg, k)
             and not (k in ("batch_size", "grad_accum_steps") and same_global and w_old != w_new)
             and not (k == "batch_size" and saved[k] * w_old == cfg.batch_size * w_new)]
    if not diffs:
        return
    sched = loop.scheduler  # restored: the checkpoint's base LR and (nbkit_schedule) shape
    shape = getattr(sched, "nbkit_schedule", None) or {k: getattr(cfg, k) for k in ("scheduler", "max_steps")}
    lines = []
    for k, old, new in diffs:
        if k in SCHEDULE_SETTINGS:
            what = "NOT applied: the checkpoint's optimizer/LR schedule continues"
        elif k == "batch_size" and w_old != w_new:
            what = (f"per process; global batch {old * w_old} -> {new * w_new} with {w_old} -> {w_new} "
                    f"processes, applied from step {step + 1}")
        elif k in ORDER_SETTINGS or (k == "batch_size" and cfg.group_by_length):
            what = (f"applied from step {step + 1}; epoch {loop.state.epoch} keeps the checkpoint's example order, "
                    f"so each of its examples is still seen once; the new order starts with epoch {loop.state.epoch + 1}")
        elif k == "max_steps":
            what = (f"applied: the LR schedule is re-planned to {new} steps, so steps {step + 1}-{new} get the "
                    f"LR a fresh {new}-step run has there; steps 1-{step} had the {old}-step schedule's")
        else:
            what = f"applied from step {step + 1}"
        lines.append(f"  {k}: {_fmt(old)} -> {_fmt(new)} ({what})")
    base = sched.base_lrs[0]
    lrs = [base * sched.lr_lambdas[0](s) for s in range(step, cfg.max_steps)]  # LR of steps step+1..max_steps
    lr_note = f"the LR of steps {step + 1}-{cfg.max_steps} goes from {lrs[0]:.3g} to {lrs[-1]:.3g}"
    if max(lrs) == 0.0:
        lr_note = f"the LR of steps {step + 1}-{cfg.max_steps} is 0: these steps will not change the weights"
    warnings.warn(
        f"resuming from {path} (step {step}) with settings that differ from the checkpoint's:\n"
        + "\n".join(lines) + "\n"
        f"The optimizer and LR schedule continue from the checkpoint (lr={_fmt(base)}, "
        f"{shape['scheduler']}, over max_steps={shape['max_steps']}): {lr_note}.\n"
        f"Fix: to train with the new settings from step 0 use {START_FRESH}; to start a fresh schedule from "
        f"these weights, load them (checkpoint.load_model_weights(model, '{path}/model')) into a run "
        "with a new output_dir; to continue unchanged, pass the checkpoint's settings.",
        UserWarning, stacklevel=4)
