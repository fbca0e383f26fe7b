"""A ``DistributedSampler`` whose position can be saved and restored, even under another world size.

Every epoch has one global order fixed by ``seed + epoch``; rank r of W takes every W-th index from r. What the
job consumed is then a prefix of that order whatever W is, so the resume state is ``(epoch, consumed global
samples)``: drop that prefix, shard the rest over the new world size. A resume pins the epoch in progress to
the saved order's inputs (:meth:`~ResumableDistributedSampler.pin_order`).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch.utils.data import DistributedSampler

from nbkit.errors import CheckpointError, ConfigError

_CHUNK = 65536  # indices turned into Python ints at a time while iterating


class ResumableDistributedSampler(DistributedSampler):
    """``DistributedSampler`` over ``dataset_size`` samples with ``advance``/``state_dict``/``load_state_dict`` for
    exact resume. ``num_replicas`` W, ``rank`` and ``seed`` as there (the seed the same on every rank);
    ``shuffle``: ``torch.randperm`` seeded by ``seed + epoch``, else 0..n-1; ``drop_last``: drop the tail that does
    not divide by W instead of padding it by repeating. ``lengths`` (tokens per sample): with ``shuffle`` the
    order groups similar lengths in groups of ``group_size`` (``batch_size * W``), as ``transformers``'
    ``get_length_grouped_indices``. The loop calls ``set_epoch(e)`` per epoch and ``advance(n)`` after each
    consumed micro-batch (a DataLoader prefetches, so the sampler cannot count it).

    Raises:
        ConfigError: ``dataset_size < 1``, ``rank`` outside ``[0, W)``, or not one length per sample.
    """

    def __init__(self, dataset_size: int, num_replicas: int = 1, rank: int = 0, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False, lengths=None, group_size: int = 1):
        if dataset_size < 1:
            raise ConfigError("the dataset is empty; give at least one sample (check the data split)")
        if not 0 <= rank < num_replicas:
            raise ConfigError(f"rank {rank} is outside [0, {num_replicas}); take rank and world size "
                              "from nbkit.train.ddp.group.init_distributed()")
        super().__init__(range(dataset_size), num_replicas=num_replicas, rank=rank,
                         shuffle=shuffle, seed=seed, drop_last=drop_last)
        if lengths is not None and len(lengths) != dataset_size:
            raise ConfigError(f"{len(lengths)} lengths for a dataset of {dataset_size} samples; "
                              "give one length per sample")
        self.dataset_size = dataset_size
        self.lengths = None if lengths is None else [int(n) for n in lengths]
        self.group_size = max(int(group_size), 1)
        self.start = 0           # global samples of this epoch consumed before this run resumed
        self.local_consumed = 0  # samples this rank consumed since `start`
        self._pinned: dict | None = None   # a resumed epoch's order inputs (pin_order)
        self._pinned_lengths = None

    # --- what an epoch's order depends on -------------------------------------------------
    def order_key(self, epoch: int | None = None) -> dict:
        """What fixes ``epoch``'s order, as plain data (saved in checkpoints): ``epoch``, ``seed``, ``dataset_size``,
        ``group_size`` (None when not length-grouped).
        """
        epoch = self.epoch if epoch is None else int(epoch)
        if self._pinned is not None and int(self._pinned["epoch"]) == epoch:
            return dict(self._pinned)
        return {"epoch": epoch, "seed": int(self.seed), "dataset_size": int(self.dataset_size),
                "group_size": self.group_size if self.lengths is not None and self.shuffle else None}

    def pin_order(self, key: dict, lengths=None) -> None:
        """Give epoch ``key["epoch"]`` the order ``key`` (a checkpoint's :meth:`order_key`) describes instead of
        this sampler's own; later epochs use this sampler's settings. ``lengths``: needed when ``key`` is
        length-grouped and this sampler is not.

        Raises:
            ConfigError: ``key`` is for another dataset size, or grouped without lengths.
        """
        if int(key.get("dataset_size", self.dataset_size)) != self.dataset_size:
            raise ConfigError(f"the saved order is for {key['dataset_size']} samples, this dataset has "
                              f"{self.dataset_size}; resume with the same data, or start fresh (resume=False)")
        lengths = self.lengths if lengths is None else [int(n) for n in lengths]
        if key.get("group_size") and lengths is None:
            raise ConfigError("the saved order is length-grouped: pass lengths= (one per sample)")
        self._pinned = {"epoch": int(key["epoch"]), "seed": int(key["seed"]), "dataset_size": self.dataset_size,
                        "group_size": None if not key.get("group_size") else int(key["group_size"])}
        self._pinned_lengths = lengths

    # --- order -------------------------------------------------------------------------
    def global_order(self, epoch: int | None = None) -> list[int]:
        """The epoch's order shared by all ranks, as a list of ``dataset_size`` indices (for inspection)."""
        return self.order_array(epoch).tolist()

    def order_array(self, epoch: int | None = None) -> np.ndarray:
        """The epoch's global order, int64 ``(dataset_size,)`` (8 bytes per sample, a Python int ~36)."""
        epoch = self.epoch if epoch is None else epoch
        if not self.shuffle:
            return np.arange(self.dataset_size, dtype=np.int64)
        key = self.order_key(epoch)
        g = torch.Generator()
        g.manual_seed(key["seed"] + epoch)
        if key["group_size"] is not None:
            from transformers.trainer_pt_utils import get_length_grouped_indices

            pinned = self._pinned is not None and key["epoch"] == self._pinned["epoch"]
            lengths = self._pinned_lengths if pinned else self.lengths
            return np.asarray(get_length_grouped_indices(lengths, key["group_size"], generator=g), dtype=np.int64)
        return torch.randperm(self.dataset_size, generator=g).numpy()

    def _remaining_total(self) -> int:
        rem, W = self.dataset_size - self.start, self.num_replicas
        return (rem // W if self.drop_last else math.ceil(rem / W)) * W

    def __iter__(self):
        rest = self.order_array()[self.start:]
        total = self._remaining_total()
        if len(rest) < total and len(rest):  # pad by repeating, as DistributedSampler does
            rest = np.resize(rest, total)
        mine = rest[self.rank:total:self.num_replicas]   # a view: no copy of the epoch's order
        for lo in range(0, len(mine), _CHUNK):
            yield from mine[lo:lo + _CHUNK].tolist()

    def __len__(self) -> int:
        return self._remaining_total() // self.num_replicas

    # --- position ------------------------------------------------------------------------
    def set_epoch(self, epoch: int, start: int | None = None) -> None:
        """Select epoch ``epoch``'s order; ``start``: global samples of it the whole job already consumed.
        Without ``start`` a new epoch starts at 0 and the epoch ``load_state_dict`` restored keeps its position.
        """
        if start is not None:
            if not 0 <= start <= self.dataset_size:
                raise ConfigError(f"start={start} is outside [0, {self.dataset_size}]; it counts "
                                  "global samples (all ranks) consumed in the epoch")
            self.start, self.local_consumed = int(start), 0
        elif epoch != self.epoch:
            self.start, self.local_consumed = 0, 0
        super().set_epoch(epoch)

    def advance(self, n_local: int) -> None:
        """Record that this rank consumed ``n_local`` more samples (one micro-batch)."""
        self.local_consumed += int(n_local)

    @property
    def consumed(self) -> int:
        """Global samples of the current epoch the whole job consumed (capped at the dataset size)."""
        return min(self.start + self.local_consumed * self.num_replicas, self.dataset_size)

    def state_dict(self) -> dict:
        """Plain-Python state for a checkpoint: epoch, consumed (global samples), seed, shuffle, dataset_size,
        world_size (any world size may resume it), grouped, order.
        """
        return {"epoch": int(self.epoch), "consumed": int(self.consumed), "seed": int(self.seed),
                "shuffle": bool(self.shuffle), "dataset_size": int(self.dataset_size),
                "world_size": int(self.num_replicas), "grouped": self.lengths is not None,
                "order": self.order_key()}

    def load_state_dict(self, state: dict) -> None:
        """Continue where ``state`` (of any world size) left off; a finished epoch resumes at the next one's start.

        Raises:
            CheckpointError: ``state`` is for another dataset size, seed, shuffle or length grouping.
        """
        for key, mine in (("dataset_size", self.dataset_size), ("seed", self.seed),
                          ("shuffle", self.shuffle), ("grouped", self.lengths is not None)):
            if key in state and state[key] != mine:
                raise CheckpointError(
                    f"sampler state has {key}={state[key]!r} but this run has {mine!r}; resume with "
                    f"the same data and seed, or start fresh (resume=False)")
        epoch, consumed = int(state["epoch"]), int(state["consumed"])
        if consumed >= self.dataset_size:
            epoch, consumed = epoch + 1, 0
        super().set_epoch(epoch)
        self.start, self.local_consumed = consumed, 0
