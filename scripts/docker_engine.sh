#!/usr/bin/env bash
# Make a local Docker engine available for the container test (tests/docker/).
# Idempotent; needs root and apt:
#   1. installs Debian's docker.io, debootstrap and python3-pip if missing (one apt-get update),
#   2. starts dockerd with its data and exec roots under /tmp if no engine answers,
#   3. waits until `docker info` works (up to NBKIT_DOCKER_WAIT_S, default 60 s).
# Prints `started <pid>` when it started dockerd (the caller stops it), else `running`.
# Two runs at once share one engine: the check-and-start holds an flock on
# $NBKIT_DOCKER_STATE/engine.lock (the second run waits, then finds it running), and
# each user of the engine holds a shared flock on $NBKIT_DOCKER_STATE/engine.users.lock
# for as long as it uses it; whoever stops dockerd first takes that lock exclusively
# without waiting and leaves the engine running when another run still holds it
# (tests/docker/test_container.py does both).
#   NBKIT_DOCKER_ROOT  data root (default /tmp/nbkit-docker/data; images persist there
#                      between runs, which keeps a second CI run fast)
#   NBKIT_DOCKER_STATE lock folder (default /tmp/nbkit-docker)
set -euo pipefail
# shellcheck source=lib/locks.sh
. "$(dirname "$0")/lib/locks.sh"

ROOT=${NBKIT_DOCKER_ROOT:-/tmp/nbkit-docker/data}
EXEC_ROOT=${NBKIT_DOCKER_EXEC_ROOT:-/tmp/nbkit-docker/exec}
WAIT_S=${NBKIT_DOCKER_WAIT_S:-60}
LOG=${NBKIT_DOCKER_LOG:-/tmp/nbkit-docker/dockerd.log}

die() { echo "docker_engine.sh: $*" >&2; exit 1; }

if docker info >/dev/null 2>&1; then
    echo running
    exit 0
fi
lock_take "${NBKIT_DOCKER_STATE:-/tmp/nbkit-docker}/engine.lock" "the Docker engine start" || die "no engine lock"
if docker info >/dev/null 2>&1; then   # started by the run we waited for
    echo running
    exit 0
fi
[ "$(id -u)" = 0 ] || die "needs root to install and start dockerd (run: sudo bash $0), or start a Docker engine yourself"
command -v apt-get >/dev/null || die "apt-get not found: install a Docker engine (dockerd) and debootstrap by hand"

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
# Debian's python3 (the base image's exact version) builds the wheelhouse.
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]} from Debian" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
command -v dockerd >/dev/null || die "dockerd still missing after installing docker.io"

mkdir -p "$ROOT" "$EXEC_ROOT" "$(dirname "$LOG")"
# containerd ships with docker.io; dockerd starts its own when none runs.
# --iptables/--ip-masq stay on so that -p 127.0.0.1:PORT:8888 works from the host.
lock_fd=${NBKIT_LOCK_FDS[${NBKIT_DOCKER_STATE:-/tmp/nbkit-docker}/engine.lock]}
# {lock_fd}>&-: dockerd must not inherit the start lock (it would hold it for its lifetime)
nohup dockerd --data-root "$ROOT" --exec-root "$EXEC_ROOT" \
    --pidfile "$EXEC_ROOT/dockerd.pid" >"$LOG" 2>&1 {lock_fd}>&- &
pid=$!
for _ in $(seq "$WAIT_S"); do
    if docker info >/dev/null 2>&1; then
        echo "started $pid"
        exit 0
    fi
    kill -0 "$pid" 2>/dev/null || { tail -20 "$LOG" >&2; die "dockerd exited at start (log: $LOG)"; }
    sleep 1
done
tail -20 "$LOG" >&2
kill "$pid" 2>/dev/null || true
die "dockerd did not answer within ${WAIT_S} s (log: $LOG)"
