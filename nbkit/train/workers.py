"""DataLoader worker processes and the shared memory they need: fail fast, never hang.

Workers hand batches to the main process through ``/dev/shm`` (Docker's default: 64 MiB). When it is
full, the worker drops the batch and the main process waits for it forever. :func:`check_worker_shm`
raises before the first step when the batches in flight would not fit; a DataLoader ``timeout``
(:func:`loader_timeout`) turns a batch lost later into a ``ConfigError`` naming the fixes (:func:`guard_batches`).
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

from nbkit.errors import ConfigError

SHM_DIR = "/dev/shm"
#: torch.utils.data.DataLoader's default ``prefetch_factor``: batches each worker keeps ready.
PREFETCH_FACTOR = 2
#: Seconds the main process waits for one batch from the workers before giving up
#: (DataLoader ``timeout``). Far above any sane collation time; it only ends hangs.
WORKER_TIMEOUT_S = 300.0
_PAGE = 4096  # tmpfs allocates whole pages: each shared tensor costs at least one


def _fixes(num_workers: int) -> str:
    return ("give the container more shared memory (`docker run --shm-size=8g ...`, or `shm_size: 8gb` "
            "in compose, which nbkit's docker/compose.yaml sets from NBKIT_SHM_SIZE; `--ipc=host` also "
            "works; in a Kubernetes pod, whose default is 64 MiB, mount an emptyDir with `medium: Memory` at "
            "/dev/shm, as the manifests of nbkit.jobs.cluster do), or load batches in the main process: "
            f"TrainConfig(num_workers=0) instead of {num_workers}")


def shm_free_bytes(shm_dir: str = SHM_DIR, statvfs=os.statvfs) -> int | None:
    """Free bytes in ``shm_dir`` for an unprivileged user; None when it cannot be read (not Linux)."""
    try:
        st = statvfs(shm_dir)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def batch_shm_bytes(batch) -> int:
    """Bytes of shared memory one collated batch takes in transit: every tensor in it, each rounded up to a 4 KiB page."""
    import torch

    if isinstance(batch, torch.Tensor):
        n = batch.untyped_storage().nbytes()
        return -(-n // _PAGE) * _PAGE if n else 0
    if isinstance(batch, Mapping):
        return sum(batch_shm_bytes(v) for v in batch.values())
    if isinstance(batch, (list, tuple)):
        return sum(batch_shm_bytes(v) for v in batch)
    return 0


def shm_need_bytes(batch_bytes: int, num_workers: int, prefetch_factor: int = PREFETCH_FACTOR) -> int:
    """Shared memory (bytes) in use at once: ``num_workers * prefetch_factor`` batches in flight plus two in
    the main process.
    """
    return batch_bytes * (num_workers * prefetch_factor + 2)


def _fmt(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


def check_worker_shm(data, collate_fn, batch_size: int, num_workers: int, seed: int = 0,
                     prefetch_factor: int = PREFETCH_FACTOR, shm_dir: str = SHM_DIR, statvfs=os.statvfs) -> dict:
    """Raise ``ConfigError`` when ``shm_dir`` cannot hold what ``num_workers`` workers keep in flight
    (:func:`shm_need_bytes` of the first batch, collated with the RNGs restored after); warn below twice that.
    Returns ``{"batch_bytes", "need_bytes", "free_bytes"}`` (bytes; empty without workers or ``shm_dir``).
    """
    import warnings

    if num_workers <= 0:
        return {}
    free = shm_free_bytes(shm_dir, statvfs)
    if free is None:
        return {}
    import torch

    from nbkit.switches import isolated_rng

    with isolated_rng(seed, cuda=False):   # the first batch, no training RNG moved
        first = (collate_fn or torch.utils.data.default_collate)([data[i] for i in range(min(batch_size, len(data)))])
    one = batch_shm_bytes(first)
    need = shm_need_bytes(one, num_workers, prefetch_factor)
    if free < need:
        raise ConfigError(
            f"num_workers={num_workers} needs about {_fmt(need)} of shared memory ({num_workers} workers x "
            f"{prefetch_factor} prefetched batches + 2 in use, {_fmt(one)} per batch of {batch_size}) but {shm_dir} has "
            f"{_fmt(free)} free, so the workers would fail with 'No space left on device' and training would "
            f"hang. Fix: {_fixes(num_workers)}.")
    if free < 2 * need:
        warnings.warn(f"{shm_dir} has {_fmt(free)} free, under twice the {_fmt(need)} that num_workers="
                      f"{num_workers} needs for batches like the first; longer batches may not fit. "
                      f"{_fixes(num_workers)}.", UserWarning, stacklevel=2)
    return {"batch_bytes": one, "need_bytes": need, "free_bytes": free}


def loader_timeout(num_workers: int) -> float:
    """The DataLoader ``timeout`` in s: :data:`WORKER_TIMEOUT_S` with workers, 0 (wait) without."""
    return WORKER_TIMEOUT_S if num_workers > 0 else 0


#: RuntimeError texts of torch.utils.data.dataloader that mean "the workers could not deliver".
_WORKER_FAILURES = ("DataLoader timed out", "exited unexpectedly", "shared memory", "Bus error")


def guard_batches(batches: Iterator, num_workers: int) -> Iterator:
    """Yield from ``batches``; a DataLoader worker failure (:data:`_WORKER_FAILURES`) becomes a ``ConfigError``
    naming the free shared memory now and the fixes; any other error propagates unchanged."""
    try:
        yield from batches
    except RuntimeError as err:
        if num_workers <= 0 or not any(s in str(err) for s in _WORKER_FAILURES):
            raise
        free = shm_free_bytes()
        where = f"{SHM_DIR} has {_fmt(free)} free now" if free is not None else f"{SHM_DIR} is not readable"
        raise ConfigError(f"the DataLoader's {num_workers} worker processes stopped delivering batches ({err}); "
                          f"{where}. A full /dev/shm is the usual cause. Fix: {_fixes(num_workers)}.") from err
