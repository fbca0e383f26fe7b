"""C17/C18: the container test's shell helpers, without building an image.

scripts/lib/locks.sh: two runs sharing the build cache and the Docker engine wait for
each other and say for whom (C17). scripts/lib/rootfs.sh: a debootstrap that mounts
proc and fails leaves nothing mounted, and a stale root with proc still mounted is
cleaned instead of failing every later run with "Operation not permitted" (C18).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from waiting import wait_until

REPO = Path(__file__).resolve().parents[1]
LOCKS, ROOTFS = REPO / "scripts" / "lib" / "locks.sh", REPO / "scripts" / "lib" / "rootfs.sh"
pytestmark = pytest.mark.skipif(not shutil.which("flock"), reason="needs flock (util-linux)")


def bash(script: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(["bash", "-c", f"set -euo pipefail; . {LOCKS}; . {ROOTFS}; {script}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def until_exists(path: Path) -> str:
    """Shell that waits for ``path`` (at most 120 s): a holder keeps its lock until the test has seen what it
    looks for, however slowly a busy machine starts the other shells, instead of for a fixed time."""
    return f"for _ in $(seq 2400); do [ -e {path} ] && break; sleep 0.05; done"


def test_second_run_waits_for_the_first_and_names_it(tmp_path):
    lock, got, release, b_log = tmp_path / "base.lock", tmp_path / "a-has-it", tmp_path / "release", tmp_path / "b.err"
    a = bash(f"lock_take {lock} 'the base image'; touch {got}; {until_exists(release)}; date +%s.%N")
    wait_until(got.exists, what="A taking the lock")
    b = bash(f"lock_take {lock} 'the base image' 2>{b_log}; date +%s.%N")
    wait_until(lambda: b_log.exists() and "is held by another run" in b_log.read_text(), what="B waiting for A")
    release.touch()
    a_out, _ = a.communicate(timeout=120)
    b_out, _ = b.communicate(timeout=120)
    b_err = b_log.read_text()
    assert a.returncode == 0 and b.returncode == 0, b_err
    assert f"waiting for the base image: {lock} is held by another run" in b_err and f"pid {a.pid} " in b_err
    assert "got the base image after" in b_err
    assert float(b_out) >= float(a_out)          # B ran only once A was done


def test_readers_share_and_a_deleter_never_takes_a_cache_in_use(tmp_path):
    lock, got, release = tmp_path / "wheelhouse.lock", tmp_path / "reading", tmp_path / "release"
    reader = bash(f"lock_take {lock} 'reading' shared; touch {got}; {until_exists(release)}")
    wait_until(got.exists, what="the reader taking the lock")
    other = bash(f"lock_take {lock} 'reading' shared; echo in")   # a second reader: no wait
    out, err = other.communicate(timeout=120)
    assert out.strip() == "in" and "waiting" not in err
    busy = bash(f"lock_try_exclusive {lock} && echo deleted || echo kept")
    assert busy.communicate(timeout=120)[0].strip() == "kept"
    release.touch()
    reader.wait(timeout=120)
    free = bash(f"lock_try_exclusive {lock} && echo deleted || echo kept")
    assert free.communicate(timeout=30)[0].strip() == "deleted"


def test_a_killed_holder_releases_the_lock(tmp_path):
    lock, got = tmp_path / "engine.lock", tmp_path / "held"
    a = bash(f"lock_take {lock} engine; touch {got}; sleep 600")
    wait_until(got.exists, what="the holder taking the lock")
    a.kill()
    a.wait()
    out, err = bash(f"NBKIT_LOCK_WAIT_S=20 lock_take {lock} engine; echo got").communicate(timeout=60)
    assert out.strip() == "got", err


def test_a_child_daemon_does_not_inherit_the_lock(tmp_path):
    # docker_engine.sh starts dockerd while holding the start lock; it closes the fd for it
    lock = tmp_path / "engine.lock"
    script = (f"lock_take {lock} start; fd=${{NBKIT_LOCK_FDS[{lock}]}}; "
              f"sleep 60 >/dev/null 2>&1 {{fd}}>&- & echo $!")
    out, err = bash(script).communicate(timeout=30)
    daemon = int(out)                             # still running; its parent shell has exited
    try:
        got = bash(f"lock_try_exclusive {lock} && echo free || echo held").communicate(timeout=30)[0]
        assert got.strip() == "free"
    finally:
        os.kill(daemon, 9)


needs_mounts = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                  reason="needs root and unshare to mount proc in a private mount namespace")


def in_namespace(script: str) -> subprocess.CompletedProcess:
    """Run ``script`` with the helpers in a private mount namespace (nothing leaks to the host)."""
    cmd = ["unshare", "-m", "--propagation", "private", "bash", "-c",
           f"set -uo pipefail; . {LOCKS}; . {ROOTFS}; {script}"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@needs_mounts
def test_failed_debootstrap_leaves_nothing_mounted(tmp_path):
    root, fake = tmp_path / "rootfs", tmp_path / "fake-debootstrap"
    fake.write_text(f"#!/bin/sh\nmkdir -p {root}/proc {root}/sys\nmount -t proc proc {root}/proc\n"
                    f"mount -t tmpfs tmpfs {root}/sys\necho 'E: package not found' >&2\nexit 1\n")
    fake.chmod(0o755)
    res = in_namespace(f"DEBOOTSTRAP={fake} rootfs_debootstrap {root} minbase {root}; echo rc=$?; "
                       f"echo mounts=$(rootfs_mounts {root} | wc -l)")
    assert "rc=1" in res.stdout and "mounts=0" in res.stdout, res.stdout + res.stderr
    assert not root.exists()


@needs_mounts
def test_stale_root_with_proc_mounted_is_unmounted_then_removed(tmp_path):
    root = tmp_path / "rootfs"
    script = (f"mkdir -p {root}/proc {root}/var; mount -t proc proc {root}/proc; "
              f"rm -rf {root} 2>/dev/null; echo plain_rm=$?; "        # what every later run hit
              f"rootfs_clean {root}; echo clean=$?; test -e {root} && echo left || echo gone")
    res = in_namespace(script)
    assert "plain_rm=1" in res.stdout, res.stdout + res.stderr
    assert "clean=0" in res.stdout and "gone" in res.stdout, res.stdout + res.stderr


def test_build_script_uses_the_helpers():
    text = (REPO / "scripts" / "build_test_image.sh").read_text()
    assert ". scripts/lib/locks.sh" in text and ". scripts/lib/rootfs.sh" in text
    assert "trap on_exit EXIT" in text and 'rootfs_debootstrap "$rootfs"' in text
    assert 'rm -rf "$rootfs"\n' not in text and "$CACHE/context" not in text and '"$CACHE/build.log"' not in text
    engine = (REPO / "scripts" / "docker_engine.sh").read_text()
    assert "engine.lock" in engine and "{lock_fd}>&-" in engine
