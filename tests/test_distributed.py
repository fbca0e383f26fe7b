"""DDP helpers and the resumable sampler, in one process (fast; no torchrun)."""
from __future__ import annotations

import pytest
import torch

from nbkit.errors import CheckpointError, ConfigError
from nbkit.train.ddp import group as D
from nbkit.train.ddp.sampler import ResumableDistributedSampler


# --- DistInfo ------------------------------------------------------------------------------
def test_distinfo_from_torchrun_env():
    env = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
           "MASTER_ADDR": "node0", "MASTER_PORT": "29500"}
    info = D.DistInfo.from_env(env)
    assert (info.rank, info.local_rank, info.world_size, info.local_world_size) == (3, 1, 4, 2)
    assert (info.master_addr, info.master_port) == ("node0", 29500)
    assert info.is_distributed and not info.is_main


def test_distinfo_without_env_is_single_process():
    info = D.DistInfo.from_env({})
    assert (info.rank, info.world_size, info.is_distributed, info.is_main) == (0, 1, False, True)


@pytest.mark.parametrize("env", [{"WORLD_SIZE": "two"}, {"RANK": "2", "WORLD_SIZE": "2"},
                                 {"RANK": "0", "LOCAL_RANK": "5", "WORLD_SIZE": "2"}])
def test_distinfo_rejects_inconsistent_env(env):
    with pytest.raises(ConfigError, match="torchrun"):
        D.DistInfo.from_env(env)


def test_single_process_helpers_are_noops(monkeypatch):
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    info = D.init_distributed()
    assert info.world_size == 1 and info.is_main
    assert D.all_reduce_sum(2.5) == 2.5 and D.global_label_tokens(7) == 7
    assert D.all_reduce_dict({"a": 1}) == {"a": 1.0} and D.all_gather_object(5) == [5]
    model = torch.nn.Linear(2, 2)
    assert D.wrap_ddp(model, info) is model
    D.barrier()
    D.cleanup()


def test_reductions_and_no_sync_in_a_one_rank_gloo_group(tmp_path):
    """The real collective path (world size 1, file store): types survive, no_sync toggles sync."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        assert D.all_reduce_sum(3) == 3 and isinstance(D.all_reduce_sum(3), int)
        assert D.all_reduce_sum(1.5) == pytest.approx(1.5)
        t = torch.tensor([1.0, 2.0])
        assert torch.equal(D.all_reduce_sum(t), t)
        assert D.all_reduce_dict({"x": 2, "y": 0.5}) == {"x": 2.0, "y": 0.5}
        assert D.all_gather_object({"rng": [1, 2]}) == [{"rng": [1, 2]}]
        info = D.DistInfo(world_size=2, backend="gloo")  # pretend: forces the DDP wrap
        ddp = D.wrap_ddp(torch.nn.Linear(2, 1), info)
        assert ddp.module.weight.shape == (1, 2)
        with D.maybe_no_sync(ddp, is_last_microbatch=False):
            assert ddp.require_backward_grad_sync is False
        with D.maybe_no_sync(ddp, is_last_microbatch=True):
            assert ddp.require_backward_grad_sync is True
        compiled = type("OptimizedModule", (), {"_orig_mod": ddp})()  # what torch.compile returns
        with D.maybe_no_sync(compiled, is_last_microbatch=False):
            assert ddp.require_backward_grad_sync is False
        with D.maybe_no_sync(torch.nn.Linear(1, 1), is_last_microbatch=False):
            pass  # not DDP: null context
    finally:
        dist.destroy_process_group()


# --- sampler -------------------------------------------------------------------------------
def shards(n, world, seed=0, drop_last=False, epoch=0, state=None):
    out = []
    for r in range(world):
        s = ResumableDistributedSampler(n, num_replicas=world, rank=r, seed=seed, drop_last=drop_last)
        if state:
            s.load_state_dict(state)
        else:
            s.set_epoch(epoch)
        out.append(list(s))
    return out


@pytest.mark.parametrize("n,world", [(12, 2), (10, 3), (7, 4)])
def test_shards_cover_the_dataset_exactly_once(n, world):
    parts = shards(n, world)
    assert len({len(p) for p in parts}) == 1  # every rank steps the same number of times
    flat = [i for p in parts for i in p]
    assert set(flat) == set(range(n))
    assert len(flat) - n == (-n) % world  # only the padding repeats
    dropped = shards(n, world, drop_last=True)
    flat = [i for p in dropped for i in p]
    assert len(flat) == len(set(flat)) == n - n % world


def test_world_size_one_is_the_single_process_order_and_torch_recipe():
    mine = shards(20, 1, seed=5, epoch=2)[0]
    g = torch.Generator().manual_seed(5 + 2)
    assert mine == torch.randperm(20, generator=g).tolist()
    ref = torch.utils.data.DistributedSampler(range(20), num_replicas=1, rank=0, seed=5)
    ref.set_epoch(2)
    assert mine == list(ref)
    assert shards(20, 1, epoch=0)[0] != shards(20, 1, epoch=1)[0]  # set_epoch reshuffles


@pytest.mark.parametrize("world,start,drop_last", [(3, 0, False), (4, 5, False), (3, 2, True), (1, 0, False)])
def test_ranks_draw_torch_distributed_samplers_shards_as_python_ints(world, start, drop_last):
    """Iteration (from the epoch's int64 array, in chunks) gives what torch's DistributedSampler
    gives for the same order, padding included, as plain ints; a start skips that prefix."""
    n = 11
    for rank in range(world):
        s = ResumableDistributedSampler(n, num_replicas=world, rank=rank, seed=3, drop_last=drop_last)
        s.set_epoch(1, start=start)
        got = list(s)
        assert all(type(i) is int for i in got) and len(got) == len(s)
        if start == 0:
            ref = torch.utils.data.DistributedSampler(range(n), num_replicas=world, rank=rank, seed=3,
                                                      drop_last=drop_last)
            ref.set_epoch(1)
            assert got == list(ref)
        else:
            rest = s.global_order(1)[start:]
            total = len(s) * world
            assert got == (rest * 2)[:total][rank::world]


def test_global_batches_match_between_world_sizes():
    """Step k of 2 ranks x batch 3 sees the same samples as step k of 1 rank x batch 6."""
    one = shards(24, 1)[0]
    two = shards(24, 2)
    for k in range(4):
        assert sorted(two[0][3 * k:3 * k + 3] + two[1][3 * k:3 * k + 3]) == sorted(one[6 * k:6 * k + 6])


@pytest.mark.parametrize("world_before,world_after", [(2, 1), (1, 2), (2, 3)])
def test_resume_under_another_world_size_sees_the_rest_once(world_before, world_after):
    n, per_rank_seen = 23, 4
    samplers = [ResumableDistributedSampler(n, world_before, r, seed=1) for r in range(world_before)]
    seen = []
    for s in samplers:
        seen += list(s)[:per_rank_seen]
        s.advance(per_rank_seen)
    state = samplers[0].state_dict()
    assert state["consumed"] == per_rank_seen * world_before and state["epoch"] == 0
    order = samplers[0].global_order()
    assert sorted(seen) == sorted(order[:state["consumed"]])  # consumed = a prefix of the order
    rest = shards(n, world_after, seed=1, state=state)
    flat = [i for p in rest for i in p]
    assert set(flat) == set(order[state["consumed"]:]) and not set(flat) & set(seen)
    assert len(flat) - (n - state["consumed"]) == (-(n - state["consumed"])) % world_after


def test_state_roundtrip_keeps_position_and_rolls_over_finished_epoch():
    s = ResumableDistributedSampler(10, 1, 0, seed=0)
    s.set_epoch(3)
    s.advance(4)
    t = ResumableDistributedSampler(10, 1, 0, seed=0)
    t.load_state_dict(s.state_dict())
    t.set_epoch(3)  # the loop's usual call at epoch start must not rewind
    assert list(t) == s.global_order()[4:] and len(t) == 6
    s.advance(6)
    t.load_state_dict(s.state_dict())
    assert t.epoch == 4 and list(t) == t.global_order(4)
    t.set_epoch(5)
    assert t.start == 0 and len(t) == 10


def test_explicit_start_as_the_single_process_loop_passes_it():
    """The loop's call ``set_epoch(epoch, start=global_samples_consumed)`` positions every rank."""
    ranks = [ResumableDistributedSampler(20, 2, r, seed=3) for r in range(2)]
    for s in ranks:
        s.set_epoch(1, start=6)
    order = ranks[0].global_order(1)
    assert sorted(list(ranks[0]) + list(ranks[1])) == sorted(order[6:])
    assert list(ranks[1]) == order[6:][1::2]
    with pytest.raises(ConfigError, match="global samples"):
        ranks[0].set_epoch(1, start=21)


def test_state_from_other_data_is_rejected():
    s = ResumableDistributedSampler(10, 1, 0, seed=0)
    with pytest.raises(CheckpointError, match="dataset_size"):
        ResumableDistributedSampler(11, 1, 0, seed=0).load_state_dict(s.state_dict())
    with pytest.raises(CheckpointError, match="seed"):
        ResumableDistributedSampler(10, 1, 0, seed=1).load_state_dict(s.state_dict())


def test_sampler_shards_by_rank_and_rejects_bad_rank():
    s = ResumableDistributedSampler(9, num_replicas=3, rank=1, shuffle=False)
    assert list(s) == [1, 4, 7]
    with pytest.raises(ConfigError):
        ResumableDistributedSampler(5, num_replicas=2, rank=2)
    with pytest.raises(ConfigError):
        ResumableDistributedSampler(0)
