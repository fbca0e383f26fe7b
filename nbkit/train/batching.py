"""Resumable batching for exact resume (the data order itself: ``nbkit.train.ddp.sampler``).

Collation (where an MLM collator draws its masks) runs under ``isolated_rng`` seeded by the run's
seed, the epoch and the batch's sample indices (:class:`SeededCollate`): a batch's masks depend only
on which samples it holds, with any ``num_workers``, before or after a resume, and collating never
moves the global RNG dropout draws from.
"""
from __future__ import annotations

from collections.abc import MutableMapping

import numpy as np
import torch
import torch.nn.functional as F

from nbkit.errors import DataError
from nbkit.switches import isolated_rng
from nbkit.train.workers import loader_timeout


class IndexedDataset(torch.utils.data.Dataset):
    """``data`` whose items come with their index: ``ds[i] == (i, data[i])``; batched fetches stay batched."""

    def __init__(self, data):
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i):
        return i, self.data[i]

    def __getitems__(self, indices: list) -> list:
        # DataLoader fetches a whole batch at once when the dataset can (datasets.Dataset can:
        # one Arrow read per batch instead of one per example); keep that fast path.
        fetch = getattr(self.data, "__getitems__", None)
        examples = fetch(indices) if fetch else [self.data[i] for i in indices]
        return list(zip(indices, examples))


#: keys a collated batch carries besides the model's inputs: its examples' dataset indices, and how many of its
#: examples were left out (``TrainConfig.skip_examples``); ``Loop.batch_stream`` takes them off
INDEX_KEY, SKIPPED_KEY = "nbkit_example_index", "nbkit_skipped"


class SeededCollate:
    """Collate ``(index, example)`` pairs under every RNG seeded from ``SeedSequence([seed, epoch, *indices])``;
    ``collate_fn`` (default ``default_collate``) sees the plain examples. Examples whose index is in ``skip`` are
    left out first (the others keep their places in the order, so a resume stays exact); a mapping batch (a dict,
    a tokenizer's BatchEncoding) gets :data:`INDEX_KEY` (the kept indices, (B,)) and :data:`SKIPPED_KEY` (a count);
    a batch whose examples are all skipped is None. Picklable, for workers.
    """

    def __init__(self, collate_fn, seed: int, epoch: int, skip=()):
        self.collate_fn = collate_fn or torch.utils.data.default_collate
        self.seed, self.epoch, self.skip = int(seed), int(epoch), frozenset(int(i) for i in skip)

    def __call__(self, items: list):
        indices = [int(i) for i, _ in items]
        batch_seed = int(np.random.SeedSequence([self.seed, self.epoch, *indices]).generate_state(1)[0])
        kept = [(i, ex) for i, ex in zip(indices, (ex for _, ex in items)) if i not in self.skip]
        if not kept:
            return None
        with isolated_rng(batch_seed):
            batch = self.collate_fn([example for _, example in kept])
        if isinstance(batch, MutableMapping):
            batch[INDEX_KEY] = torch.tensor([i for i, _ in kept])
            batch[SKIPPED_KEY] = torch.tensor(len(items) - len(kept))
        return batch


def micro_batches(data, sampler, state, config, collate_fn=None, pin_memory: bool = False):
    """Endless micro-batches over epochs from ``state``'s (``TrainState``) position, advancing ``state.epoch``/
    ``batch_in_epoch``, in the order of ``sampler`` (``nbkit.train.ddp.sampler.ResumableDistributedSampler``).

    Starts at global sample ``state.epoch_start + state.batch_in_epoch * batch_size * W`` of the epoch's
    order (W: the sampler's ``num_replicas``). ``config`` (``TrainConfig``): its ``pin_memory`` None takes the
    ``pin_memory`` argument; ``compile`` drops the last partial batch (static shapes). With workers each batch
    is waited for at most ``nbkit.train.workers.WORKER_TIMEOUT_S``.

    Raises:
        DataError: the data cannot fill one batch.
    """
    pin = config.pin_memory if config.pin_memory is not None else pin_memory
    while True:
        start = state.epoch_start + state.batch_in_epoch * config.batch_size * sampler.num_replicas
        sampler.set_epoch(state.epoch, start=min(start, len(data)))
        loader = torch.utils.data.DataLoader(
            IndexedDataset(data), batch_size=config.batch_size, sampler=sampler,
            collate_fn=SeededCollate(collate_fn, config.seed, state.epoch, config.skip_examples),
            num_workers=config.num_workers, pin_memory=pin, drop_last=bool(config.compile),
            timeout=loader_timeout(config.num_workers),  # a batch lost by a worker is an error, not a hang
            generator=torch.Generator().manual_seed(config.seed))  # a new iterator never draws from the global RNG
        got = False
        for batch in loader:
            got = True
            state.batch_in_epoch += 1
            if batch is not None:        # None: every example of it skipped (skip_examples)
                yield batch
        if not got and start == 0:
            raise DataError(f"the training data gives no batch of {config.batch_size} "
                            f"({len(data)} examples); add data or lower batch_size.")
        state.epoch, state.batch_in_epoch, state.epoch_start = state.epoch + 1, 0, 0


def prepare_batch(batch: dict, device, pad_multiple: int | None = None, pad_id: int = 0) -> dict:
    """Pad 2-D tensors (B, T) on T to a multiple of ``pad_multiple`` (``labels`` with -100, ``input_ids``
    with ``pad_id``, others 0: static shapes for ``torch.compile``) and move all to ``device``.
    """
    out = {}
    for k, v in batch.items():
        if pad_multiple and v.dim() == 2 and v.shape[1] % pad_multiple:
            fill = {"labels": -100, "input_ids": pad_id}.get(k, 0)
            v = F.pad(v, (0, pad_multiple - v.shape[1] % pad_multiple), value=fill)
        out[k] = v.to(device, non_blocking=True)
    return out


def input_lengths(data) -> list[int]:
    """Tokens per example (``len(input_ids)``), from a ``datasets.Dataset``'s column or any sequence of dicts.

    Raises:
        DataError: the examples have no ``input_ids`` (tokenize first, or ``group_by_length=False``).
    """
    names = getattr(data, "column_names", None)
    if names is not None:
        if "input_ids" not in names:
            raise DataError(f"group_by_length needs an 'input_ids' column; the dataset has {names}. "
                            "Tokenize first, or set TrainConfig(group_by_length=False).")
        return [len(ids) for ids in data["input_ids"]]
    try:
        return [len(data[i]["input_ids"]) for i in range(len(data))]
    except (KeyError, TypeError, IndexError) as err:
        raise DataError("group_by_length needs examples with 'input_ids'; tokenize first, or set "
                        "TrainConfig(group_by_length=False).") from err
