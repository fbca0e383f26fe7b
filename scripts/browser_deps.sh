#!/usr/bin/env bash
# Install what the browser tests (tests/browser/) need, idempotently:
#   - Debian's Chromium at /usr/bin/chromium (apt, only when missing; needs root)
#   - Debian's fonts-noto-cjk, so that plots and screenshots show Chinese text and
#     tests/test_fonts.py runs instead of skipping (apt, only when missing; needs root)
#   - the Playwright Python driver into the venv (only when missing)
# Playwright's own browser download (`playwright install`) does not work here and
# is never run: the tests point Playwright at /usr/bin/chromium instead.
#   PYTHON   interpreter of the venv (default: .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}

PKGS=()
[ -x /usr/bin/chromium ] || PKGS+=(chromium)
dpkg -s fonts-noto-cjk >/dev/null 2>&1 || PKGS+=(fonts-noto-cjk)
if [ ${#PKGS[@]} -gt 0 ] && [ "$(id -u)" != 0 ]; then
    if [ ! -x /usr/bin/chromium ]; then
        echo "browser_deps: /usr/bin/chromium missing; run as root or: sudo apt-get install -y chromium" >&2
        exit 1
    fi
    echo "browser_deps: no CJK font: plots show English labels (sudo apt-get install -y fonts-noto-cjk)" >&2
elif [ ${#PKGS[@]} -gt 0 ]; then
    # Wait for a concurrent apt/dpkg run instead of failing on its lock.
    APT="apt-get -q -o DPkg::Lock::Timeout=600"
    export DEBIAN_FRONTEND=noninteractive
    $APT update >/dev/null
    $APT install -y --no-install-recommends "${PKGS[@]}" >/dev/null
fi

if ! "$PY" -c "import playwright.sync_api" 2>/dev/null; then
    "$PY" -m pip install -q "playwright>=1.45"
fi
/usr/bin/chromium --version 2>/dev/null  # the Debian wrapper may print a harmless "[: unexpected operator"
