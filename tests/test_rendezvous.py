"""D10: a process group is joined only under torchrun (or on opt-in), with its variables checked
up front and a short rendezvous timeout whose error names the world size and the missing ranks."""
from __future__ import annotations

import socket
import time

import pytest

from nbkit.errors import ConfigError
from nbkit.train.ddp import group as D
from nbkit.train.ddp import rendezvous as R
from tests.waiting import GENEROUS_S

FULL = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "29511"}


@pytest.mark.parametrize("env", [{}, {"WORLD_SIZE": "1"}, {"WORLD_SIZE": "1", "RANK": "0"},
                                 {**FULL, "NBKIT_DISTRIBUTED": "0"}, {**FULL, "NBKIT_DISTRIBUTED": "off"}])
def test_one_process_without_world_size_or_when_opted_out(env):
    assert R.should_join(env) is False


def test_inherited_world_size_without_torchrun_names_both_fixes():
    with pytest.raises(ConfigError) as err:
        R.should_join(dict(FULL))                            # complete, but no TORCHELASTIC_RUN_ID
    msg = str(err.value)
    assert "WORLD_SIZE=4" in msg and "TORCHELASTIC_RUN_ID" in msg and "unset WORLD_SIZE" in msg
    assert "NBKIT_DISTRIBUTED=0" in msg and "torchrun" in msg and "NBKIT_DISTRIBUTED=1" in msg


def test_torchrun_marker_or_opt_in_joins_a_complete_environment():
    assert R.should_join({**FULL, "TORCHELASTIC_RUN_ID": "none"}) is True
    assert R.should_join({**FULL, "NBKIT_DISTRIBUTED": "1"}) is True


@pytest.mark.parametrize("drop", [("MASTER_ADDR",), ("LOCAL_RANK", "MASTER_PORT"), ("RANK",)])
def test_incomplete_variables_are_named_before_any_rendezvous(drop):
    env = {k: v for k, v in FULL.items() if k not in drop}
    with pytest.raises(ConfigError) as err:
        R.should_join({**env, "NBKIT_DISTRIBUTED": "1"})
    msg = str(err.value)
    assert f"{', '.join(drop)} {'is' if len(drop) == 1 else 'are'} not set" in msg and "unset WORLD_SIZE" in msg


@pytest.mark.parametrize("env, match", [({"WORLD_SIZE": "three"}, "not an integer"),
                                        ({**FULL, "NBKIT_DISTRIBUTED": "maybe"}, "use 1 .* or 0")])
def test_malformed_values_are_config_errors(env, match):
    with pytest.raises(ConfigError, match=match):
        R.should_join(env)


def test_timeout_setting_default_and_bad_values():
    assert R.timeout_s({}) == R.DEFAULT_TIMEOUT_S == 60
    assert R.timeout_s({"NBKIT_DIST_TIMEOUT_S": "2.5"}) == 2.5
    for bad in ("0", "-3", "soon"):
        with pytest.raises(ConfigError, match="NBKIT_DIST_TIMEOUT_S"):
            R.timeout_s({"NBKIT_DIST_TIMEOUT_S": bad})


def test_loop_in_an_inherited_environment_fails_fast_with_the_fix(monkeypatch):
    from loop_helpers import cls_collate, cls_data, tiny_classifier

    from nbkit.train import Loop, TrainConfig

    for k, v in FULL.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.delenv("NBKIT_DISTRIBUTED", raising=False)
    cfg = TrainConfig(max_steps=1, batch_size=2, progress=False, precision="fp32")
    with pytest.raises(ConfigError, match="torchrun did not start this process"):
        Loop(tiny_classifier(), cfg, cls_data(n=4), collate_fn=cls_collate)
    monkeypatch.setenv("NBKIT_DISTRIBUTED", "0")                   # the documented opt-out: one process
    assert Loop(tiny_classifier(), cfg, cls_data(n=4), collate_fn=cls_collate).dist.world_size == 1


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_rank0_alone_times_out_naming_world_size_and_missing_ranks(monkeypatch):
    """Real gloo rendezvous on 127.0.0.1, world size 3, one process: a ConfigError after the 2 s set, not torch's
    30 minutes (the message names the 2 s; the wall bound is generous: a busy machine slows the rendezvous)."""
    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(_free_port()), "TORCHELASTIC_RUN_ID": "test", "NBKIT_DIST_TIMEOUT_S": "2"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as err:
        D.init_distributed(backend="gloo")
    took = time.monotonic() - t0
    msg = str(err.value)
    assert "timed out after 2 s" in msg and "world size 3" in msg and "rank(s) 1, 2 never joined" in msg
    assert "NBKIT_DIST_TIMEOUT_S" in msg and 1.5 < took < GENEROUS_S
    import torch.distributed as dist

    assert not dist.is_initialized()


def test_a_rank_whose_rank0_never_comes_says_it_could_not_reach_the_store():
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as err:
        R.join_group("gloo", 1, 2, "127.0.0.1", _free_port(), timeout=1.5)
    msg = str(err.value)
    assert "rank 1 of world size 2 could not reach rank 0's rendezvous store at 127.0.0.1:" in msg
    assert "within 1.5 s" in msg and time.monotonic() - t0 < GENEROUS_S   # not a wait for ever; a busy machine is slow


def test_launch_world_size_is_torchruns_only_when_the_process_joins():
    assert D.launch_world_size({}) == 1
    assert D.launch_world_size({**FULL, "NBKIT_DISTRIBUTED": "0"}) == 1      # opted out: one process
    assert D.launch_world_size({**FULL, "TORCHELASTIC_RUN_ID": "x"}) == 4
    with pytest.raises(ConfigError, match="TORCHELASTIC_RUN_ID"):
        D.launch_world_size(dict(FULL))                                      # inherited, not launched
