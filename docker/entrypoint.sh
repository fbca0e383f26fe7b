#!/usr/bin/env bash
# nbkit container entrypoint: checks, then JupyterLab on 0.0.0.0:8888 with token auth.
#
# Without arguments, or with arguments that start with "-" (passed on to jupyter lab),
# it starts JupyterLab; any other command (`docker run IMAGE bash`) runs as given
# after the same checks. Environment:
#   JUPYTER_TOKEN          token; unset -> a random 48-hex-digit one is generated.
#                          Set but empty means "no authentication": refused unless
#                          NBKIT_ALLOW_NO_AUTH=1.
#   NBKIT_JUPYTER_IP       address JupyterLab listens on (default 0.0.0.0 here, so the
#                          published port reaches it; the config file alone defaults
#                          to 127.0.0.1)
#   NBKIT_HOST_PORT        host port published for 8888 (for the printed URL; default 8888)
#   NBKIT_HOST_ADDR        host address in the printed URL (default 127.0.0.1)
#   NBKIT_NOTEBOOK_DIR, NBKIT_DATA_DIR, NBKIT_RUNS_DIR
#                          folders that must be writable (checked before the server starts)
#   NBKIT_SEED_NOTEBOOKS   folder whose *.ipynb are copied into $NBKIT_NOTEBOOK_DIR/notebooks
#                          when missing there (never overwriting the user's copies); copies
#                          identical to the image's are signed with `jupyter trust`
#   NBKIT_SSH=1            also start a key-only sshd on port NBKIT_SSH_PORT (2222) for
#                          remote IDEs; needs NBKIT_SSH_AUTHORIZED_KEYS
#                          (default ~/.ssh/authorized_keys, mounted read-only)
#   NBKIT_ALLOW_ROOT=1     allow running as root (not recommended)
#   NBKIT_DRY_RUN=1        do every check, print the command, do not start it
#   NBKIT_JUPYTER_CONFIG   server config (default: jupyter_server_config.py beside this file)
set -euo pipefail

HERE=$(dirname "$(readlink -f "$0")")
CONFIG=${NBKIT_JUPYTER_CONFIG:-$HERE/jupyter_server_config.py}
PORT=${NBKIT_JUPYTER_PORT:-8888}
HOST_PORT=${NBKIT_HOST_PORT:-$PORT}
HOST_ADDR=${NBKIT_HOST_ADDR:-127.0.0.1}
export NBKIT_JUPYTER_IP=${NBKIT_JUPYTER_IP:-0.0.0.0}
UID_NOW=$(id -u)
GID_NOW=$(id -g)

log() { echo "[nbkit] $*" >&2; }
die() { echo "[nbkit] ERROR: $*" >&2; exit 1; }

# --- who we are --------------------------------------------------------------------
if [ "$UID_NOW" = 0 ] && [ "${NBKIT_ALLOW_ROOT:-0}" != 1 ]; then
    die "running as root. Fix: drop '--user root' (the image runs as UID 1000), or set NBKIT_ALLOW_ROOT=1 if you really mean it."
fi

# --- folders must be writable, else say why now instead of failing later -------------
check_dir() {  # $1 = variable name, $2 = path
    local name=$1 dir=$2
    mkdir -p "$dir" 2>/dev/null || true
    local probe="$dir/.nbkit-write-test.$$"
    if [ -d "$dir" ] && (: >"$probe") 2>/dev/null; then
        rm -f "$probe"
        return 0
    fi
    local owner="?"
    [ -e "$dir" ] && owner=$(stat -c '%u:%g' "$dir")
    [ -e "$dir" ] || owner=$(stat -c '%u:%g' "$(dirname "$dir")" 2>/dev/null || echo "?")
    cat >&2 <<MSG
[nbkit] ERROR: $name=$dir is not writable by this container user (UID:GID $UID_NOW:$GID_NOW);
[nbkit]        it belongs to UID:GID $owner. This is a UID mismatch between the host folder
[nbkit]        (or volume) and the container user. Fix one of:
[nbkit]          - on the host: sudo chown -R $UID_NOW:$GID_NOW <host folder mounted at $dir>
[nbkit]          - run as the owner: docker run --user ${owner%%:*}:100 ...  (compose: user: "${owner%%:*}:100")
[nbkit]          - rebuild with the owner's UID: docker compose build --build-arg NB_UID=${owner%%:*}
MSG
    exit 1
}
NOTEBOOK_DIR=${NBKIT_NOTEBOOK_DIR:-$PWD}
check_dir NBKIT_NOTEBOOK_DIR "$NOTEBOOK_DIR"
[ -n "${NBKIT_DATA_DIR:-}" ] && check_dir NBKIT_DATA_DIR "$NBKIT_DATA_DIR"
[ -n "${NBKIT_RUNS_DIR:-}" ] && check_dir NBKIT_RUNS_DIR "$NBKIT_RUNS_DIR"
export NBKIT_NOTEBOOK_DIR=$NOTEBOOK_DIR

# --- caches: writable even when HOME is not (docker run --user <any uid>) -----------
CACHE_ROOT=${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}
if ! { mkdir -p "$CACHE_ROOT" && [ -w "$CACHE_ROOT" ]; } 2>/dev/null; then
    CACHE_ROOT=${TMPDIR:-/tmp}/nbkit-cache-$UID_NOW
    mkdir -p "$CACHE_ROOT"
    log "HOME's cache folder is not writable: caches (HF_HOME, HF_MODULES_CACHE, jieba, matplotlib) go to $CACHE_ROOT"
fi
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$CACHE_ROOT}
export HF_HOME=${HF_HOME:-$CACHE_ROOT/huggingface}
export HF_MODULES_CACHE=${HF_MODULES_CACHE:-$HF_HOME/modules}
export MPLCONFIGDIR=${MPLCONFIGDIR:-$CACHE_ROOT/matplotlib}
export NBKIT_JIEBA_CACHE=${NBKIT_JIEBA_CACHE:-$CACHE_ROOT/jieba}

# --- notebooks: copy new ones from the image, keep the user's edits -----------------
if [ -n "${NBKIT_SEED_NOTEBOOKS:-}" ] && [ -d "$NBKIT_SEED_NOTEBOOKS" ]; then
    mkdir -p "$NOTEBOOK_DIR/notebooks"
    check_dir "notebooks folder" "$NOTEBOOK_DIR/notebooks"
    trusted=()
    for nb in "$NBKIT_SEED_NOTEBOOKS"/*.ipynb; do
        [ -e "$nb" ] || continue
        copy="$NOTEBOOK_DIR/notebooks/$(basename "$nb")"
        [ -e "$copy" ] || cp "$nb" "$NOTEBOOK_DIR/notebooks/"
        # the image's own notebooks, unchanged, are trusted (no "not trusted" warning in Lab);
        # a notebook the user changed keeps whatever trust JupyterLab gave it
        cmp -s "$nb" "$copy" && trusted+=("$copy")
    done
    if [ -d "$NBKIT_SEED_NOTEBOOKS/data" ]; then   # notebook 05's sample files, same rule
        mkdir -p "$NOTEBOOK_DIR/notebooks/data"
        for f in "$NBKIT_SEED_NOTEBOOKS"/data/*; do
            if [ -f "$f" ] && [ ! -e "$NOTEBOOK_DIR/notebooks/data/$(basename "$f")" ]; then
                cp "$f" "$NOTEBOOK_DIR/notebooks/data/"
            fi
        done
    fi
    if [ ${#trusted[@]} -gt 0 ] && command -v jupyter >/dev/null 2>&1; then
        jupyter trust "${trusted[@]}" >/dev/null 2>&1 || log "could not sign the notebooks (jupyter trust failed); JupyterLab may call them not trusted"
    fi
fi

# --- authentication: always on unless explicitly disabled ---------------------------
for arg in "$@"; do
    case $arg in
        --*.token=|--*.token=\"\"|--*.token=\'\'|--*.password=|--*.disable_check_xsrf=True)
            [ "${NBKIT_ALLOW_NO_AUTH:-0}" = 1 ] \
                || die "'$arg' would weaken authentication. Fix: drop it and use the printed token (or set JUPYTER_TOKEN); to really run without authentication set NBKIT_ALLOW_NO_AUTH=1." ;;
    esac
done
if [ -z "${JUPYTER_TOKEN+set}" ]; then
    JUPYTER_TOKEN=$(python -c 'import secrets; print(secrets.token_hex(24))')
    log "generated a token (set JUPYTER_TOKEN to choose your own)"
elif [ -z "$JUPYTER_TOKEN" ]; then
    if [ "${NBKIT_ALLOW_NO_AUTH:-0}" != 1 ]; then
        die "JUPYTER_TOKEN is set but empty, which would disable authentication. Fix: unset it (a token is generated) or set a long random value; to really run without authentication set NBKIT_ALLOW_NO_AUTH=1."
    fi
    log "WARNING: authentication is DISABLED (NBKIT_ALLOW_NO_AUTH=1): anyone who reaches port $HOST_PORT runs code as UID $UID_NOW. Publish the port on 127.0.0.1 only."
elif [ ${#JUPYTER_TOKEN} -lt 16 ]; then
    log "WARNING: JUPYTER_TOKEN is only ${#JUPYTER_TOKEN} characters; use 32+ random characters (python -c 'import secrets; print(secrets.token_hex(24))')."
fi
export JUPYTER_TOKEN

# --- optional SSH for remote IDEs (key-only) -----------------------------------------
SSH_KEYS=${NBKIT_SSH_AUTHORIZED_KEYS:-$HOME/.ssh/authorized_keys}
SSHD=${NBKIT_SSHD:-/usr/sbin/sshd}
if [ "${NBKIT_SSH:-0}" = 1 ]; then
    [ -s "$SSH_KEYS" ] || die "NBKIT_SSH=1 but $SSH_KEYS is missing or empty. Fix: mount your public key, e.g. -v ~/.ssh/id_ed25519.pub:/home/jovyan/.ssh/authorized_keys:ro (password login is disabled)."
    [ -x "$SSHD" ] || die "NBKIT_SSH=1 but $SSHD is missing. Fix: install openssh-server in the image."
fi
start_sshd() {
    local keys=$SSH_KEYS sshd=$SSHD
    local dir=${NBKIT_SSH_DIR:-${TMPDIR:-/tmp}/nbkit-sshd-$UID_NOW}
    mkdir -p "$dir" && chmod 700 "$dir"
    # Our own copy with strict modes: a mounted file may belong to another host user.
    cp "$keys" "$dir/authorized_keys" && chmod 600 "$dir/authorized_keys"
    # A host key per container, never baked into the image.
    [ -f "$dir/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/ssh_host_ed25519_key"
    cat >"$dir/sshd_config" <<CFG
Port ${NBKIT_SSH_PORT:-2222}
ListenAddress 0.0.0.0
HostKey $dir/ssh_host_ed25519_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitEmptyPasswords no
PermitRootLogin no
# StrictModes would reject the path (/tmp is world-writable, the home group-writable
# for --user remapping); the keys file is our own 600 copy in a 700 folder instead.
StrictModes no
AllowUsers $(id -un 2>/dev/null || echo "$UID_NOW")
UsePAM no
X11Forwarding no
AllowTcpForwarding local
PrintMotd no
Subsystem sftp internal-sftp
SetEnv NBKIT_RUNS_DIR=${NBKIT_RUNS_DIR:-} NBKIT_DATA_DIR=${NBKIT_DATA_DIR:-} PATH=$PATH
CFG
    "$sshd" -t -f "$dir/sshd_config" || die "sshd rejected its configuration ($dir/sshd_config)"
    "$sshd" -D -e -f "$dir/sshd_config" &
    log "SSH (key-only) on container port ${NBKIT_SSH_PORT:-2222}: ssh -p <published port> $(id -un 2>/dev/null || echo user)@127.0.0.1"
}

# --- start ------------------------------------------------------------------------------
if [ $# -eq 0 ] || [ "${1:0:1}" = "-" ]; then
    set -- jupyter lab --config="$CONFIG" "$@"
    [ "$UID_NOW" = 0 ] && set -- "$@" --allow-root
    URL="http://$HOST_ADDR:$HOST_PORT/lab"
    [ -n "$JUPYTER_TOKEN" ] && URL="$URL?token=$JUPYTER_TOKEN"
    cat >&2 <<MSG
[nbkit] JupyterLab listens on $NBKIT_JUPYTER_IP:$PORT inside the container. Open on the host:
[nbkit]
[nbkit]     $URL
[nbkit]
[nbkit] (other host port? set NBKIT_HOST_PORT. Lost the token? docker compose logs nbkit | grep token=,
[nbkit]  or: docker compose exec nbkit jupyter server list)
MSG
fi
if [ "${NBKIT_DRY_RUN:-0}" = 1 ]; then
    echo "[nbkit] dry run: $*" >&2
    exit 0
fi
[ "${NBKIT_SSH:-0}" = 1 ] && start_sshd
exec "$@"
