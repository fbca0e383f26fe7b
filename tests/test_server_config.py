"""docker/jupyter_server_config.py keeps authentication on, whoever starts the server.

The README's local command (`jupyter lab --config docker/jupyter_server_config.py`)
runs without the container entrypoint, so the config file itself must never turn
the token off by accident and must listen on loopback unless told otherwise. The
unit tests load the file with traitlets' PyFileConfigLoader, which is how Jupyter
reads `--config` files; two tests start a real server to check that Jupyter does
what the loaded config promises.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nethelpers import free_port, http_status, stop_group
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader
from waiting import wait_until

CONFIG = Path(__file__).resolve().parents[1] / "docker" / "jupyter_server_config.py"
NBKIT_VARS = ("JUPYTER_TOKEN", "JUPYTER_TOKEN_FILE", "NBKIT_ALLOW_NO_AUTH", "NBKIT_JUPYTER_IP",
              "NBKIT_JUPYTER_PORT", "TOKENIZERS_PARALLELISM", "JUPYTER_CONFIG_PATH", "NBKIT_BEHIND_PROXY")


def load(monkeypatch, **env: str) -> Config:
    """The config Jupyter would build from the file under exactly ``env`` (others unset)."""
    for name in NBKIT_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return PyFileConfigLoader(CONFIG.name, path=str(CONFIG.parent)).load_config()


def test_unset_token_leaves_jupyters_random_token_on(monkeypatch):
    cfg = load(monkeypatch)
    assert "token" not in cfg.IdentityProvider, "an explicit token would replace Jupyter's random one"
    assert "token" not in cfg.ServerApp and "password" not in cfg.PasswordIdentityProvider


def test_kernels_inherit_tokenizers_parallelism_off_unless_set(monkeypatch):
    import os

    load(monkeypatch)
    assert os.environ["TOKENIZERS_PARALLELISM"] == "false"
    load(monkeypatch, TOKENIZERS_PARALLELISM="true")
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"


def test_a_set_token_is_used(monkeypatch):
    assert load(monkeypatch, JUPYTER_TOKEN="from-env-0123456789").IdentityProvider.token == "from-env-0123456789"


def test_empty_token_is_refused_with_the_fix(monkeypatch):
    with pytest.raises(SystemExit) as info:
        load(monkeypatch, JUPYTER_TOKEN="")
    msg = str(info.value.code)
    assert "unset JUPYTER_TOKEN" in msg and "NBKIT_ALLOW_NO_AUTH=1" in msg
    with pytest.raises(SystemExit):
        load(monkeypatch, JUPYTER_TOKEN="", NBKIT_ALLOW_NO_AUTH="yes")  # only "1" counts


def test_empty_token_with_allow_no_auth_disables_the_token(monkeypatch):
    # What docker/entrypoint.sh passes on after its own warning.
    assert load(monkeypatch, JUPYTER_TOKEN="", NBKIT_ALLOW_NO_AUTH="1").IdentityProvider.token == ""


def test_listens_on_loopback_unless_told(monkeypatch):
    cfg = load(monkeypatch)
    assert cfg.ServerApp.ip == "127.0.0.1" and cfg.ServerApp.port == 8888
    # Left to Jupyter, which turns the Host-header (DNS rebinding) check off only off loopback.
    assert "allow_remote_access" not in cfg.ServerApp
    cfg = load(monkeypatch, NBKIT_JUPYTER_IP="0.0.0.0", NBKIT_JUPYTER_PORT="9999")
    assert cfg.ServerApp.ip == "0.0.0.0" and cfg.ServerApp.port == 9999


def test_the_image_and_the_entrypoint_listen_on_all_interfaces():
    docker = CONFIG.parent
    assert re.search(r"^\s+NBKIT_JUPYTER_IP=0\.0\.0\.0 \\$", (docker / "Dockerfile").read_text(), re.M)
    assert "export NBKIT_JUPYTER_IP=${NBKIT_JUPYTER_IP:-0.0.0.0}" in (docker / "entrypoint.sh").read_text()


def test_forwarded_headers_are_trusted_only_behind_a_proxy(monkeypatch):
    # Without a proxy a client could name any address in X-Forwarded-For and the log would believe it.
    assert load(monkeypatch).ServerApp.trust_xheaders is False
    assert load(monkeypatch, NBKIT_BEHIND_PROXY="0").ServerApp.trust_xheaders is False
    assert load(monkeypatch, NBKIT_BEHIND_PROXY="1").ServerApp.trust_xheaders is True
    with pytest.raises(SystemExit, match="NBKIT_BEHIND_PROXY='yes': set it to 1"):
        load(monkeypatch, NBKIT_BEHIND_PROXY="yes")  # a typo must not silently mean "no proxy"


def test_the_proxy_setting_is_documented_for_users():
    readme = (CONFIG.parents[1] / "README.md").read_text(encoding="utf-8")
    assert "NBKIT_BEHIND_PROXY=1" in readme and "NBKIT_BEHIND_PROXY" in CONFIG.read_text()



def _wait_ready(proc, port: int, token: str, log: Path, timeout_s: float = 120) -> None:
    """Until the server answers ``/api/status`` with 200; fails with its log if it exits or times out."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        try:
            if http_status(f"http://127.0.0.1:{port}/api/status", token=token) == 200:
                return
        except OSError:  # not listening yet
            pass
        time.sleep(0.3)

def _jupyter(tmp_path: Path, port: int, **env: str) -> subprocess.Popen:
    """``jupyter lab --config=<ours>`` in a throwaway Jupyter home; output in tmp_path/log."""
    base = {k: v for k, v in os.environ.items() if k not in NBKIT_VARS}
    base.update(HOME=str(tmp_path), JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
                JUPYTER_DATA_DIR=str(tmp_path / "data"), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
                NBKIT_JUPYTER_PORT=str(port), NBKIT_NOTEBOOK_DIR=str(tmp_path), **env)
    cmd = [sys.executable, "-m", "jupyterlab", f"--config={CONFIG}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    with open(tmp_path / "log", "w") as log:
        return subprocess.Popen(cmd, env=base, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


@pytest.mark.slow
def test_real_server_refuses_an_empty_token(tmp_path):
    proc = _jupyter(tmp_path, free_port(), JUPYTER_TOKEN="")
    try:
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    out = (tmp_path / "log").read_text()
    assert proc.returncode != 0 and "NBKIT_ALLOW_NO_AUTH=1" in out, out


@pytest.mark.slow
def test_real_server_without_jupyter_token_requires_the_printed_token(tmp_path):
    port = free_port()
    proc = _jupyter(tmp_path, port)
    token = None
    try:
        deadline = time.monotonic() + 120
        while token is None and time.monotonic() < deadline:
            log = (tmp_path / "log").read_text()
            assert proc.poll() is None, f"server exited:\n{log}"
            found = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=([0-9a-f]+)", log)
            token = found and found.group(1)
            time.sleep(0.3)
        assert token and len(token) >= 32, f"no URL with a token printed:\n{(tmp_path / 'log').read_text()}"
        url = f"http://127.0.0.1:{port}/api/contents"
        assert http_status(url) == 403
        assert http_status(url, token=token) == 200
    finally:
        stop_group(proc)


# --- a quiet Lab: no news pop-up, no websocket ping warning, trusted notebooks


def test_the_news_question_is_answered_by_a_default_setting_override():
    import json

    path = CONFIG.parent / "jupyter-config" / "labconfig" / "default_setting_overrides.json"
    notification = json.loads(path.read_text())["@jupyterlab/apputils-extension:notification"]
    assert notification == {"fetchNews": "false", "checkForUpdates": False}
    # the setting the announcements plugin reads still exists, with "none" (= ask) as its default
    schema = Path(sys.prefix, "share/jupyter/lab/schemas/@jupyterlab/apputils-extension/notification.json")
    if schema.exists():
        props = json.loads(schema.read_text())["properties"]
        assert props["fetchNews"]["default"] == "none" and "checkForUpdates" in props


def _api(port: int, token: str, path: str, method: str = "GET", body: bytes | None = None):
    import json
    import urllib.request

    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method,
                                 headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


@pytest.mark.slow
def test_real_server_log_is_quiet_and_the_news_setting_is_off(tmp_path):
    """Start the server with the config, open a kernel websocket and two notebooks, read the log."""
    import asyncio
    import shutil

    from tornado.websocket import websocket_connect

    nbs = Path(__file__).resolve().parents[1] / "notebooks"
    shutil.copy(nbs / "00_environment_check.ipynb", tmp_path / "trusted.ipynb")
    shutil.copy(nbs / "00_environment_check.ipynb", tmp_path / "untrusted.ipynb")
    (tmp_path / "untrusted.ipynb").write_text((tmp_path / "untrusted.ipynb").read_text().replace(
        "# 00", "# 00 (a copy)", 1))  # other bytes, other signature
    data = {k: str(tmp_path / v) for k, v in (("HOME", ""), ("JUPYTER_DATA_DIR", "data"))}
    # what scripts/setup.sh and the container entrypoint do for the committed notebooks
    subprocess.run([sys.executable, "-m", "jupyter", "trust", str(tmp_path / "trusted.ipynb")],
                   env={**os.environ, **data}, check=True, capture_output=True, timeout=60)
    token, port = "quiet-log-test-0123456789abcdef", free_port()
    proc = _jupyter(tmp_path, port, JUPYTER_TOKEN=token)
    try:
        _wait_ready(proc, port, token, tmp_path / "log")
        settings = _api(port, token, "/lab/api/settings/@jupyterlab/apputils-extension:notification")
        # the overrides become the schema's defaults, which the browser composes under the user's settings
        props = settings["schema"]["properties"]
        assert props["fetchNews"]["default"] == "false" and props["checkForUpdates"]["default"] is False, settings
        assert settings["settings"] == {}, "a user's own choice is left alone"
        for name in ("trusted.ipynb", "untrusted.ipynb"):
            _api(port, token, f"/api/contents/{name}")
        kernel = _api(port, token, "/api/kernels", "POST", b"{}")["id"]

        async def connect():
            ws = await websocket_connect(f"ws://127.0.0.1:{port}/api/kernels/{kernel}/channels?token={token}")
            await asyncio.sleep(2)
            ws.close()

        asyncio.run(connect())
        _api(port, token, f"/api/kernels/{kernel}", "DELETE")
        wait_until(lambda: all(s in (tmp_path / "log").read_text()               # logged, whatever the load
                               for s in ("Connecting to kernel", "untrusted.ipynb is not trusted")),
                   what="the server's log lines")
    finally:
        stop_group(proc)
    log = (tmp_path / "log").read_text()
    assert "Connecting to kernel" in log, log  # the websocket did open
    assert "websocket_ping" not in log, log
    assert "untrusted.ipynb is not trusted" in log, log  # the check does see an unsigned notebook
    assert "trusted.ipynb is not trusted" not in log.replace("untrusted.ipynb", ""), log


@pytest.mark.slow
def test_real_server_lists_a_notebook_pair_once_and_jupytext_serves_it(tmp_path):
    """The server extension of jupytext derives from our contents manager (tests/test_lab_pairs.py in-process)."""
    import shutil

    nbs = Path(__file__).resolve().parents[1] / "notebooks"
    for ext in (".ipynb", ".py"):
        shutil.copy(nbs / f"01_tokenizing{ext}", tmp_path / f"01_tokenizing{ext}")
    (tmp_path / "script.py").write_text("print(1)\n")
    token, port = "pair-listing-test-0123456789abcdef", free_port()
    proc = _jupyter(tmp_path, port, JUPYTER_TOKEN=token)
    try:
        _wait_ready(proc, port, token, tmp_path / "log")
        listed = {e["name"] for e in _api(port, token, "/api/contents")["content"]}
        assert {"01_tokenizing.ipynb", "script.py"} <= listed and "01_tokenizing.py" not in listed, listed
        assert _api(port, token, "/api/contents/01_tokenizing.py")["type"] == "notebook"
    finally:
        stop_group(proc)
    assert "Deriving an AsyncTextFileContentsManager from PairedNotebooksContentsManager" in (tmp_path / "log").read_text()
