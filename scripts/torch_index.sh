#!/usr/bin/env bash
# Which package index scripts/setup.sh installs torch from. Installs nothing.
#   usage: scripts/torch_index.sh [PYTHON]   (PYTHON: whose pip is asked about a local wheel; default python3)
#   stdout: the index URL for `pip install --index-url`, or an empty line for pip's own
#           configured indexes (PyPI unless pip.conf / PIP_* say otherwise)
#   stderr: one line saying what was chosen and why
# The first rule that applies wins:
#   1. TORCH_INDEX_URL set (even empty: empty means pip's configured indexes)   -> that
#   2. TORCH_SPEC set (another version, a wheel file or URL)                    -> pip's configured indexes
#   3. pip already resolves a local torch wheel for the spec through its own configuration
#      (find-links, e.g. PIP_FIND_LINKS=/opt/wheels as on this project's CI)    -> pip's configured
#      indexes, so that local wheel is installed offline and nothing remote is fetched
#   4. not Linux                                                                 -> pip's configured indexes
#   5. no NVIDIA driver (no `nvidia-smi`, no /proc/driver/nvidia/version)        -> the CPU build
#   6. a driver: the newest CUDA build in TORCH_CUDA_BUILDS that the driver supports, from the
#      "CUDA Version" that `nvidia-smi` prints (the driver's maximum), else from the driver
#      version in /proc/driver/nvidia/version and NVIDIA's table of minimum Linux drivers per
#      CUDA release (CUDA Toolkit release notes, table 3: 13.0 >= 580.65.06, 12.9 >= 575.51.03,
#      12.8 >= 570.26, 12.6 >= 560.28.03, 12.4 >= 550.54.14); a driver older than all -> CPU build
# Environment (besides TORCH_INDEX_URL / TORCH_SPEC):
#   TORCH_CUDA_BUILDS      CUDA builds to choose from, any order (default "cu130 cu128 cu126":
#                          what download.pytorch.org offers for recent torch releases)
#   NBKIT_NVIDIA_VERSION_FILE  the driver's version file (default /proc/driver/nvidia/version)
#   NBKIT_NVIDIA_SMI       the nvidia-smi command (default nvidia-smi; the tests point both elsewhere)
set -uo pipefail
PY=${1:-python3}
WHL=${TORCH_WHL_BASE:-https://download.pytorch.org/whl}
say() { echo "setup: $*" >&2; }

if [ -n "${TORCH_INDEX_URL+set}" ]; then
    echo "$TORCH_INDEX_URL"
    FROM=${TORCH_INDEX_URL:-"pip's configured indexes"}
    say "torch from $FROM (TORCH_INDEX_URL)"
    exit 0
fi
if [ -n "${TORCH_SPEC:-}" ]; then
    echo ""
    say "torch as TORCH_SPEC=$TORCH_SPEC says, from pip's configured indexes (set TORCH_INDEX_URL to pick a build)"
    exit 0
fi
SPEC=torch==2.13.0
BUILDS=${TORCH_CUDA_BUILDS:-cu130 cu128 cu126}
# A dry run with --no-index sees only pip's find-links (pip.conf, PIP_FIND_LINKS): local files.
LOCAL=$("$PY" -m pip install --dry-run --no-deps --ignore-installed --no-index -q \
        --report - "$SPEC" 2>/dev/null | "$PY" -c '
import json, sys, urllib.parse
try:
    items = json.load(sys.stdin)["install"]
except Exception:
    sys.exit(0)
print(next((urllib.parse.unquote(i["download_info"]["url"]) for i in items if i["download_info"]["url"].startswith("file:")), ""))
' 2>/dev/null)
if [ -n "$LOCAL" ]; then
    echo ""
    say "pip's configuration already finds a local torch wheel (${LOCAL##*/}): installing it offline, no index"
    exit 0
fi
if [ "$(uname -s)" != Linux ]; then
    echo ""
    say "torch from pip's configured indexes ($(uname -s): PyPI's default build)"
    exit 0
fi

VERSION_FILE=${NBKIT_NVIDIA_VERSION_FILE:-/proc/driver/nvidia/version}
SMI=${NBKIT_NVIDIA_SMI:-nvidia-smi}
if ! command -v "$SMI" >/dev/null 2>&1 && [ ! -r "$VERSION_FILE" ]; then
    echo "$WHL/cpu"
    say "no NVIDIA driver (no nvidia-smi, no $VERSION_FILE): the CPU build of torch ($WHL/cpu); on a GPU machine install the driver first, or set TORCH_INDEX_URL"
    exit 0
fi

# The driver's maximum CUDA version as "major.minor".
CUDA=""
if command -v "$SMI" >/dev/null 2>&1; then
    CUDA=$("$SMI" 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n1)
    HOW="nvidia-smi reports CUDA $CUDA"
fi
if [ -z "$CUDA" ] && [ -r "$VERSION_FILE" ]; then
    DRIVER=$(sed -n 's/.*Kernel Module[^0-9]*\([0-9][0-9]*\.[0-9][0-9.]*\).*/\1/p' "$VERSION_FILE" | head -n1)
    if [ -n "$DRIVER" ]; then
        for row in "580.65.06 13.0" "575.51.03 12.9" "570.26 12.8" "560.28.03 12.6" "550.54.14 12.4"; do
            need=${row% *}
            if [ "$(printf '%s\n%s\n' "$need" "$DRIVER" | sort -V | head -n1)" = "$need" ]; then
                CUDA=${row#* }
                break
            fi
        done
        HOW="driver $DRIVER supports CUDA ${CUDA:-older than 12.4}"
    fi
fi
if [ -z "$CUDA" ]; then
    echo ""
    say "an NVIDIA driver is present but its CUDA version is unknown (nvidia-smi failed?): torch from pip's configured indexes (PyPI's default CUDA build); set TORCH_INDEX_URL=$WHL/cuNNN to choose"
    exit 0
fi

# Newest build whose CUDA (cu128 -> 12.8, cu130 -> 13.0) is at most the driver's.
want=$(echo "$CUDA" | awk -F. '{printf "%d", $1 * 10 + $2}')
best=""
for b in $BUILDS; do
    n=${b#cu}
    if [ "$n" -le "$want" ] && { [ -z "$best" ] || [ "$n" -gt "${best#cu}" ]; }; then best=$b; fi
done
if [ -z "$best" ]; then
    echo "$WHL/cpu"
    say "$HOW, older than every CUDA build offered ($BUILDS): the CPU build of torch ($WHL/cpu). Fix: update the NVIDIA driver, or set TORCH_INDEX_URL"
    exit 0
fi
echo "$WHL/$best"
say "$HOW: the $best build of torch ($WHL/$best); set TORCH_INDEX_URL to choose another"
