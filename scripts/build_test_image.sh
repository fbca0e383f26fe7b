#!/usr/bin/env bash
# Build the nbkit image for the container test without any container registry and
# with no network during `docker build`:
#   1. base image: debootstrap a minimal Debian root filesystem (python3, python3-venv,
#      tini, openssh-server, fonts-noto-cjk) and `docker import` it;
#   2. wheelhouse: `pip wheel` nbkit's dependencies (incl. the CPU torch wheel) on the
#      host, which has the same Python 3.11 / glibc as the base;
#   3. `docker build --network none --build-arg BASE_IMAGE=<base>` with the wheelhouse
#      in the build context (docker/wheelhouse/ of a staged copy of the repo).
# Base image and wheelhouse are cached, keyed on their inputs, so a second run only
# rebuilds the layers whose files changed. Prints the image tag on its last line and
# the time of each stage on stderr. Needs root (debootstrap) and a running Docker
# engine (scripts/docker_engine.sh).
# Several runs at once (two clones on one machine) are safe: the caches are shared but
# each entry is built under an exclusive flock and read under a shared one, the docker
# build (and the prune after it) takes a lock too, and a waiting run says who it waits
# for (scripts/lib/locks.sh); each run keeps its build context and logs in its own
# folder ($CACHE/run.XXXXXX, deleted on exit) and its own image tag. Whatever debootstrap
# mounted in its root is unmounted on every exit path, and a stale root is unmounted
# before it is deleted (scripts/lib/rootfs.sh).
#   NBKIT_TEST_IMAGE   tag of the result (default nbkit:test-cpu-<hash of this clone's path>)
#   NBKIT_DOCKER_CACHE cache folder (default /tmp/nbkit-docker/cache)
#   TORCH_SPEC         torch requirement for the wheelhouse (default torch==2.13.0)
#   NBKIT_PYTHON       Python that runs `pip wheel`; must be the base's exact version
#                      (default /usr/bin/python3: Debian bookworm's 3.11.2, as in the base;
#                      a newer 3.11.x would pick wheels that need Python >= 3.11.5)
#   DEBIAN_MIRROR      debootstrap mirror (default http://deb.debian.org/debian)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
# shellcheck source=lib/locks.sh
. scripts/lib/locks.sh
# shellcheck source=lib/rootfs.sh
. scripts/lib/rootfs.sh

IMAGE=${NBKIT_TEST_IMAGE:-nbkit:test-cpu-$(printf %s "$REPO" | sha256sum | cut -c1-8)}
CACHE=${NBKIT_DOCKER_CACHE:-/tmp/nbkit-docker/cache}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
PY=${NBKIT_PYTHON:-/usr/bin/python3}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
INCLUDE=python3,python3-venv,ca-certificates,tini,openssh-server,procps,fonts-noto-cjk
mkdir -p "$CACHE"
WORK=$(mktemp -d "$CACHE/run.XXXXXX")   # this run's context and logs
ROOTFS=
on_exit() {
    if [ -n "$ROOTFS" ]; then rootfs_unmount "$ROOTFS" >/dev/null 2>&1 || true; fi
    rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

die() { echo "build_test_image.sh: $*" >&2; exit 1; }
stage_start() { T0=$(date +%s.%N); }
# T0 is per shell: the two stages below run in separate (sub)shells.
stage_end() { printf 'stage %-10s %6.1f s  %s\n' "$1" "$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" "$2" >&2; }
key() { sha256sum | cut -c1-12; }

docker info >/dev/null 2>&1 || die "no Docker engine answers: run scripts/docker_engine.sh first"
"$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip: apt-get install python3-pip (scripts/docker_engine.sh does)"

# --- 1. base image --------------------------------------------------------------
BASE_KEY=$(printf '%s\n' "$SUITE" "$INCLUDE" "$MIRROR" "base-v1" | key)
BASE=nbkit-testbase:$SUITE-py311-$BASE_KEY
build_base() {
    stage_start
    if docker image inspect "$BASE" >/dev/null 2>&1; then
        stage_end base "cached $BASE"
        return
    fi
    lock_take "$CACHE/base-$BASE_KEY.lock" "the base image $BASE"
    if docker image inspect "$BASE" >/dev/null 2>&1; then   # built by the run we waited for
        lock_drop "$CACHE/base-$BASE_KEY.lock"
        stage_end base "cached $BASE"
        return
    fi
    [ "$(id -u)" = 0 ] || die "debootstrap needs root"
    command -v "${DEBOOTSTRAP:-debootstrap}" >/dev/null || die "debootstrap missing: run scripts/docker_engine.sh"
    local rootfs=$CACHE/rootfs-$BASE_KEY
    ROOTFS=$rootfs   # unmounted by the EXIT trap if this script dies meanwhile
    rootfs_debootstrap "$rootfs" --variant=minbase --include="$INCLUDE" "$SUITE" "$rootfs" "$MIRROR" \
        >"$WORK/debootstrap.log" 2>&1 || { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }
    # No host keys baked into the image: the entrypoint makes them per container.
    rm -f "$rootfs"/etc/ssh/ssh_host_*
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import -c 'ENV LANG=C.UTF-8' - "$BASE" >/dev/null
    rootfs_clean "$rootfs"
    ROOTFS=
    lock_drop "$CACHE/base-$BASE_KEY.lock"
    stage_end base "built $BASE"
}

# --- 2. wheelhouse --------------------------------------------------------------
PYV=$("$PY" -c 'import sys; print(sys.version.split()[0])')
DEPS=$("$PY" -c 'import tomllib,sys; print("\n".join(tomllib.load(open("pyproject.toml","rb"))["project"]["dependencies"]))')
WH_KEY=$(printf '%s\n' "$DEPS" "$TORCH_SPEC" "setuptools>=68" "wheel" "$PYV" "wh-v2" | key)
WH=$CACHE/wheelhouse-$WH_KEY
build_wheelhouse() {
    stage_start
    if [ -f "$WH/.complete" ]; then
        stage_end wheelhouse "cached $WH ($(ls "$WH" | wc -l) wheels)"
        return
    fi
    lock_take "$WH.lock" "the wheelhouse $WH"
    if [ -f "$WH/.complete" ]; then   # built by the run we waited for
        stage_end wheelhouse "cached $WH ($(ls "$WH" | wc -l) wheels)"
        return
    fi
    rm -rf "$WH" && mkdir -p "$WH"
    printf '%s\n' "$TORCH_SPEC" "setuptools>=68" "wheel" "$DEPS" >"$WH/requirements.txt"
    "$PY" -m pip wheel -q --wheel-dir "$WH" --find-links "$WH" -r "$WH/requirements.txt" >"$WORK/wheelhouse.log" 2>&1 \
        || { tail -20 "$WORK/wheelhouse.log" >&2; die "pip wheel failed"; }
    if ls "$WH" | grep '^nvidia_' | grep -qv '^nvidia_ml_py'; then
        die "the wheelhouse pulled CUDA wheels: set TORCH_SPEC to a CPU build (e.g. torch==2.13.0+cpu)"
    fi
    touch "$WH/.complete"
    # Keep one wheelhouse (~450 MB): drop those of older inputs that no run is using.
    local old
    for old in "$CACHE"/wheelhouse-*; do
        [ -d "$old" ] && [ "$old" != "$WH" ] || continue
        if lock_try_exclusive "$old.lock"; then
            rm -rf "$old"
            lock_drop "$old.lock"
        fi
    done
    stage_end wheelhouse "built $WH ($(ls "$WH" | wc -l) wheels, $(du -sh "$WH" | cut -f1))"
}

# Both download (Debian / PyPI) and mostly wait on I/O: run them side by side.
build_wheelhouse &
WH_PID=$!
build_base
wait "$WH_PID" || die "wheelhouse stage failed"
BASE_PYV=$(docker run --rm --network none "$BASE" python3 -c 'import sys; print(sys.version.split()[0])')
[ "$PYV" = "$BASE_PYV" ] || die "$PY is Python $PYV but the base has $BASE_PYV: set NBKIT_PYTHON to a Python $BASE_PYV with pip"

# --- 3. docker build ------------------------------------------------------------
stage_start
CTX=$WORK/context
mkdir -p "$CTX/notebooks"
# Only what the Dockerfile copies; .dockerignore filters caches inside these.
for p in pyproject.toml README.md .dockerignore nbkit notebooks docker; do
    [ -e "$p" ] && cp -a "$p" "$CTX/"
done
mkdir -p "$CTX/docker/wheelhouse"
# Hard links when the cache shares the file system (no copy), else a copy; under a shared
# lock, so no run deletes this wheelhouse meanwhile.
lock_take "$WH.lock" "reading the wheelhouse $WH" shared
cp -al "$WH"/*.whl "$CTX/docker/wheelhouse/" 2>/dev/null || cp -a "$WH"/*.whl "$CTX/docker/wheelhouse/"
lock_drop "$WH.lock"
# One build at a time per engine: `docker image prune` below must not delete the layers
# of another run's build in progress.
lock_take "$CACHE/docker-build.lock" "the Docker engine (another run is building)"
DOCKER_BUILDKIT=0 docker build --force-rm --network none \
    --build-arg BASE_IMAGE="$BASE" --build-arg PIP_COMPILE=0 \
    -f "$CTX/docker/Dockerfile" -t "$IMAGE" "$CTX" >"$WORK/build.log" 2>&1 \
    || { cp "$WORK/build.log" "$CACHE/build-failed-$$.log"; tail -40 "$WORK/build.log" >&2; die "docker build failed (log: $CACHE/build-failed-$$.log)"; }
# Earlier builds of $IMAGE are now untagged (~2.5 GB each): drop them, keep the cache
# of the current one.
docker image prune -f >/dev/null
lock_drop "$CACHE/docker-build.lock"
stage_end build "$IMAGE"
echo "$IMAGE"
