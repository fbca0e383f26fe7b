"""The real container: build the image with a local Docker engine (no registry) and use it.

scripts/docker_engine.sh starts dockerd (as root; data under /tmp), and
scripts/build_test_image.sh builds the image from a debootstrap base and a host-side
wheelhouse with `docker build --network none` (cached between runs); debootstrap
fetches the base's packages from the Debian mirror and `pip wheel` from the package
index, so a cold run needs network. The running
container must become healthy, enforce its token, run as UID 1000, execute notebook
00 (or, until the repository has it, a small notebook that imports nbkit), offer
key-only SSH, and refuse an unwritable volume with the UID fix. Cold: several
minutes (debootstrap + wheelhouse + build); warm: about a minute.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from nethelpers import free_port, http_status

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK_00 = REPO / "notebooks" / "00_environment_check.ipynb"
TIMINGS = Path(os.environ.get("NBKIT_DOCKER_TIMINGS", "/tmp/nbkit-docker/timings.txt"))


def sh(*cmd: str, timeout: float = 120, check: bool = True, **kw) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and res.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} -> {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return res




def record(line: str) -> None:
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    with open(TIMINGS, "a") as f:
        f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")


@pytest.fixture(scope="module")
def image():
    """Start (if needed) a Docker engine, build the test image; stop the engine when the
    last run using it ends (another clone's test may share it: see engine_users)."""
    if os.geteuid() != 0 and sh("docker", "info", check=False).returncode != 0:
        pytest.skip("needs root (to install/start dockerd and run debootstrap) or a running Docker engine")
    with engine_users() as last_user:
        t0 = time.monotonic()
        eng = sh("bash", str(REPO / "scripts" / "docker_engine.sh"), timeout=600)
        record(f"engine {time.monotonic() - t0:.1f} s ({eng.stdout.strip()})")
        try:
            yield _build_image()
        finally:
            if last_user():
                stop_nbkit_dockerd()


STATE = Path(os.environ.get("NBKIT_DOCKER_STATE", "/tmp/nbkit-docker"))
EXEC_ROOT = Path(os.environ.get("NBKIT_DOCKER_EXEC_ROOT", "/tmp/nbkit-docker/exec"))


@contextlib.contextmanager
def engine_users(state: Path = STATE):
    """Hold a shared flock on ``state/engine.users.lock`` while using the engine (as
    scripts/docker_engine.sh describes); yields ``last_user()``, which drops it and tries
    the exclusive lock without waiting: True when no other run uses the engine (the lock
    is then held until the block ends, so nobody starts using an engine being stopped)."""
    state.mkdir(parents=True, exist_ok=True)
    fd = os.open(state / "engine.users.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting: another run is stopping the Docker engine ({state / 'engine.users.lock'})")
            fcntl.flock(fd, fcntl.LOCK_SH)

        def last_user() -> bool:
            fcntl.flock(fd, fcntl.LOCK_UN)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                print("leaving the Docker engine running: another run still uses it")
                return False
        yield last_user
    finally:
        os.close(fd)


def stop_nbkit_dockerd(exec_root: Path = EXEC_ROOT) -> None:
    """Stop the dockerd that scripts/docker_engine.sh started (its pidfile), if any; a
    system engine (no such pidfile) is left alone."""
    try:
        pid = int((exec_root / "dockerd.pid").read_text())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, 15)
    except ProcessLookupError:
        return
    for _ in range(60):
        if not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.5)


def _build_image() -> str:
    """scripts/build_test_image.sh; its stage timings go to TIMINGS. Returns the image tag."""
    t0 = time.monotonic()
    build = sh("bash", str(REPO / "scripts" / "build_test_image.sh"), timeout=1200)
    for line in build.stderr.splitlines():
        if line.startswith("stage "):
            record(line)
    record(f"image total {time.monotonic() - t0:.1f} s")
    return build.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def ssh_key():
    if not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        pytest.skip("needs ssh and ssh-keygen (Debian's openssh-client) on the host")
    d = Path(tempfile.mkdtemp(prefix="nbkit-sshkey-"))
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "id_ed25519"))
    (d / "id_ed25519.pub").chmod(0o644)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def container(image, ssh_key):
    """The image running with SSH on, published on loopback; waits until healthy."""
    name = f"nbkit-test-{uuid.uuid4().hex[:8]}"
    port, ssh_port = free_port(), free_port()
    sh("docker", "run", "-d", "--name", name,
       "-p", f"127.0.0.1:{port}:8888", "-p", f"127.0.0.1:{ssh_port}:2222",
       "-e", f"NBKIT_HOST_PORT={port}", "-e", "NBKIT_SSH=1",
       "-v", f"{ssh_key / 'id_ed25519.pub'}:/home/jovyan/.ssh/authorized_keys:ro",
       "--health-interval", "2s", "--health-start-period", "120s", image)
    try:
        t0 = time.monotonic()
        status = ""
        while time.monotonic() - t0 < 180:
            status = sh("docker", "inspect", "-f", "{{.State.Health.Status}} {{.State.Running}}", name).stdout.split()
            if status[0] == "healthy" or status[1] != "true":
                break
            time.sleep(1)
        logs = sh("docker", "logs", name).stderr
        assert status[0] == "healthy", f"container {status}:\n{logs[-4000:]}"
        record(f"run: healthy after {time.monotonic() - t0:.1f} s")
        found = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=([0-9a-f]+)", logs)
        assert found, f"no host URL with token in the logs:\n{logs[-4000:]}"
        yield {"name": name, "port": port, "ssh_port": ssh_port, "token": found.group(1), "logs": logs}
    finally:
        sh("docker", "rm", "-f", "-v", name, check=False)


def test_healthcheck_reports_the_server_api(container):
    health = json.loads(sh("docker", "inspect", "-f", "{{json .State.Health}}", container["name"]).stdout)
    assert health["Status"] == "healthy"
    assert health["Log"][-1]["ExitCode"] == 0 and "healthy:" in health["Log"][-1]["Output"]


def test_token_is_enforced_from_the_host(container):
    url = f"http://127.0.0.1:{container['port']}/"
    assert http_status(url + "api/contents") == 403
    assert http_status(url + "api/contents", token="0" * 48) == 403
    assert http_status(url + "api/contents", token=container["token"]) == 200


def test_processes_do_not_run_as_root(container):
    name = container["name"]
    assert sh("docker", "inspect", "-f", "{{.Config.User}}", name).stdout.strip() == "1000"
    assert sh("docker", "exec", name, "id", "-u").stdout.strip() == "1000"
    # PID 1 is tini, and every process in the container runs as UID 1000.
    assert "tini" in sh("docker", "exec", name, "cat", "/proc/1/cmdline").stdout
    uids = sh("docker", "exec", name, "ps", "-eo", "uid=").stdout.split()
    assert uids and set(uids) == {"1000"}, uids


def test_widget_kernel_and_lab_extension_versions_match(container):
    # ipywidgets (kernel side) pins the jupyterlab_widgets release whose prebuilt lab
    # extension (@jupyter-widgets/jupyterlab-manager) speaks its protocol.
    code = ("import json, pathlib, sys, importlib.metadata as md;"
            "from packaging.requirements import Requirement;"
            "req = [Requirement(r) for r in md.requires('ipywidgets') if r.startswith('jupyterlab')][0];"
            "have = md.version('jupyterlab_widgets');"
            "p = pathlib.Path(sys.prefix, 'share/jupyter/labextensions/@jupyter-widgets/jupyterlab-manager/package.json');"
            "print(json.dumps([str(req), have, req.specifier.contains(have), json.loads(p.read_text())['version']]))")
    req, have, ok, ext = json.loads(sh("docker", "exec", container["name"], "python", "-c", code).stdout)
    assert ok, f"ipywidgets needs {req}, image has jupyterlab_widgets {have}"
    listing = sh("docker", "exec", container["name"], "jupyter", "labextension", "list")
    text = listing.stdout + listing.stderr
    assert re.search(rf"@jupyter-widgets/jupyterlab-manager v{re.escape(ext)} .*enabled.*OK.*jupyterlab_widgets", text), text


def smoke_notebook() -> str:
    """Stand-in for notebook 00 until the repository has it: import nbkit and report."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("from nbkit.recipes import resolve_scale\nscale = resolve_scale()"),
        nbformat.v4.new_code_cell("import os, nbkit, torch\n"
                                  "print('nbkit', nbkit.__version__, 'scale', scale, 'uid', os.getuid(),"
                                  " 'torch', torch.__version__)"),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nbformat.writes(nb)


def test_notebook_00_executes_inside_the_container(container):
    name = container["name"]
    if NOTEBOOK_00.exists():  # seeded into ~/notebooks by the entrypoint
        path = "/home/jovyan/notebooks/00_environment_check.ipynb"
    else:
        path = "/tmp/smoke.ipynb"
        subprocess.run(["docker", "exec", "-i", name, "sh", "-c", f"cat > {path}"],
                       input=smoke_notebook(), text=True, check=True, timeout=60)
    t0 = time.monotonic()
    sh("docker", "exec", "-e", "NBKIT_SCALE=smoke", "-e", "NBKIT_RUNS_DIR=/tmp/nbkit-runs",
       "-e", "HF_HUB_OFFLINE=1", "-e", "MPLBACKEND=Agg", name,
       "jupyter", "nbconvert", "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=600",
       "--output", "/tmp/executed.ipynb", path, timeout=900)
    record(f"run: notebook {Path(path).name} executed in {time.monotonic() - t0:.1f} s")
    executed = nbformat.reads(sh("docker", "exec", name, "cat", "/tmp/executed.ipynb").stdout, as_version=4)
    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    if not NOTEBOOK_00.exists():
        text = "".join(o.get("text", "") for o in outputs)
        assert re.search(r"nbkit \S+ scale smoke uid 1000 torch \d", text), text


def test_ssh_is_key_only(container, ssh_key):
    opts = ["-p", str(container["ssh_port"]), "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
    ok = sh("ssh", *opts, "-i", str(ssh_key / "id_ed25519"), "jovyan@127.0.0.1", "id", "-u", timeout=60)
    assert ok.stdout.strip() == "1000"
    pw = sh("ssh", *opts, "-o", "PubkeyAuthentication=no",
            "-o", "PreferredAuthentications=password,keyboard-interactive",
            "jovyan@127.0.0.1", "true", timeout=60, check=False)
    assert pw.returncode != 0 and "Permission denied (publickey)" in pw.stderr, pw.stderr


def test_image_has_no_secrets_or_passwords(image):
    env = json.loads(sh("docker", "image", "inspect", "-f", "{{json .Config.Env}}", image).stdout)
    assert not [e for e in env if re.match(r"\w*(TOKEN|PASSWORD|SECRET)\w*=.", e)], env
    shadow = sh("docker", "run", "--rm", "--user", "0", "--entrypoint", "cat", image, "/etc/shadow").stdout
    jovyan = [line.split(":") for line in shadow.splitlines() if line.startswith("jovyan:")]
    assert jovyan and jovyan[0][1] in ("!", "*", "!*", "!!"), "jovyan must have no usable password"
    keys = sh("docker", "run", "--rm", "--entrypoint", "sh", image, "-c", "ls /etc/ssh/ | grep -c host_ || true")
    assert keys.stdout.strip() == "0", "SSH host keys baked into the image"


def test_another_uid_with_group_100_can_run_the_server(image):
    # docker-stacks' remapping: `--user <uid>:100` needs no rebuild (group-writable home).
    name = f"nbkit-remap-{uuid.uuid4().hex[:8]}"
    sh("docker", "run", "-d", "--name", name, "--user", "1234:100", "--health-interval", "2s", image)
    try:
        status, t0 = "", time.monotonic()
        while status != "healthy" and time.monotonic() - t0 < 120:
            time.sleep(1)
            status = sh("docker", "inspect", "-f", "{{.State.Health.Status}}", name).stdout.strip()
        assert status == "healthy", sh("docker", "logs", name).stderr[-3000:]
        out = sh("docker", "exec", name, "sh", "-c", "id -u; touch ~/runs/x ~/data/x ~/notebooks/x && echo writable")
        assert out.stdout.split() == ["1234", "writable"]
    finally:
        sh("docker", "rm", "-f", "-v", name, check=False)


def test_unwritable_volume_prints_the_uid_fix(image, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir(mode=0o755)  # owned by root on the host: UID 1000 cannot write
    os.chown(runs, 0, 0)
    res = sh("docker", "run", "--rm", "-v", f"{runs}:/home/jovyan/runs", image, timeout=120, check=False)
    assert res.returncode == 1
    assert "NBKIT_RUNS_DIR=/home/jovyan/runs is not writable" in res.stderr and "UID mismatch" in res.stderr
    assert "token=" not in res.stderr
