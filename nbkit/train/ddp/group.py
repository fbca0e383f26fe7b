"""The process-group points where the loop differs under torchrun; each is a no-op for one process.

torchrun sets ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and
``MASTER_PORT`` per worker. Which call the loop makes where (the DDP contract): ``docs/distributed.md``.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from nbkit.errors import ConfigError


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in a torchrun job: ``rank`` (global, ``RANK``), ``local_rank`` (on this node,
    also the CUDA index), ``world_size`` (all nodes), ``local_world_size``, ``master_addr``/``master_port``
    (the rendezvous store), ``backend`` (``"nccl"``, ``"gloo"``, None for one process) and ``device``.
    """

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    master_addr: str | None = None
    master_port: int | None = None
    backend: str | None = None
    device: str = "cpu"

    @property
    def is_distributed(self) -> bool:
        """True when more than one process takes part."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """True on global rank 0 (the one that prints, plots and writes checkpoints)."""
        return self.rank == 0

    @classmethod
    def from_env(cls, env: dict | None = None, backend: str | None = None,
                 device: str | None = None) -> "DistInfo":
        """Read torchrun's variables from ``env`` (default ``os.environ``); missing ones mean rank 0 of 1.

        Raises:
            ConfigError: a variable is not an integer, or rank/local rank is outside ``[0, world_size)``.
        """
        env = os.environ if env is None else env

        def _int(name: str, default: int) -> int:
            raw = env.get(name)
            if raw in (None, ""):
                return default
            try:
                return int(raw)
            except ValueError:
                raise ConfigError(f"{name}={raw!r} is not an integer; unset it or launch with torchrun, "
                                  "which sets RANK, LOCAL_RANK and WORLD_SIZE") from None

        world = _int("WORLD_SIZE", 1)
        rank = _int("RANK", 0)
        local_rank = _int("LOCAL_RANK", rank)
        local_world = _int("LOCAL_WORLD_SIZE", world)
        if world < 1 or not 0 <= rank < world or not 0 <= local_rank < max(local_world, 1):
            raise ConfigError(f"inconsistent torchrun variables RANK={rank} LOCAL_RANK={local_rank} "
                              f"WORLD_SIZE={world} LOCAL_WORLD_SIZE={local_world}; launch with "
                              "torchrun instead of setting them by hand")
        port = env.get("MASTER_PORT")
        return cls(rank=rank, local_rank=local_rank, world_size=world, local_world_size=local_world,
                   master_addr=env.get("MASTER_ADDR"), master_port=int(port) if port else None,
                   backend=backend, device=device or "cpu")


def launch_world_size(env=None) -> int:
    """Processes this job trains with: ``WORLD_SIZE`` when this process joins a group
    (``rendezvous.should_join``), else 1. Read before a ``Loop`` exists, so a recipe counts epochs in global
    batches (``batch_size * grad_accum_steps * world_size`` examples per optimizer step).

    Raises:
        ConfigError: inherited or inconsistent torchrun variables (as the loop would).
    """
    from nbkit.train.ddp.rendezvous import should_join

    env = os.environ if env is None else env
    return DistInfo.from_env(env).world_size if should_join(env) else 1


def _dist():
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def init_distributed(backend: str | None = None, timeout_s: float | None = None) -> DistInfo:
    """Join the torchrun process group (no-op for one process) and return this rank's ``DistInfo``.

    Joins when ``rendezvous.should_join``; the ranks must meet within ``timeout_s`` s (default
    ``NBKIT_DIST_TIMEOUT_S`` or 60). Backend ``nccl`` with CUDA (the device is set to ``cuda:LOCAL_RANK``
    first), else ``gloo``. Starts the launcher watch. Safe to call twice.

    Raises:
        ConfigError: ``LOCAL_RANK`` without a GPU, ``nccl`` without CUDA, inherited or incomplete launcher
            variables, or ranks that did not join in time (named).
    """
    import torch
    import torch.distributed as dist

    from nbkit.train.ddp import rendezvous
    from nbkit.train.ddp.launcher_watch import watch_launcher

    watch_launcher()
    info = DistInfo.from_env() if rendezvous.should_join() else DistInfo()
    cuda = torch.cuda.is_available()
    if backend is None:
        backend = "nccl" if cuda else "gloo"
    if backend == "nccl" and not cuda:
        raise ConfigError("backend 'nccl' needs CUDA GPUs; use backend='gloo' to run on CPU")
    device = "cpu"
    if cuda and backend == "nccl":
        n = torch.cuda.device_count()
        if info.local_rank >= n:
            raise ConfigError(f"LOCAL_RANK {info.local_rank} but only {n} visible GPU(s); use "
                              f"--nproc_per_node={n} or check CUDA_VISIBLE_DEVICES")
        torch.cuda.set_device(info.local_rank)
        device = f"cuda:{info.local_rank}"
    elif cuda and info.world_size == 1:
        device = "cuda"
    if not info.is_distributed:
        return DistInfo(device=device)
    if not dist.is_initialized():
        rendezvous.join_group(backend, info.rank, info.world_size, info.master_addr, info.master_port, timeout_s)
    return DistInfo.from_env(backend=backend, device=device)


def seed_rank(seed: int, rank: int) -> None:
    """Seed Python's, NumPy's and torch's (CPU and CUDA) global RNGs for ``rank``.

    Rank 0 gets ``seed`` (so one process and rank 0 agree), rank r > 0 ``seed + 1_000_003 * r``:
    dropout and MLM masking then differ between ranks (a prime stride, so nearby seeds never collide).
    """
    import random

    import numpy as np
    import torch

    s = seed + 1_000_003 * rank
    random.seed(s)
    np.random.seed(s % 2**32)
    torch.manual_seed(s)


def barrier() -> None:
    """Wait until every rank reaches this point (no-op for one process)."""
    d = _dist()
    if d is not None:
        d.barrier()


def all_reduce_sum(value):
    """Sum ``value`` (a tensor of any shape, or a Python int/float) over all ranks; same kind back.

    A tensor is reduced in a copy on the backend's device (NCCL needs CUDA) and returned on
    ``value.device``. One process: returned unchanged.
    """
    import torch

    d = _dist()
    if d is None:
        return value
    if not isinstance(value, torch.Tensor):   # a number: through a tensor of its kind
        dtype = torch.int64 if isinstance(value, int) and not isinstance(value, bool) else torch.float64
        return all_reduce_sum(torch.tensor(value, dtype=dtype)).item()
    t = value.detach().to("cuda" if d.get_backend() == "nccl" else "cpu", copy=True)
    d.all_reduce(t, op=d.ReduceOp.SUM)
    return t.to(value.device)


def all_reduce_dict(values: dict[str, float]) -> dict[str, float]:
    """Sum a dict of additive numbers (loss sums, counts) over all ranks in one float64 collective."""
    import torch

    keys = sorted(values)
    summed = all_reduce_sum(torch.tensor([float(values[k]) for k in keys], dtype=torch.float64))
    return dict(zip(keys, summed.tolist()))


def all_gather_object(obj) -> list:
    """Every rank's picklable ``obj`` as a list indexed by rank (``[obj]`` for one process)."""
    d = _dist()
    if d is None:
        return [obj]
    out = [None] * d.get_world_size()
    d.all_gather_object(out, obj)
    return out


def global_label_tokens(local_label_tokens: int) -> int:
    """Label tokens (labels != -100) of the accumulation window, summed over ranks: the loss divisor."""
    return int(all_reduce_sum(int(local_label_tokens)))


def maybe_no_sync(model, is_last_microbatch: bool):
    """Context for one micro-batch's backward: DDP's ``no_sync`` except on the last micro-batch.

    ``model`` may be ``torch.compile(ddp_model)``; a model that is not DDP-wrapped gets a null context.
    """
    from torch.nn.parallel import DistributedDataParallel

    inner = getattr(model, "_orig_mod", model)  # torch.compile(DDP(model)) keeps DDP inside
    if not is_last_microbatch and isinstance(inner, DistributedDataParallel):
        return inner.no_sync()
    return contextlib.nullcontext()


def wrap_ddp(model, dist_info: DistInfo, **ddp_kwargs):
    """``model`` moved to ``dist_info.device`` and wrapped in ``DistributedDataParallel`` when
    ``world_size > 1`` (``device_ids=[local_rank]`` on CUDA; ``ddp_kwargs`` go to DDP); else the moved model."""
    model = model.to(dist_info.device)
    if not dist_info.is_distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel

    ids = [dist_info.local_rank] if dist_info.device.startswith("cuda") else None
    return DistributedDataParallel(model, device_ids=ids, **ddp_kwargs)


def cleanup() -> None:
    """Leave the process group (no-op when none was created), deterministically, while Python is alive.

    DDP wrappers in reference cycles are garbage-collected first: destroying their gloo group at interpreter
    shutdown can abort a finished rank (pytorch/pytorch PR 179291). Callers drop their DDP model first.
    """
    import gc

    d = _dist()
    if d is not None:
        gc.collect()                # DDP wrappers in cycles release the group now
        d.destroy_process_group()   # last reference: the gloo threads are joined here
        gc.collect()
