"""Loopback helpers shared by the server tests (entrypoint, container, browser)."""
from __future__ import annotations

import socket
import urllib.error
import urllib.request


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(url: str, token: str | None = None) -> int:
    """HTTP status of ``GET url``, sending ``Authorization: token <token>`` when given."""
    req = urllib.request.Request(url)
    if token is not None:
        req.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


def stop_group(proc, timeout: float = 20.0) -> None:
    """SIGTERM the process group ``proc`` leads (started with ``start_new_session=True``),
    SIGKILL it after ``timeout`` seconds, and reap ``proc``."""
    import os
    import signal
    import subprocess

    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
