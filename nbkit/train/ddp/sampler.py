"""A ``DistributedSampler`` whose position can be saved and restored, even under another world size.

The idea: every epoch has one *global order*, a permutation of the dataset that
depends only on ``seed + epoch`` (the recipe ``torch.utils.data.DistributedSampler``
uses: ``torch.randperm(n, generator=manual_seed(seed + epoch))``). Rank ``r`` of
``W`` takes every W-th index of that order, starting at ``r``. After each rank has
consumed ``c`` samples, the samples consumed by the whole job are exactly the
first ``c * W`` entries of the global order: a prefix, whatever ``W`` is.

So the resume state is ``(epoch, consumed)`` with ``consumed`` counted in *global*
samples, and resuming means "drop the first ``consumed`` entries of this epoch's
global order, then shard the rest over the new world size". Consequences:

- ``world_size == 1`` reproduces the single-process order exactly, and optimizer
  step ``k`` of a W-process run with per-rank batch ``B`` sees the same samples as
  step ``k`` of a 1-process run with batch ``W * B`` (only their order inside the
  batch differs, which changes a summed gradient only by float rounding).
- Resuming under another world size sees exactly the samples not yet seen in the
  epoch, each once. Steps match the uninterrupted run one to one when the global
  batch ``W * B * grad_accum`` is the same before and after; otherwise the same
  samples are grouped into different steps.
- The order's inputs (seed, epoch, and with length grouping the group size, which is
  ``batch_size * W``) are saved with the position (:meth:`ResumableDistributedSampler.order_key`);
  a resume pins the epoch in progress to them (``pin_order``), so changing the seed, batch
  size, world size or grouping on resume still sees every example of that epoch once; the
  new settings shape the order from the next epoch on.
- Without ``drop_last`` the tail of an epoch is padded (repeating the first
  remaining indices) so every rank gets the same number of samples, as in
  ``DistributedSampler``; ``consumed`` is capped at the dataset size.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch.utils.data import DistributedSampler

from nbkit.errors import CheckpointError, ConfigError

_CHUNK = 65536  # indices turned into Python ints at a time while iterating


class ResumableDistributedSampler(DistributedSampler):
    """``DistributedSampler`` with ``advance``/``state_dict``/``load_state_dict`` for exact resume.

    Args:
        dataset_size: number of samples in the dataset.
        num_replicas: world size ``W`` (1 for a single process).
        rank: this process's global rank, ``0 <= rank < W``.
        shuffle: shuffle with ``torch.randperm`` seeded by ``seed + epoch``; else 0..n-1.
        seed: the same on every rank (it defines the shared global order).
        drop_last: drop the epoch's tail that does not divide evenly by ``W``
            instead of padding it.
        lengths: per-sample lengths (tokens); with ``shuffle`` the epoch's order
            groups similar lengths (``transformers.trainer_pt_utils.get_length_grouped_indices``,
            the ``Trainer(group_by_length=True)`` recipe: shuffle, sort mega-batches of
            ``50 * group_size`` by length, longest batch first), so padded batches waste
            less compute. A function of ``seed + epoch`` and ``group_size``: checkpoints keep
            these order inputs (:meth:`order_key`) and a resume pins them (:meth:`pin_order`).
        group_size: samples per global micro-batch (``batch_size * W``); used with ``lengths``.

    Raises:
        ConfigError: ``dataset_size < 1``, or ``rank`` outside ``[0, W)``.

    The loop calls ``set_epoch(e)`` before iterating epoch ``e`` (once per epoch) and
    ``advance(n)`` after consuming a micro-batch of ``n`` local samples; a DataLoader
    may prefetch, so the sampler cannot count consumption itself.
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
        """Plain data that fixes ``epoch``'s global order: ``epoch``, ``seed``, ``group_size``
        (``None`` when not length-grouped), ``dataset_size``. Saved in checkpoints, so a resume
        finishes the epoch in the order it began, whatever settings changed (:meth:`pin_order`)."""
        epoch = self.epoch if epoch is None else int(epoch)
        if self._pinned is not None and int(self._pinned["epoch"]) == epoch:
            return dict(self._pinned)
        return {"epoch": epoch, "seed": int(self.seed), "dataset_size": int(self.dataset_size),
                "group_size": self.group_size if self.lengths is not None and self.shuffle else None}

    def pin_order(self, key: dict, lengths=None) -> None:
        """Give epoch ``key["epoch"]`` the order :meth:`order_key` described (a checkpoint's),
        instead of the one this sampler's own seed, batch size, world size and grouping give.

        The epoch's consumed part is a prefix of its order, so only the same order sees every
        example once after a resume. Later epochs use this sampler's settings. ``lengths``:
        per-sample lengths, needed when ``key`` is length-grouped and this sampler is not.

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
        """The epoch's order shared by all ranks: a list of ``dataset_size`` indices.

        For inspection and tests; iteration uses :meth:`order_array` (8 bytes per sample, not a
        Python list's ~36)."""
        return self.order_array(epoch).tolist()

    def order_array(self, epoch: int | None = None) -> np.ndarray:
        """The epoch's global order as an int64 array of shape ``(dataset_size,)``.

        Memory: 8 bytes per sample (a 10.7 M-block store: 86 MB, where a list of Python ints
        takes ~390 MB); ``torch.randperm``'s tensor is shared, not copied. Length-grouped orders
        come from ``transformers``' list recipe (fine-tuning sizes) and are converted."""
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
        rem = self.dataset_size - self.start
        W = self.num_replicas
        return (rem // W) * W if self.drop_last else math.ceil(rem / W) * W

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
        """Select epoch ``epoch``'s order.

        ``start`` (global samples of the epoch already consumed by the whole job, e.g.
        ``batch_in_epoch * batch_size * world_size``) positions the sampler explicitly.
        Without it, a new epoch starts at its beginning, and the epoch just restored by
        ``load_state_dict`` keeps its restored position.
        """
        if start is not None:
            if not 0 <= start <= self.dataset_size:
                raise ConfigError(f"start={start} is outside [0, {self.dataset_size}]; it counts "
                                  "global samples (all ranks) consumed in the epoch")
            self.start, self.local_consumed = int(start), 0
        elif epoch != self.epoch:
            self.start = 0
            self.local_consumed = 0
        super().set_epoch(epoch)

    def advance(self, n_local: int) -> None:
        """Record that this rank consumed ``n_local`` more samples (one micro-batch)."""
        self.local_consumed += int(n_local)

    @property
    def consumed(self) -> int:
        """Global samples of the current epoch consumed by the whole job (capped at the dataset size).

        Assumes every rank advanced by the same amount, which holds because each
        rank gets ``len(self)`` samples and the loop steps in lockstep.
        """
        return min(self.start + self.local_consumed * self.num_replicas, self.dataset_size)

    def state_dict(self) -> dict:
        """Plain-Python state for a checkpoint: epoch, consumed (global samples), seed, shuffle,
        dataset_size, world_size (informational: any world size may resume it)."""
        return {"epoch": int(self.epoch), "consumed": int(self.consumed), "seed": int(self.seed),
                "shuffle": bool(self.shuffle), "dataset_size": int(self.dataset_size),
                "world_size": int(self.num_replicas), "grouped": self.lengths is not None,
                "order": self.order_key()}

    def load_state_dict(self, state: dict) -> None:
        """Continue where ``state`` left off (written under any world size).

        A finished epoch (``consumed == dataset_size``) resumes at the start of the next.

        Raises:
            CheckpointError: the checkpoint was written for another dataset size, seed,
                shuffle or length-grouping setting, so its position means nothing here.
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
        self.start = consumed
        self.local_consumed = 0
