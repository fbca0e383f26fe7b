# JupyterLab server configuration shared by the container (docker/entrypoint.sh)
# and the browser tests (tests/browser/), so both exercise the same server.
# Token authentication stays on: the token comes from $JUPYTER_TOKEN (set by the
# entrypoint or the test harness), never from this file.
import os

c = get_config()  # noqa: F821  (provided by Jupyter when it loads this file)

c.ServerApp.ip = os.environ.get("NBKIT_JUPYTER_IP", "0.0.0.0")
c.ServerApp.port = int(os.environ.get("NBKIT_JUPYTER_PORT", "8888"))
c.ServerApp.open_browser = False
c.ServerApp.root_dir = os.environ.get("NBKIT_NOTEBOOK_DIR", os.getcwd())
c.IdentityProvider.token = os.environ.get("JUPYTER_TOKEN", "")
# An empty token would disable auth; the entrypoint refuses that unless
# NBKIT_ALLOW_NO_AUTH=1, and then we also refuse remote access without a password.
c.ServerApp.allow_remote_access = True
c.ServerApp.trust_xheaders = True
# No news or update checks: the container usually has no internet access.
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
# Widgets and plots from background threads flush promptly.
c.ZMQChannelsWebsocketConnection.iopub_msg_rate_limit = 10000
