"""Sampler thread: fixed interval, bounded history, start/stop/close, errors survive."""
from __future__ import annotations

import itertools
import threading
import time

import pytest

from nbkit.errors import ConfigError
from nbkit.gpu.nvml import Nvml, take_sample
from nbkit.gpu.sampler import Sampler
from tests.nvml_fake import NOT_SUPPORTED, FakeGpu, FakeNvml
from tests.waiting import wait_until


def _wait(cond):
    return wait_until(cond, poll=0.005)


def test_bounded_history_and_order():
    counter = itertools.count()
    s = Sampler(lambda: next(counter), interval=0.01, maxlen=5)
    s.start()
    assert _wait(lambda: s.count >= 12)
    s.stop()
    h = s.snapshot()
    assert len(h) == 5 and h == sorted(h) and h[-1] == s.count - 1
    assert not s.running


def test_busy_time_counts_cpu_not_sleep():
    def read():
        time.sleep(0.02)  # waiting costs no CPU
        return sum(range(20000))  # a little real work

    s = Sampler(read, interval=0.01)
    for _ in range(5):
        s.sample_once()
    assert 0 < s.busy_s < 5 * 0.02


def test_interval_is_respected():
    s = Sampler(time.monotonic, interval=0.05, maxlen=100)
    t0 = time.monotonic()
    s.start()
    _wait(lambda: s.count >= 10)   # a busy machine makes ticks late, never early
    s.stop()
    n, spent = s.count, time.monotonic() - t0
    assert 10 <= n <= spent / 0.05 + 2, (n, spent)  # no faster than one tick per interval
    gaps = [b - a for a, b in zip(s.history, list(s.history)[1:])]
    assert min(gaps) > 0.02  # never bunched


def test_stop_start_close():
    s = Sampler(lambda: 1, interval=0.01)
    s.start()
    s.start()  # idempotent: still one thread
    assert sum(t.name == "nbkit-sampler" and t.is_alive() for t in threading.enumerate()) >= 1
    s.stop()
    n = s.count
    time.sleep(0.05)
    assert s.count == n  # stopped means no more ticks
    s.start()
    assert _wait(lambda: s.count > n)
    s.close()
    s.close()
    assert not s.running
    with pytest.raises(ConfigError, match="new one"):
        s.start()


def test_failing_read_and_listener_do_not_kill_the_thread():
    calls = itertools.count()

    def read():
        if next(calls) % 2:
            raise RuntimeError("flaky")
        return "ok"

    def bad_view(sample):
        raise ValueError("bad view")

    seen = []
    s = Sampler(read, interval=0.01)
    s.listeners.append(bad_view)
    s.listeners.append(seen.append)
    with pytest.warns(RuntimeWarning) as warned:
        with s:
            assert _wait(lambda: len(seen) >= 3)
    assert s.errors >= 3 and isinstance(s.last_error, (RuntimeError, ValueError))
    assert not s.running
    assert len(warned) == 1 and "sampling goes on" in str(warned[0].message)   # warned once, not per error


def test_errors_are_named_in_repr_and_error_text():
    def read():
        raise OSError("sensor gone")

    s = Sampler(read, interval=0.01)
    assert s.error_text() is None and "error" not in repr(s)
    with pytest.warns(RuntimeWarning, match="read raised OSError: sensor gone"):
        s.sample_once()
    s.sample_once()
    assert s.errors == 2 and str(s.last_error) == "sensor gone"
    assert s.error_text() == "2 errors, last: read raised OSError: sensor gone"
    assert repr(s).endswith("stopped; 2 errors, last: read raised OSError: sensor gone)")
    s.close()


def test_bad_arguments():
    with pytest.raises(ConfigError, match="interval"):
        Sampler(lambda: 0, interval=0)
    with pytest.raises(ConfigError, match="maxlen"):
        Sampler(lambda: 0, maxlen=0)


def test_samples_fake_gpus_without_cuda_context():
    fake = FakeNvml([FakeGpu(), FakeGpu(fail={"nvmlDeviceGetUtilizationRates": NOT_SUPPORTED})])
    nv = Nvml(lib=fake)
    with Sampler(lambda: take_sample(nv), interval=0.01, maxlen=10) as s:
        assert _wait(lambda: s.count >= 3)
    last = s.snapshot()[-1]
    assert [d.util_gpu_pct for d in last.devices] == [87, None]
    assert fake.calls["nvmlInit"] == 1
    torch = pytest.importorskip("torch")
    assert not torch.cuda.is_initialized()
