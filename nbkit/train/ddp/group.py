"""Distributed data parallel (DDP) helpers: the few points where a loop differs under torchrun.

One process per device, launched by ``torchrun`` (``python -m torch.distributed.run``),
which sets ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT`` for every worker (see
https://pytorch.org/docs/stable/elastic/run.html#environment-variables). Without
them every helper is a cheap no-op, so the same loop runs in a notebook kernel
(one process) and under ``torchrun`` (N processes) unchanged.

Where a loop calls what (the contract for ``nbkit.train.loop``):

- start: ``info = init_distributed()``; ``model = wrap_ddp(model.to(info.device), info)``
- data: ``sampler = make_sampler(len(ds), shuffle=True, seed=cfg.seed, dist_info=info)``;
  ``sampler.set_epoch(epoch)`` at each epoch, or ``set_epoch(epoch, start=g)`` with ``g`` the
  *global* samples already consumed in it; ``sampler.advance(local_batch_size)`` after each
  consumed micro-batch; ``sampler.state_dict()`` into the checkpoint (any world size resumes it).
- accumulation window: ``n = global_label_tokens(local_label_tokens)``; each micro-batch
  ``loss = loss_sum * info.world_size / n`` (DDP *averages* gradients over ranks, so the
  factor ``world_size`` turns the average back into "sum over all label tokens / n");
  backward inside ``maybe_no_sync(model, is_last_microbatch)``.
- logging: ``all_reduce_dict({"loss_sum": .., "tokens": ..})`` *before* deciding whether a
  loss is finite, so every rank skips or steps together; only ``is_main_process()`` prints,
  plots and writes checkpoints; ``barrier()`` on all ranks after a save. Per-rank state
  (RNG) is collected with ``all_gather_object`` on all ranks before rank 0 saves.
- end: ``cleanup()``.

``nbkit.train.loop.Loop`` follows this list; the loop-side mechanics that are not one call
(the sampler, joining only under torchrun, per-rank RNG streams, where a checkpoint's data
position is in global samples, sharded evaluation) live in ``nbkit.train.ddp.mechanics``.

Heavy imports (torch) happen inside functions: ``import nbkit`` stays cheap.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from nbkit.errors import ConfigError


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in a torchrun job.

    Attributes:
        rank: global rank, 0 .. world_size-1 (``RANK``).
        local_rank: rank on this node; also the CUDA device index (``LOCAL_RANK``).
        world_size: processes in the whole job, all nodes (``WORLD_SIZE``).
        local_world_size: processes on this node (``LOCAL_WORLD_SIZE``).
        master_addr, master_port: rendezvous store address (``MASTER_ADDR``/``MASTER_PORT``).
        backend: ``"nccl"`` (CUDA), ``"gloo"`` (CPU), or ``None`` for one process.
        device: ``"cuda:<local_rank>"`` or ``"cpu"``.
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
        """Read torchrun's variables from ``env`` (default ``os.environ``).

        Missing variables mean "one process": rank 0 of 1. ``backend`` and
        ``device`` are recorded as given (``init_distributed`` chooses them).

        Raises:
            ConfigError: a variable is not an integer, or rank/local rank is
                outside ``[0, world_size)``.
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


def _dist():
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def init_distributed(backend: str | None = None, timeout_s: float | None = None) -> DistInfo:
    """Join the torchrun process group (no-op for one process) and return this rank's ``DistInfo``.

    A group is joined only under torchrun or on opt-in (``nbkit.train.ddp.rendezvous.should_join``:
    an inherited ``WORLD_SIZE`` is a ``ConfigError``, ``NBKIT_DISTRIBUTED=0`` ignores it), and
    the ranks must meet within ``timeout_s`` seconds (default ``NBKIT_DIST_TIMEOUT_S`` or 60).
    Backend: ``nccl`` when CUDA is available, else ``gloo`` (unless ``backend`` is
    given). On CUDA the current device is set to ``cuda:LOCAL_RANK`` before the
    group is created, so NCCL binds each rank to its own GPU. Safe to call twice. A process a
    launcher started watches it (``nbkit.train.ddp.launcher_watch``): it stops when the launcher dies.

    Raises:
        ConfigError: ``LOCAL_RANK`` has no matching GPU (more processes per node than
            visible GPUs), ``nccl`` was asked for without CUDA, the launcher's variables are
            inherited or incomplete, or ranks did not join in time (named).
    """
    import torch
    import torch.distributed as dist

    from nbkit.train.ddp import rendezvous
    from nbkit.train.ddp.launcher_watch import watch_launcher

    watch_launcher()  # a worker whose launcher dies (kill -9 torchrun) stops: nbkit.train.ddp.launcher_watch
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


def is_main_process() -> bool:
    """True in a single process, or on global rank 0 of an initialised group."""
    d = _dist()
    return d is None or d.get_rank() == 0


def barrier() -> None:
    """Wait until every rank reaches this point (no-op for one process)."""
    d = _dist()
    if d is not None:
        d.barrier()


def _reduce_device(d) -> str:
    return "cuda" if d.get_backend() == "nccl" else "cpu"


def all_reduce_sum(value):
    """Sum ``value`` over all ranks; returns the same kind (tensor or Python number).

    A tensor (any shape) is reduced in a copy on the backend's device (NCCL needs
    CUDA tensors) and returned on ``value.device``; a float/int comes back as a
    float / int. One process: returned unchanged.
    """
    import torch

    d = _dist()
    if d is None:
        return value
    if isinstance(value, torch.Tensor):
        t = value.detach().to(_reduce_device(d), copy=True)
        d.all_reduce(t, op=d.ReduceOp.SUM)
        return t.to(value.device)
    dtype = torch.int64 if isinstance(value, int) and not isinstance(value, bool) else torch.float64
    t = torch.tensor([value], dtype=dtype, device=_reduce_device(d))
    d.all_reduce(t, op=d.ReduceOp.SUM)
    return t.item()


def all_reduce_dict(values: dict[str, float]) -> dict[str, float]:
    """Sum a dict of numbers over all ranks in one collective (float64).

    Use for additive quantities (loss sums, token and sample counts); derive
    means after the reduction, e.g. ``loss = s["loss_sum"] / s["tokens"]``.
    """
    import torch

    d = _dist()
    if d is None:
        return {k: float(v) for k, v in values.items()}
    keys = sorted(values)
    t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=_reduce_device(d))
    d.all_reduce(t, op=d.ReduceOp.SUM)
    return dict(zip(keys, t.tolist()))


def all_gather_object(obj) -> list:
    """Every rank's ``obj`` (picklable), as a list indexed by rank; ``[obj]`` for one process.

    For per-rank state a checkpoint must hold, e.g. RNG states: dropout and MLM masking
    draw different numbers on each rank, so exact resume needs all of them
    (``states = all_gather_object(capture_rng())``; rank 0 saves ``states``; on resume
    rank r restores ``states[r]`` when the world size is unchanged, else reseeds).
    """
    d = _dist()
    if d is None:
        return [obj]
    out = [None] * d.get_world_size()
    d.all_gather_object(out, obj)
    return out


def global_label_tokens(local_label_tokens: int) -> int:
    """Label tokens (labels != -100) in the accumulation window, summed over ranks.

    The loop divides each micro-batch's summed cross-entropy by this number (and
    multiplies by ``world_size``, see the module docstring), so the gradient equals
    the single-process gradient over the same global batch, however unevenly the
    label tokens fall across ranks.
    """
    return int(all_reduce_sum(int(local_label_tokens)))


def maybe_no_sync(model, is_last_microbatch: bool):
    """Context for one micro-batch's backward: skip DDP's gradient all-reduce except on the last.

    Gradients accumulate locally for micro-batches 1..k-1 (``DistributedDataParallel.no_sync``)
    and are all-reduced once, during the backward of micro-batch k. ``model`` may be
    ``torch.compile(ddp_model)``. For a model that is not DDP-wrapped this is a null context.
    """
    inner = getattr(model, "_orig_mod", model)  # torch.compile(DDP(model)) keeps DDP inside
    if not is_last_microbatch and _is_ddp(inner):
        return inner.no_sync()
    return contextlib.nullcontext()


def _is_ddp(model) -> bool:
    from torch.nn.parallel import DistributedDataParallel

    return isinstance(model, DistributedDataParallel)


def wrap_ddp(model, dist_info: DistInfo, **ddp_kwargs):
    """Wrap ``model`` in ``DistributedDataParallel`` when ``world_size > 1``; else return it.

    The model is moved to ``dist_info.device`` first; on CUDA ``device_ids`` is
    ``[local_rank]``. Extra keyword arguments go to DDP (e.g.
    ``find_unused_parameters=True`` for models with branches unused in a step).
    Use ``unwrap_model`` before saving so checkpoints hold plain parameter names.
    """
    model = model.to(dist_info.device)
    if not dist_info.is_distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel

    ids = [dist_info.local_rank] if dist_info.device.startswith("cuda") else None
    return DistributedDataParallel(model, device_ids=ids, **ddp_kwargs)


def unwrap_model(model):
    """The module inside DDP and ``torch.compile`` wrappers; ``model`` itself otherwise."""
    while True:
        if _is_ddp(model):
            model = model.module
        elif hasattr(model, "_orig_mod"):  # torch.compile's OptimizedModule
            model = model._orig_mod
        else:
            return model


def cleanup() -> None:
    """Leave the process group (no-op when none was created), and free it while Python is alive.

    ``destroy_process_group`` only drops the registry's reference: a DDP wrapper still
    alive (its reducer holds the group), often only in a reference cycle, keeps the gloo
    process group and its worker threads until interpreter shutdown, where destroying
    them raced with finalization: rank 1 died with ``terminate called without an active
    exception`` (SIGABRT) after finishing its work, in 2 of 22 runs of
    tests/test_launch.py on a shared 2-core machine (both while its load average was 13-16);
    0 of 16 with this (pytorch/pytorch PR 179291 describes the same crash). So unreferenced wrappers are garbage-collected first, and the group
    is destroyed here, deterministically; callers drop their DDP model before calling this.
    """
    import gc

    d = _dist()
    if d is not None:
        gc.collect()                # DDP wrappers in cycles release the group now
        d.destroy_process_group()   # last reference: the gloo threads are joined here
        gc.collect()
