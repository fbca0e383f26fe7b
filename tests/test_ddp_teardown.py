"""C19: DDP teardown frees the gloo process group while Python is alive (nbkit.train.ddp.group.cleanup).

Before the fix a DDP wrapper kept alive by a reference cycle held the gloo group past
``destroy_process_group``; it was destroyed during interpreter shutdown, where rank 1 of
tests/test_launch.py aborted (``terminate called without an active exception``) in 2 of
22 runs of that file on a shared 2-core machine (0 of 16 after the fix).
"""
from __future__ import annotations

import gc

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from nbkit.train.ddp import group as D


def test_cleanup_frees_cyclic_ddp_wrappers_before_the_interpreter_exits(tmp_path):
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        model = DistributedDataParallel(torch.nn.Linear(4, 2))
        model(torch.zeros(3, 4)).sum().backward()    # the reducer has run a gradient all-reduce
        model.cycle = [model]                        # only the cycle collector can free it now
        del model
        D.cleanup()
        assert not dist.is_initialized()
        alive = [o for o in gc.get_objects() if isinstance(o, DistributedDataParallel)]
        assert alive == [], "a DDP wrapper (and the process group it holds) outlived cleanup()"
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
