"""nbkit.profiling.profiler: native output on a file descriptor is captured; only errors come back."""
from __future__ import annotations

import os

import pytest

from nbkit.profiling.profiler import quiet_fd

NOISE = b"USDT:2026-11-30 15:24:58 16244:16244 SyncActivityProfilerHandler.cpp:52] profiler_start\n"


def test_noise_is_dropped_errors_come_back_and_the_text_is_kept(capfd):
    with quiet_fd(2) as log:
        os.write(2, NOISE)
        os.write(2, b"informational chatter\n")
        os.write(2, b"CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: no access\n")
    err = capfd.readouterr().err
    assert err == "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: no access\n"
    assert "profiler_start" in log.text and "informational chatter" in log.text
    assert log.errors == ["CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: no access"]
    os.write(2, b"after\n")  # fd 2 is restored
    assert capfd.readouterr().err == "after\n"


def test_when_the_block_raises_everything_but_noise_comes_back(capfd):
    with pytest.raises(RuntimeError), quiet_fd(2):
        os.write(2, NOISE)
        os.write(2, b"context that explains the failure\n")
        raise RuntimeError("boom")
    assert capfd.readouterr().err == "context that explains the failure\n"
