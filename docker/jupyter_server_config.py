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
c.ServerApp.trust_xheaders = True
# No news or update checks: the container usually has no internet access.
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
# Widgets and plots from background threads flush promptly.
c.ZMQChannelsWebsocketConnection.iopub_msg_rate_limit = 10000
