"""When to join a process group, and joining it with a short, explained timeout.

A kernel or a plain ``python`` often inherits ``WORLD_SIZE``/``RANK``/``MASTER_*`` without being one of
several workers, so those alone never make it wait for peers. The rules (:func:`should_join`, :func:`join_group`, ``NBKIT_DISTRIBUTED``, ``NBKIT_DIST_TIMEOUT_S``):
``docs/distributed.md``, "What the loop does under torchrun".
"""
from __future__ import annotations

import os

from nbkit.errors import ConfigError

DEFAULT_TIMEOUT_S = 60.0
TIMEOUT_ENV = "NBKIT_DIST_TIMEOUT_S"
OPT_IN_ENV = "NBKIT_DISTRIBUTED"
TORCHRUN_MARKER = "TORCHELASTIC_RUN_ID"
REQUIRED = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
YES, NO = ("1", "true", "yes", "on"), ("0", "false", "no", "off")   # how an on/off variable is spelled
_ALONE = ("to train in this one process, unset WORLD_SIZE (shell: `unset WORLD_SIZE RANK LOCAL_RANK`; "
          "notebook: os.environ.pop('WORLD_SIZE')) or set NBKIT_DISTRIBUTED=0")


def should_join(env=None) -> bool:
    """True when ``WORLD_SIZE`` > 1 and torchrun started this process (``TORCHELASTIC_RUN_ID``) or
    ``NBKIT_DISTRIBUTED=1`` opts in; False for ``WORLD_SIZE`` unset or 1, or ``NBKIT_DISTRIBUTED=0``.
    ``env``: default ``os.environ``.

    Raises:
        ConfigError: ``WORLD_SIZE`` is not an integer; ``WORLD_SIZE`` > 1 without torchrun's
            marker or the opt-in; or a variable the rendezvous needs is missing (named).
    """
    env = os.environ if env is None else env
    raw = env.get("WORLD_SIZE") or "1"
    try:
        world = int(raw)
    except ValueError:
        raise ConfigError(f"WORLD_SIZE={raw!r} is not an integer; {_ALONE}, or launch with torchrun, "
                          "which sets RANK, LOCAL_RANK and WORLD_SIZE") from None
    mode = (env.get(OPT_IN_ENV) or "").strip().lower()
    if mode and mode not in YES + NO:
        raise ConfigError(f"{OPT_IN_ENV}={env.get(OPT_IN_ENV)!r}: use 1 (join the process group the "
                          "environment describes) or 0 (ignore it: one process)")
    if world <= 1 or mode in NO:
        return False
    if not env.get(TORCHRUN_MARKER) and mode not in YES:
        raise ConfigError(
            f"WORLD_SIZE={world} is set, but torchrun did not start this process (no {TORCHRUN_MARKER}): "
            f"the variables were probably inherited (a cluster job's or a container's environment). Fix: "
            f"{_ALONE}; to train on {world} processes, launch with torchrun (torchrun --nproc-per-node=N "
            f"script.py, or nbkit.jobs.launch); with another launcher that sets {', '.join(REQUIRED)} "
            f"for every process (srun, mpirun), set {OPT_IN_ENV}=1.")
    missing = [k for k in REQUIRED if not env.get(k)]
    if missing:
        raise ConfigError(
            f"WORLD_SIZE={world} but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set, so "
            f"this process cannot find its peers. Fix: launch with torchrun, which sets all of "
            f"{', '.join(REQUIRED)}; or {_ALONE}.")
    return True


def timeout_s(env=None) -> float:
    """Seconds a rank waits for the others at the rendezvous: ``NBKIT_DIST_TIMEOUT_S`` or 60.

    Raises:
        ConfigError: the variable is not a positive number.
    """
    env = os.environ if env is None else env
    raw = env.get(TIMEOUT_ENV)
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(f"{TIMEOUT_ENV}={raw!r}: give the rendezvous timeout in seconds (> 0), "
                          f"e.g. {TIMEOUT_ENV}=300 for slow-starting nodes; unset it for {DEFAULT_TIMEOUT_S:g}")
    return value


def join_group(backend: str, rank: int, world_size: int, master_addr: str, master_port: int,
               timeout: float | None = None) -> None:
    """Meet the other ranks within ``timeout`` seconds (default :func:`timeout_s`), then
    ``init_process_group(backend)``. Rank 0 hosts the store unless torchrun's agent does
    (``TORCHELASTIC_USE_AGENT_STORE=True``); each rank writes its key and waits for all.

    Raises:
        ConfigError: the store cannot be opened or reached (``MASTER_ADDR:MASTER_PORT``), or
            ranks are missing after ``timeout`` s (the message names the world size and them).
    """
    from datetime import timedelta

    import torch.distributed as dist
    from torch.distributed.constants import default_pg_timeout

    t = timeout_s() if timeout is None else float(timeout)
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    where = f"{master_addr}:{master_port} (MASTER_ADDR:MASTER_PORT)"
    again = f"raise {TIMEOUT_ENV} (now {t:g} s) if the processes start slowly; {_ALONE}"
    try:
        store = dist.TCPStore(master_addr, int(master_port), world_size=world_size,
                              is_master=rank == 0 and not agent_store, timeout=timedelta(seconds=t),
                              wait_for_workers=False)
    except RuntimeError as err:  # DistNetworkError: port in use, host unknown, nobody listening
        role = "open the rendezvous store at" if rank == 0 and not agent_store else "reach rank 0's rendezvous store at"
        raise ConfigError(f"rank {rank} of world size {world_size} could not {role} {where} within {t:g} s "
                          f"({str(err).splitlines()[0][:200]}). Fix: start rank 0 first with the same "
                          f"MASTER_ADDR/MASTER_PORT, or pick a free MASTER_PORT; {again}.") from None
    prefix = f"nbkit/joined/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/"
    keys = [f"{prefix}{r}" for r in range(world_size)]
    store.set(keys[rank], "1")
    try:
        store.wait(keys, timedelta(seconds=t))
    except RuntimeError:  # DistStoreError: wait timeout
        missing = [r for r in range(world_size) if not store.check([keys[r]])]
        raise ConfigError(
            f"rendezvous timed out after {t:g} s: world size {world_size}, but rank(s) "
            f"{', '.join(map(str, missing))} never joined at {where} (this is rank {rank}). Fix: start all "
            f"{world_size} processes (torchrun --nnodes/--nproc-per-node matching WORLD_SIZE); {again}.") from None
    store.set_timeout(default_pg_timeout)  # collectives may wait long (a rank-0 checkpoint save)
    dist.init_process_group(backend=backend, store=dist.PrefixStore("default_pg", store), rank=rank,
                            world_size=world_size)
