"""MLM blocks read from a prepared store's shards by offset (the layout of nanoGPT's ``train.bin`` and Megatron-LM's
indexed datasets: random access, memory flat in corpus size). Blocks are read with ``os.pread``, not a memory
map: a shard truncated under the reader is then a short read and a ``DataError``, not a SIGBUS that kills the
process (docs/corpus.md: no measured cost).
"""
from __future__ import annotations

import bisect
import os
from pathlib import Path

import numpy as np
import torch

from nbkit.corpus import store
from nbkit.errors import DataError
from nbkit.text.mlm import check_length


class StoreMLMDataset(torch.utils.data.Dataset):
    """Map-style dataset of ``block_size``-token MLM blocks over one ``split`` (``"train"`` or ``"validation"``)
    of the prepared store ``path``.

    Block ``i`` is the split's stream (its shards in manifest order) ``[i*(B-2) : (i+1)*(B-2)]`` wrapped as
    ``[CLS] ... [SEP]``; ``len(ds) = n_tokens // (B-2)``. ``ds[i]`` -> ``{"input_ids": (B,) int64,
    "word_ids": (B,) int64}``, ``word_ids = cumsum(wst) - 1`` clamped at 0, -1 at ``[CLS]``/``[SEP]``
    (for ``MLMCollator(whole_word=True)``). Shuffling and DDP sharding are the loop's sampler's.

    Cost: O(B) per block, ``(B-2) * (itemsize + 1)`` bytes read. Memory: the manifest and shard offsets; files
    are opened lazily in each process, so DataLoader workers never share one.

    Attributes: block_size, split, path, manifest, n_tokens (tokens in the split), cls_id, sep_id.

    Raises:
        DataError: not a complete store, a split it lacks, a shard of the wrong size, fewer than ``B-2`` tokens;
            on a read, a shard truncated since it was opened (its expected and found size, the fix).
        ConfigError: ``block_size < 3``.
    """

    #: tokens each block adds around the stream's (``[CLS]`` and ``[SEP]``)
    ADDED = 2

    def __init__(self, path, block_size: int, split: str = "train"):
        check_length("block_size", int(block_size))
        self.path = Path(path).expanduser()
        self.manifest = store.read_manifest(self.path)
        self.block_size, self.split = int(block_size), split
        self._shards = store.split_shards(self.path, self.manifest, split)
        self._starts = np.cumsum([0] + [n for _, _, n in self._shards]).tolist()  # stream offset of each shard
        self.n_tokens = int(self._starts[-1])
        self.cls_id, self.sep_id = int(self.manifest["cls_id"]), int(self.manifest["sep_id"])
        self._dtype = np.dtype(self.manifest["dtype"]).newbyteorder("<")
        self._chunk = self.block_size - self.ADDED    # stream tokens per block
        self._n = self.n_tokens // self._chunk
        if self._n == 0:
            raise DataError(f"split {split!r} of {self.path} has {self.n_tokens:,} tokens, fewer than one block of "
                            f"{self.block_size} needs ({self._chunk:,}); use a smaller block_size or more text")
        self._files: dict = {}
        self._pid = os.getpid()

    def __len__(self) -> int:
        return self._n

    @property
    def token_id_range(self) -> tuple[int, int]:
        """``(0, vocab_size - 1)`` of the store's tokenizer: the loop's id check without a scan."""
        return 0, int(self.manifest["tokenizer"]["vocab_size"]) - 1

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({str(self.path)!r}, block_size={self.block_size}, split={self.split!r}: "
                f"{self._n:,} blocks from {self.n_tokens:,} tokens in {len(self._shards)} shard(s))")

    # --- pickling / fork safety --------------------------------------------------------------
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_files"] = {}  # files are reopened in the receiving process
        return state

    def _open(self, k: int):
        if self._pid != os.getpid():  # forked (DataLoader worker): never reuse the parent's handles
            self._files, self._pid = {}, os.getpid()
        f = self._files.get(k)
        if f is None:
            ids, wst, _ = self._shards[k]
            f = self._files[k] = (open(ids, "rb", buffering=0), open(wst, "rb", buffering=0))
        return f

    def _pread(self, fh, n_bytes: int, offset: int, k: int, width: int) -> bytes:
        data = os.pread(fh.fileno(), n_bytes, offset)
        if len(data) != n_bytes:   # the file is shorter than the manifest says: it changed under us
            n = self._shards[k][2]
            raise DataError(
                f"{fh.name}: expected {n * width:,} bytes ({n:,} tokens), found {os.fstat(fh.fileno()).st_size:,}: the "
                "shard was truncated or rewritten while this dataset read it (a copy cut short, a full disk, or a new "
                "preparation into this folder). Stop what writes there, then prepare the store again (`nbkit "
                f"prepare-corpus INPUT... --out {self.path}`, which resumes) or copy it again, and restart the reader")
        return data

    def _spans(self, start: int, stop: int):
        """``(shard k, lo, hi, at)`` per shard that stream tokens ``[start, stop)`` cross: its tokens ``[lo, hi)``
        are the range's ``[at, at + hi - lo)``."""
        k, pos = bisect.bisect_right(self._starts, start) - 1, start
        while pos < stop:
            lo, hi = pos - self._starts[k], min(stop, self._starts[k + 1]) - self._starts[k]
            yield k, lo, hi, pos - start
            pos += hi - lo
            k += 1

    def _read(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Stream tokens ``[start, stop)``: ``(ids (n,) int64, word starts (n,) uint8)``."""
        ids, wst = np.empty(stop - start, dtype=np.int64), np.empty(stop - start, dtype=np.uint8)
        width = self._dtype.itemsize
        for k, lo, hi, at in self._spans(start, stop):
            f_ids, f_wst = self._open(k)
            ids[at:at + hi - lo] = np.frombuffer(self._pread(f_ids, (hi - lo) * width, lo * width, k, width),
                                                 dtype=self._dtype)
            wst[at:at + hi - lo] = np.frombuffer(self._pread(f_wst, hi - lo, lo, k, 1), dtype=np.uint8)
        return ids, wst

    # --- blocks --------------------------------------------------------------------------------
    def _block_index(self, i: int) -> int:
        """``i`` as a block number in ``[0, len)`` (negative counts from the end); IndexError outside."""
        i = int(i)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(f"block {i} out of range: {self.split!r} has {self._n:,} blocks")
        return i

    def __getitem__(self, i: int) -> dict:
        i = self._block_index(i)
        tokens, starts = self._read(i * self._chunk, (i + 1) * self._chunk)   # (B-2,), (B-2,)
        input_ids = np.empty(self.block_size, dtype=np.int64)                # (B,)
        input_ids[0], input_ids[1:-1], input_ids[-1] = self.cls_id, tokens, self.sep_id
        word_ids = np.full(self.block_size, -1, dtype=np.int64)              # (B,)
        word_ids[1:-1] = np.maximum(np.cumsum(starts, dtype=np.int64) - 1, 0)
        return {"input_ids": torch.from_numpy(input_ids), "word_ids": torch.from_numpy(word_ids)}

    def __getitems__(self, indices) -> list[dict]:
        """A batch of blocks (the DataLoader's batched fetch); same as ``[ds[i] for i in indices]``."""
        return [self[i] for i in indices]

    def describe_example(self, i: int) -> str:
        """Where block ``i`` lies in the store, for the loop's non-finite-loss message: each shard it reads, the
        token range in that shard and the documents (0-based, counted by the separator ending each one), e.g.
        ``"train-00000.ids tokens 96-125, documents 3-4 of that shard"``. The store does not record a
        document's source file and line; its text is ``store_tokenizer(path).decode(ds[i]["input_ids"])``.
        Reads the shard up to the block (O(offset)): for messages only.

        Raises:
            IndexError: ``i`` out of range.
        """
        i = self._block_index(i)
        parts = []
        for k, lo, hi, _ in self._spans(i * self._chunk, (i + 1) * self._chunk):
            ids_path = self._shards[k][0]
            seps = np.flatnonzero(np.fromfile(ids_path, dtype=self._dtype, count=hi) == self.sep_id)   # (n_seps,)
            first, last = int(np.searchsorted(seps, lo)), int(np.searchsorted(seps, hi - 1))
            docs = f"document {first}" if first == last else f"documents {first}-{last}"
            parts.append(f"{ids_path.name} tokens {lo}-{hi - 1}, {docs} of that shard")
        return f"block {i} of {self.split!r}: " + "; ".join(parts)

    def sample_blocks(self, n: int = 10_000) -> list[np.ndarray]:
        """``input_ids`` of at most ``n`` blocks evenly spaced over the split (for statistics; O(n * B))."""
        step = max(1, self._n // max(1, n))
        return [self[i]["input_ids"].numpy() for i in range(0, self._n, step)][:n]


class StoreCausalDataset(StoreMLMDataset):
    """Map-style dataset of ``block_size``-token causal-LM blocks over one split of a prepared store.

    Block ``i`` is the split's stream ``[i*B : (i+1)*B]`` as it is: the store already ends every document with
    ``[SEP]`` (:mod:`nbkit.corpus.worker`), the separator a causal model learns as a document end, so nothing is
    added; ``len(ds) = n_tokens // B``. ``ds[i]`` -> ``{"input_ids": (B,) int64, "next_id": int}``, the stream's
    token after the block (-100 after the last), for :class:`nbkit.text.causal.CausalCollator`, so all ``B``
    positions have a target. Same reading, pickling and errors as :class:`StoreMLMDataset` (< ``B`` tokens: DataError).
    """

    ADDED = 0

    def __getitem__(self, i: int) -> dict:
        i = self._block_index(i)
        start = i * self._chunk
        stop = min(start + self._chunk + 1, self.n_tokens)          # one more: the last position's target
        tokens, _ = self._read(start, stop)
        nxt = int(tokens[self._chunk]) if len(tokens) > self._chunk else -100
        return {"input_ids": torch.from_numpy(np.ascontiguousarray(tokens[:self._chunk])), "next_id": nxt}
