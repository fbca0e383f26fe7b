"""Fixtures for the browser suite: one JupyterLab server and one headless Chromium per test module
(torn down before the nbval notebooks run in the same pytest session).

The server serves a temporary directory holding a copy of ``notebooks/`` (so
running them never edits the repository) and the self-test notebooks built by
``selftest_notebooks.py``. Kernels get ``NBKIT_SCALE=smoke``, their own
``NBKIT_RUNS_DIR`` and ``HF_HUB_OFFLINE=1``. Screenshots go to
``$NBKIT_ARTIFACTS`` (default ``artifacts/browser/``, gitignored).

Missing Chromium or Playwright skips the suite with the fix in the reason,
unless ``NBKIT_REQUIRE_BROWSER=1`` (set by ``.ci/run``), which makes it fail.
Cleanup of the server, its kernels and the browser runs at session end (also
after failures and Ctrl-C), at exit, and on SIGTERM/SIGHUP (the handler stops
recorded PIDs and our own child processes, then exits by the same signal).
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # labserver, labdriver, selftest_notebooks

from labdriver import (  # noqa: E402
    SNAPSHOT_JS,
    RunResult,
    open_notebook,
    run_all,
    run_probe_cell,
    save_and_read,
    screenshot_output_of,
    screenshot_whole_notebook,
    shutdown_kernels,
)
from labserver import REPO, LabServer  # noqa: E402

CHROMIUM = os.environ.get("NBKIT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # needed as root (containers, CI)
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
NOTEBOOK_TIMEOUT_S = float(os.environ.get("NBKIT_BROWSER_TIMEOUT", "600"))
VIEWPORT = {"width": 1280, "height": 900}


def artifacts_dir() -> Path:
    """Where screenshots go: ``$NBKIT_ARTIFACTS`` or ``artifacts/browser/`` in the repository."""
    d = Path(os.environ.get("NBKIT_ARTIFACTS", REPO / "artifacts" / "browser"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def _missing_requirement() -> str | None:
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} not found: run scripts/browser_deps.sh (installs Debian's chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Python package playwright missing: pip install -e '.[test]' or scripts/browser_deps.sh"
    return None


@pytest.hookimpl(trylast=True)  # after -m/-k deselection: a browser test deselected there runs no notebook
def pytest_collection_modifyitems(config, items):
    missing = _missing_requirement()
    if missing is None:
        run_each_notebook_once(config, items)
        return
    if os.environ.get("NBKIT_REQUIRE_BROWSER") == "1":
        raise pytest.UsageError(f"NBKIT_REQUIRE_BROWSER=1 but {missing}")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=missing))


def run_each_notebook_once(config, items) -> list:
    """Deselect nbval's cells of every notebook this suite runs with Run All in the same session.

    The browser run asserts all that nbval does with outputs stripped (every cell ran, no error
    output; ``labdriver.problems``) and more (widgets, images), so a full run (``scripts/test.sh``,
    ``.ci/run``) executes each notebook once instead of twice. Where the browser suite skips
    (no chromium), nbval keeps its run. Returns the deselected items.
    """
    in_browser = {m.group(1) for item in items   # an xdist worker's ids end in @<group> (tests/conftest.py)
                  if (m := re.search(r"::test_notebook_runs_clean_in_the_browser\[(.+\.ipynb)\](@\w+)?$", item.nodeid))}
    nb_dir = (REPO / "notebooks").resolve()
    twice = [item for item in items if Path(str(item.path)).suffix == ".ipynb"
             and Path(str(item.path)).resolve().parent == nb_dir and Path(str(item.path)).name in in_browser]
    if twice:
        drop = set(map(id, twice))
        items[:] = [item for item in items if id(item) not in drop]
        config.hook.pytest_deselected(items=twice)
    return twice


_servers: list[LabServer] = []
_temp_dirs: list[str] = []  # removed by the signal handler; fixtures remove them normally


def _mkdtemp(prefix: str) -> str:
    d = tempfile.mkdtemp(prefix=prefix)
    _temp_dirs.append(d)
    return d


def _on_signal(signum, frame):
    """SIGTERM/SIGHUP: stop servers and kernels by recorded PID, kill our own child tree, then die.

    Playwright calls are not safe inside a signal handler, so the browser (the
    Playwright driver and its Chromium, both our descendants) is killed by PID.
    """
    for server in _servers:
        try:
            server.stop(grace_s=2)
        except Exception:
            pass
    import psutil

    kids = psutil.Process().children(recursive=True)
    for p in kids:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(kids, timeout=3)
    for d in _temp_dirs:
        shutil.rmtree(d, ignore_errors=True)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


@pytest.fixture(scope="module")
def lab_root():
    """Temporary server root: ``notebooks/`` (a copy) and ``selftest/`` (generated)."""
    root = Path(_mkdtemp("nbkit-browser-root-"))
    src = REPO / "notebooks"
    if src.is_dir():
        shutil.copytree(src, root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    else:
        (root / "notebooks").mkdir()
    from selftest_notebooks import write_selftest_notebooks

    write_selftest_notebooks(root / "selftest")
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def lab_server(lab_root):
    """A running `LabServer` (the container's config) on 127.0.0.1 with smoke-scale kernels."""
    runs = Path(_mkdtemp("nbkit-browser-runs-"))
    server = LabServer(
        lab_root,
        env={"NBKIT_SCALE": "smoke", "NBKIT_RUNS_DIR": str(runs), "MPLBACKEND": "module://matplotlib_inline.backend_inline"},
    )
    _servers.append(server)
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGTERM, signal.SIGHUP)}
    atexit.register(server.stop)  # e.g. pytest -x exiting oddly; stop() is idempotent
    try:
        yield server.start()
    finally:
        server.stop()
        for s, h in previous.items():
            signal.signal(s, h)
        shutil.rmtree(runs, ignore_errors=True)
        leftover = server.alive_pids()
        assert not leftover, f"processes left after stopping the server: {leftover}"


@pytest.fixture(scope="module")
def browser(lab_server):
    """Headless Debian Chromium driven by Playwright (never Playwright's own browser download)."""
    from playwright.sync_api import sync_playwright

    profile = _mkdtemp("nbkit-chromium-")
    pw = sync_playwright().start()
    # A persistent context gives Chromium a fresh user-data-dir we own and delete.
    context = pw.chromium.launch_persistent_context(
        profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, viewport=VIEWPORT
    )

    def close():
        for f in (context.close, pw.stop):
            try:
                f()
            except Exception:
                pass
        shutil.rmtree(profile, ignore_errors=True)

    yield context
    close()


@pytest.fixture
def page(browser):
    """A new tab, closed after the test."""
    p = browser.new_page()
    yield p
    p.close()


@pytest.fixture(scope="module")
def run_notebook(lab_server, browser):
    """``run_notebook(path) -> RunResult``; each path runs once per module (failures too).

    Opens the notebook in a fresh tab and workspace, runs all cells from the
    menu while sampling the DOM, saves and re-reads it, screenshots the whole
    notebook to the artifacts dir, and shuts its kernel down. Extra steps:
    - ``run(path, still_s=s)`` appends a cell that sleeps ``s`` seconds after Run All and samples the DOM
      meanwhile as ``probe_samples`` (a stopped widget must stay still); each path runs with one ``still_s``;
    - in-place updates of an output image while a cell runs refresh a viewport
      screenshot ``<name>-midrun.png`` centred on it (README image of 02);
    - a cell whose source mentions "confusion" and shows a PNG gets its output
      area saved as ``<name>-confusion.png`` (README image of 03).
    """
    cache: dict[str, RunResult | BaseException] = {}

    def run(path: str, still_s: float = 0.0) -> RunResult:
        if path in cache:  # a failed run fails every test that needs it, without rerunning
            if isinstance(cache[path], BaseException):
                raise cache[path]
            return cache[path]
        name = Path(path).stem
        out = artifacts_dir()
        result = RunResult(name)
        page = browser.new_page()
        first_hash: dict[int, str] = {}
        last_shot = [-1e9]

        def midrun_shot(sample):
            # Each in-place image update while busy refreshes <name>-midrun.png (at most every 2 s),
            # so the file ends up showing the latest state before training finished.
            if not sample.busy:
                return
            for i, im in enumerate(sample.snap["images"]):
                if first_hash.setdefault(i, im["hash"]) != im["hash"]:
                    first_hash[i] = im["hash"]
                    if sample.t - last_shot[0] >= 2.0:
                        img = page.locator(".jp-Notebook .jp-OutputArea-output img").nth(i)
                        img.evaluate("e => e.scrollIntoView({block: 'center'})")
                        shot = out / f"{name}-midrun.png"
                        page.screenshot(path=str(shot))
                        result.extra_shots[name + "-midrun"] = shot
                        last_shot[0] = sample.t
                    return

        try:
            result.open_s = open_notebook(page, lab_server, path)
            run_all(page, result, timeout_s=NOTEBOOK_TIMEOUT_S, on_sample=midrun_shot)
            result.saved = save_and_read(page, lab_server, path)
            result.final = page.evaluate(SNAPSHOT_JS)
            idx = result.cell_index("confusion")
            if idx is not None:
                result.extra_shots[name + "-confusion"] = screenshot_output_of(page, idx, out / f"{name}-confusion.png")
            result.screenshot = screenshot_whole_notebook(page, out / f"{name}.png")
            if still_s:
                page.set_viewport_size(VIEWPORT)
                run_probe_cell(page, result, still_s)
        except Exception as exc:
            cache[path] = exc
            try:
                screenshot_whole_notebook(page, out / f"{name}-FAILED.png")
            except Exception:
                pass
            raise
        finally:
            lab_server.record_pids()
            try:
                shutdown_kernels(lab_server)
            except Exception:
                pass
            page.close()
        cache[path] = result
        return result

    return run
