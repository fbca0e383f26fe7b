# JupyterLab server configuration shared by the container (docker/entrypoint.sh),
# a local `jupyter lab --config docker/jupyter_server_config.py` and the browser
# tests (tests/browser/), so all of them run the same server.
#
# Authentication stays on whoever starts it (tests/test_server_config.py):
#   JUPYTER_TOKEN unset      -> Jupyter's own random token, printed in the
#                               `http://127.0.0.1:8888/lab?token=...` line of the log
#   JUPYTER_TOKEN=<value>    -> that token (the entrypoint and the tests set one)
#   JUPYTER_TOKEN=""         -> refused (SystemExit) unless NBKIT_ALLOW_NO_AUTH=1
# The token never comes from this file.
#   NBKIT_JUPYTER_IP         address to listen on; default 127.0.0.1 (this machine
#                            only). The image sets 0.0.0.0: inside a container the
#                            published port is reached through the container's network.
#   NBKIT_JUPYTER_PORT       port (default 8888); NBKIT_NOTEBOOK_DIR: root folder (default cwd)
#   NBKIT_BEHIND_PROXY       1: a reverse proxy forwards to this server, so trust its
#                            X-Forwarded-*/X-Real-Ip headers (trust_xheaders); default 0
import logging
import os

c = get_config()  # noqa: F821  (provided by Jupyter when it loads this file)

# Kernels inherit the server's environment: the Hugging Face tokenizers' Rust thread pool
# must not meet DataLoader worker forks (it warns and may deadlock); `nbkit doctor` checks it.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

c.ServerApp.ip = os.environ.get("NBKIT_JUPYTER_IP", "127.0.0.1")
c.ServerApp.port = int(os.environ.get("NBKIT_JUPYTER_PORT", "8888"))
c.ServerApp.open_browser = False
c.ServerApp.root_dir = os.environ.get("NBKIT_NOTEBOOK_DIR", os.getcwd())

_token = os.environ.get("JUPYTER_TOKEN")
if _token:
    c.IdentityProvider.token = _token
elif _token is not None:  # set but empty: Jupyter would run without authentication
    if os.environ.get("NBKIT_ALLOW_NO_AUTH", "0") != "1":
        raise SystemExit(
            "nbkit: JUPYTER_TOKEN is set but empty, which would start JupyterLab without "
            "authentication. Fix: `unset JUPYTER_TOKEN` (Jupyter then generates a token and "
            "prints the URL with it) or set a long random value; to really run without "
            "authentication set NBKIT_ALLOW_NO_AUTH=1."
        )
    c.IdentityProvider.token = ""
# else: unset -> leave the token alone; Jupyter generates a random one (or reads
# JUPYTER_TOKEN_FILE) and prints the URL with it.

# allow_remote_access is left to Jupyter: True when listening on 0.0.0.0 (the
# container), False on 127.0.0.1, where the Host-header check guards against DNS
# rebinding.
# X-Forwarded-For / X-Real-Ip / X-Scheme name the client only when a reverse proxy sets them; without
# one, any client could claim another address in the log. Trusted only when NBKIT_BEHIND_PROXY=1
# says a proxy (nginx, Traefik, a cloud load balancer) sits in front of the server.
_proxy = os.environ.get("NBKIT_BEHIND_PROXY", "0")
if _proxy not in ("0", "1", ""):
    raise SystemExit(f"nbkit: NBKIT_BEHIND_PROXY={_proxy!r}: set it to 1 when a reverse proxy forwards to "
                     "this server (its X-Forwarded-* headers are then trusted), else 0 or unset.")
c.ServerApp.trust_xheaders = _proxy == "1"

# Notebook pairs (notebooks/NN_name.ipynb + its Jupytext .py): jupytext's server extension
# (jupyterlab_jupytext, enabled by installing jupytext, a runtime dependency) derives its
# contents manager from the class below, so saving the .ipynb in Lab writes the .py too and
# opening either one reads the pair as ONE notebook. The file browser lists each pair once: the
# .py is left out of folder listings when an .ipynb of the same name sits beside it and the .py's
# Jupytext header pairs it with ipynb (a lone script, or one that only shares a name, stays
# visible). The .py is still reachable by path, e.g. from a terminal or `File > Open from Path`.
def _is_paired_text(os_dir: str, name: str, names: set[str]) -> bool:
    stem, ext = os.path.splitext(name)
    if ext != ".py" or f"{stem}.ipynb" not in names:
        return False
    try:
        with open(os.path.join(os_dir, name), encoding="utf-8", errors="replace") as f:
            head = f.read(2048)  # the Jupytext header (`# ---` ... `formats: ipynb,py:percent`)
    except OSError:
        return False
    return "jupytext:" in head and any("formats:" in ln and "ipynb" in ln for ln in head.splitlines())


def _paired_contents_manager():
    from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

    class PairedNotebooksContentsManager(AsyncLargeFileManager):
        """jupyter_server's default contents manager, listing a Jupytext pair as its .ipynb only."""

        async def _dir_model(self, path, content=True, **kwargs):
            model = await super()._dir_model(path, content=content, **kwargs)
            if content and model.get("content"):
                names = {e["name"] for e in model["content"]}
                os_dir = self._get_os_path(path)
                model["content"] = [e for e in model["content"] if not _is_paired_text(os_dir, e["name"], names)]
            return model

    return PairedNotebooksContentsManager


c.ServerApp.contents_manager_class = _paired_contents_manager()

# No news or update checks: the container usually has no internet access.
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
# ...and no "Would you like to get notified about official Jupyter news?" pop-up: JupyterLab
# (4.x, @jupyterlab/apputils-extension:announcements) asks while the setting
# @jupyterlab/apputils-extension:notification fetchNews is "none" (its default), whatever
# news_url says. jupyterlab_server reads default setting overrides from
# <each Jupyter config dir>/labconfig/default_setting_overrides.json on every settings
# request; ours (fetchNews "false", checkForUpdates false) lives beside this file. A user's
# own choice in Settings still wins.
_file = globals().get("__file__")  # set by traitlets when it loads this file
_extra = os.path.join(os.path.dirname(os.path.abspath(_file)), "jupyter-config") if _file else ""
if _extra and os.path.isdir(_extra) and _extra not in os.environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep):
    os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join(p for p in (os.environ.get("JUPYTER_CONFIG_PATH"), _extra) if p)

# Websocket keep-alive: a ping every 30 s on every websocket, so proxies with a 60 s idle
# timeout keep idle connections. jupyter_server's own timer (kernels, terminals, LSP:
# WebSocketMixin) reads tornado_settings ws_ping_interval/ws_ping_timeout in MILLISECONDS:
# ping every 30 s, close after 90 s (3 pings) without a pong. Other websockets use Tornado's
# native ping, set in SECONDS by ServerApp.websocket_ping_interval/timeout (Tornado requires
# timeout <= interval).
c.ServerApp.tornado_settings = {"ws_ping_interval": 30_000, "ws_ping_timeout": 90_000}
c.ServerApp.websocket_ping_interval = 30
c.ServerApp.websocket_ping_timeout = 30
# WebSocketMixin also hands those millisecond numbers to Tornado, which reads them as seconds
# and logs, at each server's first kernel connection, "The websocket_ping_timeout (90000)
# cannot be longer than the websocket_ping_interval (30000). Setting websocket_ping_timeout=30000":
# a unit mix-up inside jupyter_server (jupyter-server/jupyter_server#1612), not our settings;
# the affected Tornado ping would fire every 30000 s, i.e. never matters. Drop that one line.
PING_UNIT_WARNING = "cannot be longer than the websocket_ping_interval"


class _DropPingUnitWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return PING_UNIT_WARNING not in record.getMessage()


if not any(type(f).__name__ == "_DropPingUnitWarning" for f in logging.getLogger("tornado.general").filters):
    logging.getLogger("tornado.general").addFilter(_DropPingUnitWarning())
# Widgets and plots from background threads flush promptly.
c.ZMQChannelsWebsocketConnection.iopub_msg_rate_limit = 10000
