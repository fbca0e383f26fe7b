"""Start and stop the JupyterLab server the container uses, for browser tests.

`LabServer` launches ``jupyter lab`` with the shared configuration
``docker/jupyter_server_config.py`` (the one ``docker/entrypoint.sh`` uses) on
127.0.0.1, a free port and a random token, isolated from the user's own Jupyter
setup by temporary ``JUPYTER_CONFIG_DIR``/``JUPYTER_DATA_DIR``/settings
directories. Test-only settings go into ``overrides.json`` in a temporary
application settings directory:

- ``windowingMode: "none"``: JupyterLab 4 otherwise skips rendering cells that
  are off-screen, so their outputs would be missing from the DOM;
- autosave off, news and update checks off: no writes, no network, no toasts.

Kernels run in their own process session (jupyter_client starts them with
``start_new_session=True``), so killing the server's process group would leave
them behind. The server records the PIDs of everything it spawned (polled with
psutil) and ``stop()`` kills those by PID, also after a crash or on SIGTERM.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
from nethelpers import free_port

REPO = Path(__file__).resolve().parents[2]
SERVER_CONFIG = REPO / "docker" / "jupyter_server_config.py"

# Settings JupyterLab reads from {app_settings_dir}/overrides.json.
OVERRIDES = {
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


class LabServer:
    """One JupyterLab server on loopback serving a temporary copy of notebooks.

    Args:
        root: directory served as the JupyterLab root (the tests copy the
            notebooks there so that running them never edits the repository).
        env: extra environment for the server and its kernels (e.g.
            ``NBKIT_SCALE=smoke``, ``NBKIT_RUNS_DIR``).
        startup_timeout_s: seconds to wait for ``/api/status`` to answer.

    Raises:
        RuntimeError: the server exited or did not answer in time (the message
            carries the tail of its log).
    """

    def __init__(self, root: Path, env: dict[str, str] | None = None, startup_timeout_s: float = 180.0):
        self.root = Path(root)
        self.extra_env = dict(env or {})
        self.startup_timeout_s = startup_timeout_s
        self.token = secrets.token_hex(24)
        self.port = free_port()
        self.home = Path(tempfile.mkdtemp(prefix="nbkit-lab-"))
        self.log_path = self.home / "server.log"
        self.proc: subprocess.Popen | None = None
        self.pids: set[int] = set()  # every process the server spawned (kernels too)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "lab", token: bool = True) -> str:
        """URL of ``path`` under the server, with ``?token=`` unless ``token=False``."""
        url = f"{self.base_url}/{path.lstrip('/')}"
        return f"{url}{'&' if '?' in url else '?'}token={self.token}" if token else url

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        for sub in ("config", "data", "runtime", "settings", "workspaces", "app-settings"):
            (self.home / sub).mkdir(exist_ok=True)
        (self.home / "app-settings" / "overrides.json").write_text(json.dumps(OVERRIDES, indent=1))
        env.update(
            JUPYTER_CONFIG_DIR=str(self.home / "config"),
            JUPYTER_DATA_DIR=str(self.home / "data"),
            JUPYTER_RUNTIME_DIR=str(self.home / "runtime"),
            JUPYTERLAB_SETTINGS_DIR=str(self.home / "settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(self.home / "workspaces"),
            JUPYTER_TOKEN=self.token,
            # read by docker/jupyter_server_config.py
            NBKIT_JUPYTER_IP="127.0.0.1",
            NBKIT_JUPYTER_PORT=str(self.port),
            NBKIT_NOTEBOOK_DIR=str(self.root),
            HF_HUB_OFFLINE="1",
            HF_DATASETS_OFFLINE="1",
            TOKENIZERS_PARALLELISM="false",
            # kernels import nbkit from this checkout, as pytest does
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")])),
        )
        env.pop("JUPYTER_PATH", None)
        env.update(self.extra_env)
        return env

    def start(self) -> "LabServer":
        """Launch the server and wait until ``/api/status`` answers with the token."""
        cmd = [
            sys.executable, "-m", "jupyter", "lab",
            f"--config={SERVER_CONFIG}",
            f"--LabApp.app_settings_dir={self.home / 'app-settings'}",
            "--ServerApp.shutdown_no_activity_timeout=1800",  # safety net if all else fails
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # jupyter refuses to run as root without it
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            cmd, cwd=self.root, env=self._environment(), stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.pids.add(self.proc.pid)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=2) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"jupyter lab did not answer within {self.startup_timeout_s:.0f} s:\n{self.log_tail()}")

    def log_tail(self, n_chars: int = 4000) -> str:
        """The last ``n_chars`` characters of the server log (for error messages)."""
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:]
        except OSError:
            return "(no server log)"

    def record_pids(self) -> set[int]:
        """Add the server's live descendants (kernels included) to ``self.pids``."""
        if self.proc is not None:
            try:
                kids = psutil.Process(self.proc.pid).children(recursive=True)
                self.pids.update(p.pid for p in kids)
            except psutil.NoSuchProcess:
                pass
        return self.pids

    def alive_pids(self) -> list[int]:
        """Recorded PIDs that still run (and are not zombies)."""
        alive = []
        for pid in self.pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        return alive

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop the server, then kill every recorded PID that is left.

        SIGTERM lets the server shut its kernels down; whatever survives
        ``grace_s`` seconds gets SIGKILL, by PID and by process group (the
        kernels' own sessions). Safe to call twice and from a signal handler.
        """
        self.record_pids()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        procs = []
        for pid in self.alive_pids():
            try:
                procs.append(psutil.Process(pid))
                procs[-1].terminate()
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(procs, timeout=2)
        for p in alive:
            for kill in (lambda: os.killpg(p.pid, signal.SIGKILL), p.kill):
                try:
                    kill()
                except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
                    pass
        psutil.wait_procs(alive, timeout=2)
        if self.proc is not None:
            try:
                self.proc.wait(2)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.home, ignore_errors=True)
