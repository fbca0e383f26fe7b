"""DataLoader worker processes and the shared memory they need: fail fast, never hang.

Worker processes (``num_workers > 0``) hand every collated batch to the main process
through POSIX shared memory: ``torch.multiprocessing``'s sharing strategies
(``file_descriptor`` and ``file_system``) both create the tensors' storage as files in
the tmpfs at ``/dev/shm``. Docker gives a container a 64 MiB ``/dev/shm`` unless told
otherwise (``docker run --shm-size``, compose ``shm_size``). When it is full, the
worker's queue-feeder thread fails with ``unable to allocate shared memory(shm) ...
No space left on device``, prints a traceback and drops the batch; the main process
then waits for that batch forever (measured: 64 KiB ``/dev/shm``, ``num_workers=2``,
training hung until killed). Two defences:

* :func:`check_worker_shm`, a pre-flight before the first step: collate one batch,
  count the shared memory the workers keep in flight (:func:`shm_need_bytes`) and
  raise ``ConfigError`` when ``/dev/shm`` has less free space.
* :func:`loader_timeout` and :func:`guard_batches`: a DataLoader ``timeout`` so a batch
  that never arrives (``/dev/shm`` filled later, by another process) becomes an
  error, translated to a ``ConfigError`` that names the free space and the fixes.
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
            f"works), or load batches in the main process: TrainConfig(num_workers=0) instead of {num_workers}")


def shm_free_bytes(shm_dir: str = SHM_DIR, statvfs=os.statvfs) -> int | None:
    """Free bytes in ``shm_dir`` for an unprivileged user (``f_bavail * f_frsize``);
    None when it does not exist or cannot be read (not Linux: nothing to check)."""
    try:
        st = statvfs(shm_dir)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def batch_shm_bytes(batch) -> int:
    """Shared memory one collated batch takes when a worker sends it: the bytes of every
    tensor in it (dicts, lists and tuples are walked), each rounded up to a 4 KiB page."""
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
    """Shared memory (bytes) the workers hold at once: ``num_workers * prefetch_factor``
    batches in flight (the DataLoader keeps that many outstanding) plus two in the main
    process (the one the step uses and the one just received; measured: with 2 workers,
    batches of 24 KiB hang in a 128 KiB ``/dev/shm`` and train in 160 KiB)."""
    return batch_bytes * (num_workers * prefetch_factor + 2)


def _fmt(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


def check_worker_shm(data, collate_fn, batch_size: int, num_workers: int, seed: int = 0,
                     prefetch_factor: int = PREFETCH_FACTOR, shm_dir: str = SHM_DIR, statvfs=os.statvfs) -> dict:
    """Raise ``ConfigError`` when ``shm_dir`` cannot hold the batches ``num_workers`` workers keep in flight.

    Collates the first ``batch_size`` examples of ``data`` (``collate_fn``, default
    ``default_collate``) with every RNG seeded by ``seed`` and restored, so no training RNG moves, and
    compares :func:`shm_need_bytes` with :func:`shm_free_bytes`. Batches of longer
    examples take more (padding to the longest): below twice the need it warns.
    Returns ``{"batch_bytes", "need_bytes", "free_bytes"}`` (bytes; empty dict when
    ``num_workers == 0`` or there is no ``shm_dir``).
    """
    import warnings

    if num_workers <= 0:
        return {}
    free = shm_free_bytes(shm_dir, statvfs)
    if free is None:
        return {}
    one = batch_shm_bytes(_collate_isolated(data, collate_fn, batch_size, seed))
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


def _collate_isolated(data, collate_fn, batch_size: int, seed: int):
    """The first batch of ``data``, collated with Python/NumPy/torch RNGs seeded by ``seed`` and
    restored afterwards (``nbkit.switches.isolated_rng``; CUDA RNG states stay untouched)."""
    import torch

    from nbkit.switches import isolated_rng

    with isolated_rng(seed, cuda=False):
        examples = [data[i] for i in range(min(batch_size, len(data)))]
        return (collate_fn or torch.utils.data.default_collate)(examples)


def loader_timeout(num_workers: int) -> float:
    """The DataLoader ``timeout`` (s): :data:`WORKER_TIMEOUT_S` with workers, 0 (wait) without."""
    return WORKER_TIMEOUT_S if num_workers > 0 else 0


#: RuntimeError texts of torch.utils.data.dataloader that mean "the workers could not deliver".
_WORKER_FAILURES = ("DataLoader timed out", "exited unexpectedly", "shared memory", "Bus error")


def explain_loader_error(err: Exception, num_workers: int, shm_dir: str = SHM_DIR, statvfs=os.statvfs):
    """The ``ConfigError`` for a worker failure ``err`` (a RuntimeError from the DataLoader),
    naming the free shared memory now and the fixes; None when ``err`` is something else
    (e.g. a user's collate_fn raising: that is re-raised unchanged)."""
    if num_workers <= 0 or not isinstance(err, RuntimeError) or not any(s in str(err) for s in _WORKER_FAILURES):
        return None
    free = shm_free_bytes(shm_dir, statvfs)
    where = f"{shm_dir} has {_fmt(free)} free now" if free is not None else f"{shm_dir} is not readable"
    return ConfigError(f"the DataLoader's {num_workers} worker processes stopped delivering batches ({err}); "
                       f"{where}. A full /dev/shm is the usual cause. Fix: {_fixes(num_workers)}.")


def guard_batches(batches: Iterator, num_workers: int) -> Iterator:
    """Yield from ``batches``; a worker failure (see :func:`explain_loader_error`) becomes a ConfigError."""
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except RuntimeError as err:
            mine = explain_loader_error(err, num_workers)
            if mine is None:
                raise
            raise mine from err
        yield batch
