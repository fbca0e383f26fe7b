"""DDP mechanics of nbkit's loop that are more than one call (see ``nbkit.train.ddp.group``).

The resumable sampler for this rank, joining a process group only under torchrun,
per-rank RNG streams, where a checkpoint's data position is in global samples, and
sharded evaluation. Each works unchanged for one process (world size 1).
"""
from __future__ import annotations

import os

from nbkit.train.ddp.group import DistInfo


def make_sampler(dataset, shuffle: bool = True, seed: int = 0, dist_info: DistInfo | None = None,
                 drop_last: bool = False, lengths=None, batch_size: int = 1):
    """A resumable sampler for this rank; see ``nbkit.train.ddp.sampler.ResumableDistributedSampler``.

    ``lengths`` (one per sample) groups similar lengths into the same global
    micro-batch of ``batch_size * world_size`` samples.

    ``dataset`` is a sized dataset or its length. Use it for one process too
    (``dist_info=None`` means rank 0 of 1): the single-process order is then the
    same global order N processes share, which is what lets checkpoints move
    between 1 and N processes.
    """
    from nbkit.train.ddp.sampler import ResumableDistributedSampler

    info = dist_info or DistInfo()
    n = dataset if isinstance(dataset, int) else len(dataset)
    return ResumableDistributedSampler(n, num_replicas=info.world_size, rank=info.rank,
                                       shuffle=shuffle, seed=seed, drop_last=drop_last,
                                       lengths=lengths, group_size=batch_size * info.world_size)


# ----- loop-side mechanics used by nbkit.train.loop.Loop ------------------------------------------
def launched_by_torchrun(env: dict | None = None) -> bool:
    """True when torchrun started this process as one of several (``WORLD_SIZE`` > 1).

    A single process, and ``torchrun --nproc-per-node=1``, need no process group:
    the loop then behaves exactly as in a notebook kernel. The rules (torchrun's marker or
    ``NBKIT_DISTRIBUTED=1``; inherited or incomplete variables are a ``ConfigError``):
    ``nbkit.train.ddp.rendezvous.should_join``.
    """
    from nbkit.train.ddp.rendezvous import should_join

    return should_join(os.environ if env is None else env)


def launch_world_size(env: dict | None = None) -> int:
    """Processes this job trains with: torchrun's ``WORLD_SIZE`` when this process joins a group
    (:func:`launched_by_torchrun`), else 1 (a notebook kernel, ``--nproc-per-node=1``).

    Read before the :class:`nbkit.train.Loop` exists, so a recipe counts epochs and passes in
    global batches (``batch_size * grad_accum_steps * world_size`` examples per optimizer step).
    Raises ``ConfigError`` on inherited or inconsistent torchrun variables (as the loop would).
    """
    env = os.environ if env is None else env
    return DistInfo.from_env(env).world_size if launched_by_torchrun(env) else 1


def saved_order(state: dict) -> dict | None:
    """The order inputs of the epoch a loop checkpoint ``state`` was in (``order_key`` of
    ``nbkit.train.ddp.sampler``): saved as ``state["order"]``; for checkpoints written before
    that, rebuilt from the saved config (seed; ``batch_size * world_size`` when length-grouped)."""
    if state.get("order"):
        return dict(state["order"])
    cfg = state.get("config") or {}
    if "seed" not in cfg:
        return None
    grouped = cfg.get("group_by_length")
    return {"epoch": int(state["epoch"]), "seed": int(cfg["seed"]),
            "group_size": int(cfg["batch_size"]) * int(state.get("world_size", 1)) if grouped else None}


def restore_order(loop, state: dict) -> None:
    """Pin the resumed epoch of ``loop.sampler`` to the order ``state`` was written in.

    Called by ``nbkit.train.checkpoint.restore_loop`` after the position is restored
    (``loop.state.epoch``/``epoch_start``). A finished epoch needs nothing: the next one
    uses the loop's own settings. A checkpoint of another dataset size is refused there.
    """
    from nbkit.train.batching import input_lengths

    key = saved_order(state)
    if key is None or int(key["epoch"]) != loop.state.epoch:
        return
    key.setdefault("dataset_size", len(loop.train_data))
    sampler = loop.sampler
    lengths = input_lengths(loop.train_data) if key.get("group_size") and sampler.lengths is None else None
    sampler.pin_order(key, lengths)


def replace_device(info: DistInfo, device) -> DistInfo:
    """``info`` with ``device`` (a ``torch.device`` or string) in place of its own."""
    import dataclasses

    return dataclasses.replace(info, device=str(device))


def seed_streams(seed: int, info: DistInfo) -> None:
    """Seed this rank's global RNG streams (Python, NumPy, torch, CUDA) when a loop is built.

    Dropout and an MLM collator draw from the global RNGs: unseeded, two runs of the
    same notebook drew different dropout masks and gave different losses. As
    ``transformers.Trainer`` does, the loop seeds them from ``config.seed`` (a resume
    then restores the checkpoint's RNG states): rank 0 with ``seed``, so a one-process
    run and rank 0 agree, ranks r > 0 as :func:`seed_rank_streams`.
    """
    import random

    import numpy as np
    import torch

    if info.rank > 0:
        seed_rank_streams(seed, info)
        return
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def seed_rank_streams(seed: int, info: DistInfo) -> None:
    """Give ranks 1..W-1 their own RNG streams (Python, NumPy, torch, CUDA); rank 0 keeps its own.

    Dropout and an MLM collator draw from the global RNGs; identical streams on all
    ranks would draw identical masks for different samples. Rank ``r`` > 0 is seeded
    with ``seed + 1_000_003 * r`` (a prime stride, so streams of nearby seeds never
    coincide); rank 0 is left untouched so a one-process run and rank 0 agree.
    """
    if info.rank == 0:
        return
    import random

    import numpy as np
    import torch

    s = seed + 1_000_003 * info.rank
    random.seed(s)
    np.random.seed(s % 2**32)
    torch.manual_seed(s)


def global_position(state: dict, dataset_size: int) -> tuple[int, int]:
    """``(epoch, global samples consumed in it)`` from a loop checkpoint state (any world size).

    ``state`` holds ``epoch``, ``batch_in_epoch`` (local micro-batches since
    ``epoch_start``), ``epoch_start`` (global samples consumed before them; absent in
    older checkpoints = 0), ``world_size`` (absent = 1) and ``config["batch_size"]``
    (per process). A finished epoch rolls over to ``(epoch + 1, 0)``.
    """
    consumed = (int(state.get("epoch_start", 0)) + int(state["batch_in_epoch"])
                * int(state["config"]["batch_size"]) * int(state.get("world_size", 1)))
    epoch = int(state["epoch"])
    if consumed >= dataset_size:
        return epoch + 1, 0
    return epoch, consumed


def eval_shard(n_examples: int, batch_size: int, max_batches: int | None,
               info: DistInfo) -> list[tuple[int, list[int]]]:
    """This rank's evaluation batches: ``[(batch_index, example indices), ...]``.

    The eval set is cut into the same consecutive batches a single process uses
    (``batch_size`` per batch, at most ``max_batches``), and rank ``r`` takes batches
    ``r, r + W, ...``. The loop seeds each batch's masking by its ``batch_index``, so
    summed metrics do not depend on the world size.
    """
    n_batches = -(-n_examples // batch_size)
    if max_batches:
        n_batches = min(n_batches, max_batches)
    return [(i, list(range(i * batch_size, min((i + 1) * batch_size, n_examples))))
            for i in range(info.rank, n_batches, info.world_size)]
