# shellcheck shell=bash
# A debootstrap root that never outlives a failed build with file systems mounted in it.
# debootstrap mounts proc (and sys, devpts on some suites) inside the target; when it fails
# it leaves them mounted, and every later `rm -rf` of that root then fails on them with
# hundreds of "Operation not permitted". Source it, then:
#   rootfs_mounts ROOT        mount points at or under ROOT, deepest first (from /proc/self/mounts)
#   rootfs_unmount ROOT       unmount them all (lazily if busy); 1 if one stays mounted
#   rootfs_clean ROOT         unmount, then delete ROOT (a stale root from an earlier run)
#   rootfs_debootstrap ROOT ARGS...   clean ROOT, run ${DEBOOTSTRAP:-debootstrap} ARGS... (ROOT
#                             among them), then unmount whatever it left under ROOT; on
#                             failure delete ROOT too. A script killed meanwhile calls
#                             rootfs_unmount ROOT from its EXIT trap (build_test_image.sh does).

rootfs_mounts() {
    local root
    root=$(realpath -m "$1")
    # field 2 of /proc/self/mounts, octal escapes (\040 = space) decoded; deepest first
    awk -v r="$root" '{ p = $2; gsub(/\\040/, " ", p); if (p == r || index(p, r "/") == 1) print p }' \
        /proc/self/mounts | awk '{ print length($0) "\t" $0 }' | sort -rn | cut -f2-
}

rootfs_unmount() {
    local root=$1 m left
    while IFS= read -r m; do
        [ -n "$m" ] || continue
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done < <(rootfs_mounts "$root")
    left=$(rootfs_mounts "$root")
    if [ -n "$left" ]; then
        echo "rootfs: still mounted under $root: $left" >&2
        return 1
    fi
}

rootfs_clean() {
    local root=$1
    [ -e "$root" ] || return 0
    rootfs_unmount "$root" || return 1
    rm -rf --one-file-system "$root"
}

rootfs_debootstrap() {
    local root=$1 rc=0
    shift
    rootfs_clean "$root" || return 1
    "${DEBOOTSTRAP:-debootstrap}" "$@" || rc=$?
    rootfs_unmount "$root" || rc=1   # whatever debootstrap left mounted, success or not
    if [ "$rc" != 0 ]; then
        rootfs_clean "$root" || true
    fi
    return "$rc"
}
