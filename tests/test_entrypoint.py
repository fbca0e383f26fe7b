"""docker/entrypoint.sh run on the host, as the container would run it.

A real JupyterLab server starts through the entrypoint (with the shared
docker/jupyter_server_config.py) on a free loopback port: it must reject requests
without the token (403), accept them with it, and pass docker/healthcheck.py. The
refusals (empty token, auth-disabling flags, root, unwritable folders, SSH without
keys) run with NBKIT_DRY_RUN=1, which does every check and starts nothing.
When the tests run as root (CI), the entrypoint runs as root stripped of every
capability (setpriv), so that file permissions bind it as they bind the image's
non-root user; the container test (tests/docker/) checks the real UID 1000.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from nethelpers import free_port, http_status, stop_group

REPO = Path(__file__).resolve().parents[1]
ENTRYPOINT = REPO / "docker" / "entrypoint.sh"
HEALTHCHECK = REPO / "docker" / "healthcheck.py"
IS_ROOT = os.geteuid() == 0
# A plain UID switch is not enough: the venv's Python may live under /root (mode 700).
AS_USER = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"] if IS_ROOT else []
ROOT_OK = {"NBKIT_ALLOW_ROOT": "1"} if IS_ROOT else {}



def make_base() -> Path:
    """A folder tree the entrypoint's user owns: home, notebooks, data, runs, runtime."""
    base = Path(tempfile.mkdtemp(prefix="nbkit-entry-", dir="/tmp"))
    base.chmod(0o755)
    for sub in ("home", "work", "data", "runs", "runtime", "config"):
        (base / sub).mkdir()
    return base


def env_for(base: Path, port: int, **extra: str) -> dict[str, str]:
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(base / "home"),
        "NBKIT_JUPYTER_IP": "127.0.0.1",  # loopback only on the host
        "NBKIT_JUPYTER_PORT": str(port),
        "NBKIT_HOST_PORT": str(port),
        "NBKIT_NOTEBOOK_DIR": str(base / "work"),
        "NBKIT_DATA_DIR": str(base / "data"),
        "NBKIT_RUNS_DIR": str(base / "runs"),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "JUPYTER_CONFIG_DIR": str(base / "config"),
    }
    env.update(ROOT_OK)
    env.update(extra)
    return env


def run_entry(base: Path, *args: str, as_user: bool = True, **extra: str) -> subprocess.CompletedProcess:
    """Run the entrypoint to completion (dry run unless told otherwise)."""
    env = env_for(base, free_port(), NBKIT_DRY_RUN="1", **extra)
    cmd = (AS_USER if as_user else []) + ["bash", str(ENTRYPOINT), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)



@pytest.fixture(scope="module")
def server():
    """JupyterLab started by the entrypoint with a generated token; (url, token, base, log)."""
    base, port = make_base(), free_port()
    log = base / "entrypoint.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(AS_USER + ["bash", str(ENTRYPOINT)], env=env_for(base, port),
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"server exited:\n{log.read_text()}"
            try:
                if http_status(url + "api") == 200:
                    break
            except OSError:
                pass
            time.sleep(0.3)
        else:
            pytest.fail(f"server did not answer within 90 s:\n{log.read_text()}")
        found = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=(\S+)", log.read_text())
        assert found, f"no URL with token printed:\n{log.read_text()}"
        yield url, found.group(1), base, log
    finally:
        stop_group(proc)
        shutil.rmtree(base, ignore_errors=True)


def test_generated_token_is_long_and_random(server):
    _, token, _, _ = server
    assert re.fullmatch(r"[0-9a-f]{48}", token)


def test_requests_without_or_with_a_wrong_token_get_403(server):
    url, token, _, _ = server
    assert http_status(url + "api/contents") == 403
    assert http_status(url + "api/contents", token="0" * 48) == 403
    assert http_status(url + "api/kernels") == 403


def test_requests_with_the_token_are_accepted(server):
    url, token, _, _ = server
    assert http_status(url + "api/contents", token=token) == 200
    assert http_status(url + f"api/status?token={token}") == 200


def test_healthcheck_passes_against_the_running_server(server):
    _, _, base, _ = server
    env = {"PATH": os.environ["PATH"], "HOME": str(base / "home"), "JUPYTER_RUNTIME_DIR": str(base / "runtime")}
    res = subprocess.run([sys.executable, str(HEALTHCHECK)], env=env, capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and res.stdout.startswith("healthy"), res.stdout


def test_healthcheck_fails_with_a_wrong_token_or_no_server(server, tmp_path):
    url, _, _, _ = server
    port = url.rsplit(":", 1)[1].strip("/")
    env = {"PATH": os.environ["PATH"], "JUPYTER_RUNTIME_DIR": str(tmp_path),
           "NBKIT_JUPYTER_PORT": port, "JUPYTER_TOKEN": "f" * 48}
    res = subprocess.run([sys.executable, str(HEALTHCHECK)], env=env, capture_output=True, text=True, timeout=30)
    assert res.returncode == 1 and "HTTP 403" in res.stdout, res.stdout
    env["NBKIT_JUPYTER_PORT"] = str(free_port())
    res = subprocess.run([sys.executable, str(HEALTHCHECK)], env=env, capture_output=True, text=True, timeout=30)
    assert res.returncode == 1 and res.stdout.startswith("unhealthy"), res.stdout


def test_explicit_token_is_used_in_the_printed_url():
    base = make_base()
    res = run_entry(base, JUPYTER_TOKEN="my-own-token-0123456789abcdef")
    assert res.returncode == 0, res.stderr
    assert "/lab?token=my-own-token-0123456789abcdef" in res.stderr
    assert f"--config={REPO}/docker/jupyter_server_config.py" in res.stderr


def test_empty_token_is_refused_unless_explicitly_allowed():
    base = make_base()
    res = run_entry(base, JUPYTER_TOKEN="")
    assert res.returncode == 1 and "NBKIT_ALLOW_NO_AUTH=1" in res.stderr
    res = run_entry(base, JUPYTER_TOKEN="", NBKIT_ALLOW_NO_AUTH="1")
    assert res.returncode == 0 and "authentication is DISABLED" in res.stderr


@pytest.mark.parametrize("flag", ["--IdentityProvider.token=", "--ServerApp.token=''", "--ServerApp.password="])
def test_auth_disabling_flags_are_refused(flag):
    res = run_entry(make_base(), flag)
    assert res.returncode == 1 and "weaken authentication" in res.stderr


def test_unwritable_runs_dir_prints_the_uid_fix():
    base = make_base()
    locked = base / "locked"
    locked.mkdir(mode=0o555)
    # mode 555: neither a normal user nor capability-less root may write there
    res = run_entry(base, NBKIT_RUNS_DIR=str(locked))
    assert res.returncode == 1
    assert f"NBKIT_RUNS_DIR={locked} is not writable" in res.stderr
    assert "UID mismatch" in res.stderr and "chown -R" in res.stderr and "NB_UID" in res.stderr
    assert "token=" not in res.stderr, "must stop before starting the server"


def test_root_is_refused_unless_allowed():
    if not IS_ROOT:
        pytest.skip("needs root to run the entrypoint as root")
    res = run_entry(make_base(), as_user=False, NBKIT_ALLOW_ROOT="0")
    assert res.returncode == 1 and "NBKIT_ALLOW_ROOT=1" in res.stderr
    res = run_entry(make_base(), as_user=False, NBKIT_ALLOW_ROOT="1")
    assert res.returncode == 0 and "--allow-root" in res.stderr


def test_ssh_needs_authorized_keys():
    res = run_entry(make_base(), NBKIT_SSH="1")
    assert res.returncode == 1
    assert "authorized_keys is missing" in res.stderr and "password login is disabled" in res.stderr


def test_notebooks_are_seeded_without_overwriting_user_edits():
    base = make_base()
    seed = base / "seed"
    seed.mkdir()
    (seed / "00_a.ipynb").write_text("image copy")
    (seed / "01_b.ipynb").write_text("image copy")
    nbdir = base / "work" / "notebooks"
    nbdir.mkdir()
    (nbdir / "01_b.ipynb").write_text("user edit")
    (seed / "data").mkdir()                              # notebook 05's sample files
    (seed / "data" / "a.csv").write_text("image copy")
    (seed / "data" / "b.txt").write_text("image copy")
    (nbdir / "data").mkdir()
    (nbdir / "data" / "b.txt").write_text("user edit")
    res = run_entry(base, NBKIT_SEED_NOTEBOOKS=str(seed))
    assert res.returncode == 0, res.stderr
    assert (nbdir / "00_a.ipynb").read_text() == "image copy"
    assert (nbdir / "01_b.ipynb").read_text() == "user edit"
    assert (nbdir / "data" / "a.csv").read_text() == "image copy"
    assert (nbdir / "data" / "b.txt").read_text() == "user edit"


def test_unchanged_seeded_notebooks_are_trusted_edited_ones_are_not_signed():
    from nbformat import read
    from nbformat.sign import NotebookNotary

    base = make_base()
    seed = base / "seed"
    seed.mkdir()
    src = Path(__file__).resolve().parents[1] / "notebooks" / "00_environment_check.ipynb"
    shutil.copy(src, seed / "00_environment_check.ipynb")
    shutil.copy(src, seed / "01_copy.ipynb")
    nbdir = base / "work" / "notebooks"
    nbdir.mkdir()
    (nbdir / "01_copy.ipynb").write_text(src.read_text().replace("# 00", "# 00 (edited)", 1))
    res = run_entry(base, NBKIT_SEED_NOTEBOOKS=str(seed))
    assert res.returncode == 0, res.stderr
    notary = NotebookNotary(data_dir=str(base / "home" / ".local" / "share" / "jupyter"))
    assert notary.check_signature(read(nbdir / "00_environment_check.ipynb", as_version=4))
    assert not notary.check_signature(read(nbdir / "01_copy.ipynb", as_version=4))


def test_other_commands_run_after_the_checks():
    base = make_base()
    env = env_for(base, free_port())
    res = subprocess.run(AS_USER + ["bash", str(ENTRYPOINT), "id", "-u"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == str(os.geteuid())
    assert "token=" not in res.stderr
