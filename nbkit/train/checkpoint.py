"""Atomic checkpoints that survive a kill at any moment, and exact resume.

Layout (``output_dir/checkpoints/``)::

    step-000120/
        model/             save_pretrained (config.json + model.safetensors): from_pretrained loads it alone
        trainer_state.pt   optimizer, scheduler, scaler, RNG states, data position, step, history (torch.save)
        COMPLETE           marker, written last

Each save is written into ``step-000120.tmp-<pid>/`` and renamed into place (``nbkit.atomic.atomic_dir``), so
a final name only appears complete. A fresh run sets an earlier run's ``step-*`` folders aside
(:func:`set_aside_earlier`, :func:`prune_previous`); incomplete ``step-*`` folders are skipped with a warning.
"""
from __future__ import annotations

import os
import re
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

from nbkit.atomic import PREVIOUS, fsync_dir
from nbkit.errors import CheckpointError
from nbkit.train.config import START_FRESH

MARKER = "COMPLETE"
STATE_FILE = "trainer_state.pt"
_NAME = re.compile(r"^step-(\d+)$")


@dataclass
class Checkpoint:
    """A complete checkpoint on disk: ``path`` (the step folder), ``step``, ``model_dir``."""

    path: Path
    step: int

    @property
    def model_dir(self) -> Path:
        return self.path / "model"

    def load_state(self, map_location="cpu") -> dict:
        """The ``trainer_state.pt`` dict (``weights_only=False``: it holds RNG states; load only checkpoints you wrote)."""
        import torch

        return torch.load(self.path / STATE_FILE, map_location=map_location, weights_only=False)


def checkpoints_dir(output_dir) -> Path:
    return Path(output_dir) / "checkpoints"


def _size_estimate(output_dir, model) -> int:
    """Bytes a new checkpoint will take: the newest one's size, else 3x the parameters (weights + Adam's two)."""
    from nbkit.atomic import tree_bytes

    done = list_checkpoints(output_dir, warn=False)
    if done:
        return tree_bytes(done[-1].path)
    return 3 * sum(p.numel() * p.element_size() for p in model.parameters())


def save_checkpoint(output_dir, step: int, model, state: dict, keep_last: int | None = 2,
                    keep_steps=()) -> Path:
    """Write a checkpoint for ``step`` atomically; then keep the newest ``keep_last`` (None or 0: all) and those at ``keep_steps``.

    model: the uncompiled ``PreTrainedModel``; state: a picklable dict. Returns the final folder. Hold the
    ``output_dir`` lock (``nbkit.train.run_lock``).

    Raises:
        WriteError: the file system refused the write (nothing of it is left; older checkpoints untouched).
        NonFiniteWeightsError: ``model`` holds NaN/infinite weights (nothing written).
    """
    import torch

    from nbkit.atomic import atomic_dir
    from nbkit.models.bert import check_finite_weights
    from nbkit.models.loading import quiet_transformers

    check_finite_weights(model, f"the checkpoint at step {step}")
    root = checkpoints_dir(output_dir)
    root.mkdir(parents=True, exist_ok=True)
    remove_stale(root)
    final = root / f"step-{step:06d}"
    with atomic_dir(final, replace=True, estimate=_size_estimate(output_dir, model), what="checkpoint") as tmp:
        with quiet_transformers():
            model.save_pretrained(tmp / "model")
        with open(tmp / STATE_FILE, "wb") as f:  # a file object: disk full raises OSError, not torch's C++ error
            torch.save(state, f)
        (tmp / MARKER).write_text(f"step {step}\n")
    if keep_last:
        for ckpt in list_checkpoints(output_dir, warn=False)[:-keep_last]:
            if ckpt.step not in keep_steps:
                discard_checkpoint(ckpt.path)
    return final


def list_checkpoints(output_dir, warn: bool = True) -> list[Checkpoint]:
    """Complete checkpoints under ``output_dir/checkpoints``, oldest first; with ``warn``, a ``UserWarning``
    names each incomplete folder (a killed writer's ``.tmp-``, no ``COMPLETE``, or files a resume reads missing).
    """
    root = checkpoints_dir(output_dir)
    if not root.is_dir():
        return []
    found = []
    for p in sorted(root.iterdir()):
        if p.name.startswith(PREVIOUS):   # an earlier run's, set aside by a fresh one (set_aside_earlier)
            continue
        m = _NAME.match(p.name)
        lacks = missing_files(p, STATE_FILE) if m and (p / MARKER).is_file() else None
        if lacks == []:
            found.append(Checkpoint(p, int(m.group(1))))
        elif warn and lacks:
            warnings.warn(f"ignoring damaged checkpoint {p}: it is marked complete but lacks {', '.join(lacks)}; "
                          "delete it (the others are used).", UserWarning, stacklevel=3)
        elif warn and m and p.is_dir():
            warnings.warn(f"ignoring incomplete checkpoint {p} (no {MARKER} marker: not written by a finished "
                          "save); delete it, or finish copying it.", UserWarning, stacklevel=3)
        elif warn and p.is_dir():
            warnings.warn(f"ignoring incomplete checkpoint {p} (a run was probably killed while saving); "
                          "it is removed at the next save.", UserWarning, stacklevel=3)
    return sorted(found, key=lambda c: c.step)


def set_aside_earlier(output_dir, keep: Path | None = None) -> Path | None:
    """Move an earlier run's checkpoints (every ``step-*`` entry but ``keep``) into
    ``output_dir/checkpoints/previous-<UTC time>/`` (:func:`nbkit.atomic.set_aside`) and return that folder
    (None: nothing there), so ``keep_last`` and a later resume see only the new run. Hold the ``output_dir`` lock."""
    from nbkit.atomic import set_aside

    root = checkpoints_dir(output_dir)
    if not root.is_dir():
        return None
    names = sorted(p.name for p in root.iterdir()
                   if p.name.startswith("step-") and (keep is None or p != Path(keep)))
    return set_aside(root, names)


def prune_previous(output_dir, keep: int) -> list[tuple[Path, int]]:
    """Delete all but the newest ``keep`` ``checkpoints/previous-*`` folders (0: delete none) kill-safely
    (:func:`discard_checkpoint`); returns ``[(folder, bytes freed), ...]``, oldest first. Hold the ``output_dir`` lock."""
    from nbkit.atomic import tree_bytes

    root = checkpoints_dir(output_dir)
    if not keep or not root.is_dir():
        return []
    order = re.compile(rf"^{re.escape(PREVIOUS)}(\d{{8}}-\d{{6}})(?:-(\d+))?$")   # previous-<stamp>[-n]
    found = sorted((m.group(1), int(m.group(2) or 1), p) for p in root.iterdir()
                   if (m := order.match(p.name)) and p.is_dir())
    gone = []
    for *_, p in found[:-keep]:
        size = tree_bytes(p)
        discard_checkpoint(p)
        gone.append((p, size))
    return gone


def load_latest(output_dir) -> Checkpoint | None:
    """The newest complete checkpoint, or None; warns about the incomplete ones it skips. For the run's own process
    (which holds ``output_dir``'s lock): another process may see it pruned before it reads it."""
    ckpts = list_checkpoints(output_dir, warn=True)
    return ckpts[-1] if ckpts else None


class DamagedCheckpoint(CheckpointError):
    """A checkpoint marked complete whose ``trainer_state.pt`` or weights do not load (truncated by a full disk, a
    partial copy); nothing of it was put into the loop."""


def restore_latest(loop) -> tuple[Checkpoint, dict] | None:
    """Restore ``loop`` from the newest complete checkpoint that loads (:func:`restore_loop`); ``(found, state)``,
    or None when there is none. A damaged one (:class:`DamagedCheckpoint`) is skipped with a ``UserWarning`` naming
    it and the fix, and the one before it is used; incomplete ones are skipped with a warning. For the run's own
    process (which holds ``output_dir``'s lock): another process may see a checkpoint pruned before it reads it.

    Raises:
        DamagedCheckpoint: every complete checkpoint is damaged (the oldest's fault named, with the fix).
        CheckpointError, ConfigError: what :func:`restore_loop` raises for a checkpoint that loads but does not fit.
    """
    ckpts = list_checkpoints(loop.config.output_dir, warn=True)
    for found in reversed(ckpts):
        try:
            return found, restore_loop(loop, found)
        except DamagedCheckpoint as exc:
            if found is ckpts[0]:
                raise DamagedCheckpoint(f"{exc}; no earlier complete checkpoint loads either. Fix: delete the "
                                        f"damaged step-* folders, or start fresh with {START_FRESH}.") from exc
            warnings.warn(f"{exc}; resuming from the checkpoint before it instead. Delete {found.path} to silence "
                          "this.", UserWarning, stacklevel=3)
    return None


def _load(path: Path, read):
    """``read(path)``, a failure to read the file raised as :class:`DamagedCheckpoint` naming it."""
    try:
        return read(path)
    except Exception as exc:  # noqa: BLE001  (torch.load and safetensors raise many kinds for a damaged file)
        raise DamagedCheckpoint(f"checkpoint {path.parent if path.parent.name != 'model' else path.parent.parent} "
                                f"is damaged: {path.name} does not load ({type(exc).__name__}: "
                                f"{str(exc)[:200]})") from exc


def load_model_weights(model, model_dir) -> None:
    """Load ``model_dir/*.safetensors`` into ``model`` in place; missing keys are accepted only when tied to
    a loaded tensor (BERT's MLM decoder is the word embedding).

    Raises:
        DamagedCheckpoint: a weights file does not load.
        CheckpointError: no weights file, or weights whose names or shapes do not fit the model (the fix named).
    """
    from safetensors.torch import load_file

    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"no *.safetensors in {model_dir}; point resume at a checkpoint written by nbkit.")
    weights = {}
    for f in files:
        weights.update(_load(f, lambda p: load_file(str(p))))
    sd = model.state_dict()
    weights = {_current_name(k, sd): v for k, v in weights.items()}
    shapes = [f"{k} {tuple(v.shape)} in the checkpoint, {tuple(sd[k].shape)} in the model"
              for k, v in weights.items() if k in sd and v.shape != sd[k].shape]
    if shapes:
        raise CheckpointError(_mismatch(model_dir, model, f"{len(shapes)} weight shapes differ", shapes))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    loaded_ptrs = {sd[k].data_ptr() for k in weights if k in sd}
    untied = [k for k in missing if sd[k].data_ptr() not in loaded_ptrs]
    if untied or unexpected:
        details = [f"missing from the checkpoint: {k}" for k in untied] + [f"not in the model: {k}" for k in unexpected]
        raise CheckpointError(_mismatch(model_dir, model, f"{len(untied)} weights missing, {len(unexpected)} "
                                        "unexpected", details))


#: TensorFlow-era LayerNorm names (bert-base-chinese's files, kept by save_pretrained) -> PyTorch's
LEGACY_SUFFIXES = ((".gamma", ".weight"), (".beta", ".bias"))


def _current_name(key: str, state: dict) -> str:
    """``key`` as the model names it: ``...LayerNorm.gamma`` -> ``...LayerNorm.weight`` when only that is in ``state``."""
    if key in state:
        return key
    for old, new in LEGACY_SUFFIXES:
        if key.endswith(old) and key[:-len(old)] + new in state:
            return key[:-len(old)] + new
    return key


#: config.json fields shown when a checkpoint does not fit the model (what a preset changes).
_SHAPE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                 "max_position_embeddings", "type_vocab_size")


def _mismatch(model_dir, model, summary: str, details: list[str], show: int = 5) -> str:
    """The CheckpointError text: one-line summary and fix first, then at most ``show`` details."""
    import json

    changed = ""
    try:
        saved = json.loads((Path(model_dir) / "config.json").read_text())
        now = model.config.to_dict()
        diffs = [f"{k} {saved[k]} -> {now[k]}" for k in _SHAPE_FIELDS
                 if k in saved and k in now and saved[k] != now[k]]
        changed = f" (config.json vs this model: {', '.join(diffs)})" if diffs else ""
    except (OSError, ValueError, AttributeError):
        pass
    more = f"; and {len(details) - show} more" if len(details) > show else ""
    return (f"checkpoint {model_dir} does not match this model: {summary}{changed}. Fix: build the model "
            "with the same config as the checkpoint (e.g. the same preset and tokenizer), or start fresh "
            f"with {START_FRESH}. First differences: {'; '.join(details[:show])}"
            f"{more}.")


def loop_state(loop) -> dict:
    """Everything but the weights that exact resume needs from a ``Loop``: optimizer, scheduler and scaler
    states, this process's RNG states, the data position (see :func:`global_position`), counters, history, config.
    """
    import dataclasses

    from nbkit.switches import capture_rng

    st = loop.state
    return {"step": st.step, "epoch": st.epoch, "batch_in_epoch": st.batch_in_epoch,
            "epoch_start": st.epoch_start, "world_size": loop.dist.world_size,
            "skipped_steps": st.skipped_steps, "consecutive_nonfinite": st.consecutive_nonfinite,
            "train_tokens": st.train_tokens, "skipped_examples": st.skipped_examples, "history": st.history,
            "optimizer": loop.optimizer.state_dict(), "scheduler": loop.scheduler.state_dict(),
            "scaler": loop.scaler.state_dict() if loop.scaler else None, "rng": capture_rng(),
            "config": {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(loop.config).items()},
            "precision": loop.precision.name,
            "order": loop.sampler.order_key(st.epoch)}


def save_loop(loop) -> Path:
    """Checkpoint ``loop`` at its current step; returns the folder. Under DDP every rank calls it: the ranks'
    RNG states are gathered (``rng_per_rank``), rank 0 writes, and all wait at a barrier until it is complete.

    Raises:
        NonFiniteWeightsError: the model holds NaN/infinite weights (every rank raises; nothing written).
    """
    from nbkit.models.bert import check_finite_weights
    from nbkit.switches import capture_rng
    from nbkit.train.ddp import group as D

    info = loop.dist
    if info.is_distributed:   # every rank (DDP keeps the weights equal), so none waits for a rank 0 that refused
        check_finite_weights(loop.model, f"the checkpoint at step {loop.state.step}")
    rngs = D.all_gather_object(capture_rng()) if info.is_distributed else None
    path = checkpoints_dir(loop.config.output_dir) / f"step-{loop.state.step:06d}"
    if info.is_main:
        state = loop_state(loop)
        if rngs is not None:
            state["rng_per_rank"] = rngs
        path = save_checkpoint(loop.config.output_dir, loop.state.step, loop.model, state,
                               keep_last=loop.config.keep_last, keep_steps=loop.config.keep_steps)
    D.barrier()
    return path


def restore_loop(loop, found: Checkpoint) -> dict:
    """Inverse of :func:`loop_state` plus the weights: put ``loop`` where ``found`` was saved, under any world size.

    The optimizer and LR schedule are the checkpoint's, its length re-planned to this run's ``max_steps``
    (:func:`replan_lr`). RNG states: each rank its own when the world size is unchanged, else rank 0 the saved
    ones and the others fresh streams. The epoch in progress keeps its saved example order (:func:`saved_order`).
    Returns the loaded state (``config``: the saved TrainConfig as plain data).

    Raises:
        DamagedCheckpoint: its state or weights file does not load (before anything is put into ``loop``).
        CheckpointError: the checkpoint's identity is not the run's (:func:`check_identity`), or the weights do
            not fit the model.
        ConfigError: the saved order is for another dataset size.
    """
    from nbkit.switches import restore_rng
    from nbkit.train.batching import input_lengths
    from nbkit.train.ddp.group import seed_rank
    from nbkit.train.optim import build_scheduler

    s = _load(found.path / STATE_FILE, lambda p: found.load_state())
    check_identity((s.get("config") or {}).get("identity"), loop.config.identity, found.path)
    load_model_weights(loop.model, found.model_dir)
    shape = s["scheduler"].get("nbkit_schedule")  # absent: keep the loop's
    planned = getattr(loop.scheduler, "nbkit_schedule", None)
    if shape:   # the checkpoint's scheduler and warm-up ratio, over this run's max_steps (re-planned)
        planned = {**shape, "max_steps": loop.config.max_steps}
        if planned != getattr(loop.scheduler, "nbkit_schedule", None):
            # before the optimizer state: building a LambdaLR sets the groups' lr, which that state then restores
            loop.scheduler = build_scheduler(loop.optimizer, shape["scheduler"], planned["max_steps"],
                                             shape["warmup_ratio"])
    loop.optimizer.load_state_dict(s["optimizer"])
    loop.scheduler.load_state_dict(s["scheduler"])   # its step count; it also brings back the saved shape
    if shape and shape["max_steps"] != planned["max_steps"]:
        replan_lr(loop.scheduler, planned)
    if loop.scaler is not None and s.get("scaler"):
        loop.scaler.load_state_dict(s["scaler"])
    for k in ("step", "skipped_steps", "consecutive_nonfinite", "train_tokens"):
        setattr(loop.state, k, s[k])
    loop.state.skipped_examples = s.get("skipped_examples", 0)
    loop.state.epoch, loop.state.epoch_start = global_position(s, len(loop.train_data))
    key = saved_order(s)    # the epoch in progress keeps its saved order (each example once); later ones the loop's
    if key is not None and int(key["epoch"]) == loop.state.epoch:
        key.setdefault("dataset_size", len(loop.train_data))   # pin_order raises ConfigError for another size
        regroup = key.get("group_size") and loop.sampler.lengths is None
        loop.sampler.pin_order(key, input_lengths(loop.train_data) if regroup else None)
    loop.state.batch_in_epoch = 0
    loop.state.history = list(s["history"])
    info = loop.dist
    per_rank = s.get("rng_per_rank")
    if per_rank is not None and len(per_rank) == info.world_size:
        restore_rng(per_rank[info.rank])
    else:
        restore_rng(s["rng"])
        if info.rank > 0:   # another world size: rank 0 continues the saved stream, the others start fresh
            seed_rank(loop.config.seed + loop.state.step, info.rank)
    return s


def replan_lr(scheduler, shape: dict) -> None:
    """Give a restored LR ``scheduler`` the schedule ``shape`` (another ``max_steps``) from its step on: each
    group's lr becomes ``base_lr x lambda(step)``, the LR a fresh run of that length has at this step (as HF
    Trainer does on resume), so a longer run does not keep the old schedule's end LR."""
    scheduler.nbkit_schedule = dict(shape)
    step = scheduler.last_epoch
    for group, base, fn in zip(scheduler.optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas):
        group["lr"] = base * fn(step)
    scheduler._last_lr = [g["lr"] for g in scheduler.optimizer.param_groups]


def check_identity(saved: dict | None, now: dict | None, path) -> None:
    """Refuse to resume the checkpoint at ``path`` when an entry of its saved ``TrainConfig.identity`` differs
    from this run's (a key missing on either side is not compared).

    Raises:
        CheckpointError: naming each differing entry (``tokenizer``: the checkpoint's vs this run's hash;
            ``block_size``: both sizes), the cause and the fix (the checkpoint's setting, or start fresh).
    """
    keys = [k for k in sorted(set(saved or {}) & set(now or {})) if saved[k] != now[k]]
    if not keys:
        return
    differ = "; ".join(f"{k}: checkpoint {saved[k]} vs this run {now[k]}" for k in keys)
    if keys == ["block_size"]:
        raise CheckpointError(
            f"the checkpoint {path} was trained on blocks of {saved['block_size']} tokens, this run cuts its text "
            f"into blocks of {now['block_size']} ({differ}): the saved data order counts blocks of the old size "
            f"(another number of them) and the model's positions were sized for it. Fix: resume with "
            f"block_size={saved['block_size']} (the checkpoint's), or, to train on {now['block_size']}-token "
            f"blocks, start fresh with {START_FRESH}.")
    raise CheckpointError(
        f"the checkpoint {path} was trained on other data than this run reads ({differ}): with "
        "another tokenizer the same ids mean other tokens, so resuming would train the old embedding rows on "
        f"new meanings. Fix: {START_FRESH}; or go back to the "
        "tokenizer the checkpoint was trained with"
        + (f" and block_size={saved['block_size']}" if "block_size" in keys else "") + ".")


def global_position(state: dict, dataset_size: int) -> tuple[int, int]:
    """``(epoch, global samples consumed in it)`` from a loop checkpoint ``state`` of any world size.

    Consumed = ``epoch_start`` (absent: 0) + ``batch_in_epoch`` x ``config["batch_size"]`` (per process)
    x ``world_size`` (absent: 1); a finished epoch rolls over to ``(epoch + 1, 0)``.
    """
    consumed = (int(state.get("epoch_start", 0)) + int(state["batch_in_epoch"])
                * int(state["config"]["batch_size"]) * int(state.get("world_size", 1)))
    epoch = int(state["epoch"])
    if consumed >= dataset_size:
        return epoch + 1, 0
    return epoch, consumed


def saved_order(state: dict) -> dict | None:
    """The order inputs (``ResumableDistributedSampler.order_key``) of the epoch a checkpoint ``state``
    was in: ``state["order"]``, else rebuilt from the saved config; None if unknown."""
    if state.get("order"):
        return dict(state["order"])
    cfg = state.get("config") or {}
    if "seed" not in cfg:
        return None
    grouped = cfg.get("group_by_length")
    return {"epoch": int(state["epoch"]), "seed": int(cfg["seed"]),
            "group_size": int(cfg["batch_size"]) * int(state.get("world_size", 1)) if grouped else None}


def keep_global_batch(state: dict, batch_size: int, grad_accum_steps: int, world_size: int) -> tuple[int, str | None, bool]:
    """``(grad_accum_steps, note, kept)`` for resuming checkpoint ``state`` under ``world_size`` processes.

    When only the world size changed: the accumulation that keeps the saved global batch if one divides evenly
    (``kept``), else the given one with a note naming both global batches and the fix (not ``kept``).
    Nothing to say: ``(grad_accum_steps, None, True)``.
    """
    saved = state.get("config") or {}
    then = int(state.get("world_size", 1))
    same = (int(saved.get("batch_size", batch_size)) == batch_size
            and int(saved.get("grad_accum_steps", 1)) == grad_accum_steps)
    if then == world_size or not same:
        return grad_accum_steps, None, True
    global_then, per_step = batch_size * grad_accum_steps * then, batch_size * world_size
    if global_then % per_step == 0:
        k = global_then // per_step
        return k, (f"grad_accum_steps {grad_accum_steps} -> {k} keeps the global batch at {global_then} "
                   f"({batch_size} x {k} x {world_size} processes; the checkpoint's: {batch_size} x "
                   f"{grad_accum_steps} x {then})"), True
    return grad_accum_steps, (
        f"resuming a checkpoint of {then} process{'es' if then != 1 else ''} under {world_size} changes the global "
        f"batch from {global_then} to {batch_size * grad_accum_steps * world_size} sequences per step: no whole "
        f"grad_accum_steps keeps {global_then} with batch_size {batch_size}. To keep it, choose batch_size and "
        f"grad_accum_steps with batch_size x grad_accum_steps x {world_size} = {global_then}."), False


_LEFTOVER = re.compile(r"\.(?:tmp|old)-(\d+)$")


def discard_checkpoint(path) -> None:
    """Delete the checkpoint folder ``path`` kill-safely: renamed to ``<name>.old-<pid>`` (the loader no longer
    sees it) before its files go; a kill in between leaves a leftover :func:`remove_stale` deletes. Gone already: no error.
    """
    path = Path(path)
    trash = path.with_name(f"{path.name}.old-{os.getpid()}")
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return
    fsync_dir(path.parent)
    shutil.rmtree(trash, ignore_errors=True)


def remove_stale(root) -> list[Path]:
    """Delete the ``.tmp-<pid>``/``.old-<pid>`` folders in ``root`` whose writer is dead or this process, and
    return them; a live writer's (``nbkit.folder_lock.pid_alive``, pids of this machine) stays.
    """
    from nbkit.folder_lock import pid_alive

    gone = []
    for p in Path(root).iterdir():
        m = _LEFTOVER.search(p.name)    # step-NNNNNN.tmp-<pid> / .old-<pid>: the writer's pid
        pid = int(m.group(1)) if m else None
        if pid is None or (pid != os.getpid() and pid_alive(pid)):
            continue
        shutil.rmtree(p, ignore_errors=True)
        gone.append(p)
    return gone


def missing_files(path, state_file: str) -> list[str]:
    """Files a resume needs that the checkpoint folder ``path`` lacks: ``state_file``, ``model/config.json``,
    a ``model/*.safetensors``.
    """
    path = Path(path)
    missing = [n for n in (state_file, "model/config.json") if not (path / n).is_file()]
    if not any((path / "model").glob("*.safetensors")):
        missing.append("model/*.safetensors")
    return missing
