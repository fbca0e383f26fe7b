# shellcheck shell=bash
# Advisory locks for scripts that share folders between runs (two clones, one machine).
# Source it, then:
#   lock_take FILE WHAT [shared]   take an flock(1) on FILE, kept until the script exits
#                                  (its fd stays open); if another run holds it, say who and
#                                  wait (up to NBKIT_LOCK_WAIT_S, default 3600 s), then fail.
#   lock_drop FILE                 release it early.
#   lock_try_exclusive FILE        exclusive without waiting: 0 taken, 1 busy (e.g. before
#                                  deleting a cache another run may be reading).
# Exclusive for writers (building a cache entry), shared for readers (copying from one).
# The kernel drops a lock when its holder dies, so a killed run never blocks the next.
# Who holds an exclusive lock is written to FILE.holder (pid, host, repo, time).

declare -gA NBKIT_LOCK_FDS=()

_lock_holder() { cat "$1.holder" 2>/dev/null || echo "unknown (no $1.holder)"; }

lock_take() {
    local file=$1 what=$2 mode=${3:-exclusive} fd flag=-x
    [ "$mode" = shared ] && flag=-s
    mkdir -p "$(dirname "$file")"
    exec {fd}>>"$file"
    if ! flock -n "$flag" "$fd"; then
        echo "waiting for $what: $file is held by another run (last writer: $(_lock_holder "$file"))" >&2
        local t0=$SECONDS
        flock -w "${NBKIT_LOCK_WAIT_S:-3600}" "$flag" "$fd" || {
            echo "gave up after ${NBKIT_LOCK_WAIT_S:-3600} s waiting for $what ($file); if no run is active, nothing holds it: retry" >&2
            exec {fd}>&-
            return 1
        }
        echo "got $what after $((SECONDS - t0)) s" >&2
    fi
    if [ "$flag" = -x ]; then
        printf 'pid %s on %s, %s, since %s\n' "$$" "$(hostname)" "${REPO:-$PWD}" "$(date -u +%FT%TZ)" >"$file.holder"
    fi
    NBKIT_LOCK_FDS[$file]=$fd
}

lock_drop() {
    local fd=${NBKIT_LOCK_FDS[$1]:-}
    [ -n "$fd" ] || return 0
    exec {fd}>&-
    unset "NBKIT_LOCK_FDS[$1]"
}

lock_try_exclusive() {
    local file=$1 fd
    exec {fd}>>"$file"
    if flock -n -x "$fd"; then
        NBKIT_LOCK_FDS[$file]=$fd
        return 0
    fi
    exec {fd}>&-
    return 1
}
