"""One write path for every artifact (checkpoints, exports, tokenizers, JSON): :func:`atomic_dir` /
:func:`atomic_file` write to ``<target>.tmp-<pid>`` beside the target, give ``open()``'s permissions,
fsync, then rename; on any exception the temp output is deleted before the error propagates.

A failure the file system caused (``ENOSPC``, ``EDQUOT``, ``EROFS``, ``EACCES``/``EPERM``, also recognised
in safetensors' and torch's messages) becomes a :class:`~nbkit.errors.WriteError` naming the target, the
cause, the free space and the size needed. Standard library only.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import time
from pathlib import Path
from typing import Iterator

from nbkit.errors import CheckpointError, WriteError

#: errno -> (short name, what it means for the user)
_CAUSES = {
    errno.ENOSPC: ("ENOSPC", "no space left on device"),
    errno.EDQUOT: ("EDQUOT", "disk quota exceeded"),
    errno.EROFS: ("EROFS", "read-only file system"),
    errno.EACCES: ("EACCES", "permission denied"),
    errno.EPERM: ("EPERM", "operation not permitted"),
}
#: message patterns of libraries that report these failures without an OSError
_PATTERNS = (
    (re.compile(r"No space left on device|os error 28\b"), errno.ENOSPC),
    (re.compile(r"Disk quota exceeded|os error 122\b"), errno.EDQUOT),
    (re.compile(r"Read-only file system|os error 30\b"), errno.EROFS),
    (re.compile(r"Permission denied|os error 13\b"), errno.EACCES),
    (re.compile(r"inline_container\.cc.*unexpected pos|file write failed"), errno.ENOSPC),
)


#: fsync on a folder that the file system does not support (some FUSE, SMB and 9p mounts): nothing to flush
_FSYNC_UNSUPPORTED = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF, errno.EISDIR}


def fsync_dir(path: str | os.PathLike) -> None:
    """``fsync`` a folder's entries; skipped where the file system cannot (``EINVAL``/``ENOTSUP``, some bind
    mounts), any other ``OSError`` (``EIO``) propagates.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as err:
        if err.errno in _FSYNC_UNSUPPORTED:
            return
        raise
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in _FSYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


def fsync_tree(root: str | os.PathLike) -> None:
    """``fsync`` every file under ``root`` (or ``root`` itself when it is a file) and every folder."""
    root = Path(root)
    if root.is_file():
        with open(root, "rb") as f:
            os.fsync(f.fileno())
        return
    for dirpath, _, files in os.walk(root):
        for name in files:
            with open(Path(dirpath) / name, "rb") as f:
                os.fsync(f.fileno())
        fsync_dir(dirpath)


def tree_bytes(path: str | os.PathLike) -> int:
    """Bytes in the files under ``path`` (a file: its size; missing: 0)."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(dirpath) / name).stat().st_size
    return total


def write_failure_errno(err: BaseException) -> int | None:
    """The file-system errno behind ``err`` (its ``__cause__``/``__context__`` chain included), or None."""
    seen = 0
    while err is not None and seen < 10:
        if isinstance(err, OSError) and err.errno in _CAUSES:
            return err.errno
        if not isinstance(err, OSError):
            for pattern, code in _PATTERNS:
                if pattern.search(str(err)):
                    return code
        err, seen = err.__cause__ or err.__context__, seen + 1
    return None


def _mib(n: float) -> str:
    return f"{n / 2**20:.2f} MiB"


def write_error(target: Path, code: int, written: int, estimate: int | None, what: str) -> WriteError:
    """The :class:`WriteError` for a failed write of ``target``: cause, free space, size needed."""
    name, meaning = _CAUSES[code]
    where = target.parent
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        free = shutil.disk_usage(where).free
        free_s = _mib(free)
    except OSError:
        free, free_s = None, "unknown"
    needed = max(written, estimate or 0)
    if code in (errno.ENOSPC, errno.EDQUOT):
        fix = (f"free at least {_mib(max(needed - (free or 0), 0) + 2**20)} there (delete old runs or "
               "checkpoints; TrainConfig(keep_last=1) keeps fewer), or write to a larger disk")
    else:
        fix = f"make {where} writable for this user, or write somewhere else (another output_dir / out_dir)"
    msg = (f"Could not write the {what} {target}: {meaning} ({name}). Free space on that file system: "
           f"{free_s}; this write needs about {_mib(needed)} ({_mib(written)} written before it failed). "
           f"Fix: {fix}. Nothing partial was left behind; earlier artifacts there are unchanged.")
    out = WriteError(msg)
    out.path, out.errno, out.free_bytes, out.needed_bytes = target, code, free, needed
    return out


def current_umask() -> int:
    """The process's umask (Linux: ``/proc/self/status``; elsewhere ``os.umask`` set and restored)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def share_like_open(root: str | os.PathLike) -> None:
    """``0o666 & ~umask`` for every file under ``root``, ``0o777 & ~umask`` for every folder: what ``open()``/``mkdir``
    give (safetensors writes weights ``0600``, unreadable to another uid).
    """
    mask = current_umask()
    root = Path(root)
    if root.is_file():
        os.chmod(root, 0o666 & ~mask)
        return
    os.chmod(root, 0o777 & ~mask)
    for dirpath, dirs, files in os.walk(root):
        for d in dirs:
            os.chmod(os.path.join(dirpath, d), 0o777 & ~mask)
        for f in files:
            os.chmod(os.path.join(dirpath, f), 0o666 & ~mask)


def _temp_name(target: Path, kind: str) -> Path:
    return target.with_name(f"{target.name}.{kind}-{os.getpid()}")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def _publish_dir(tmp: Path, target: Path, replace: bool) -> None:
    """Move the finished ``tmp`` folder to ``target``: rename, swap (``replace``) or merge file by file."""
    if not target.exists():
        os.rename(tmp, target)
    elif replace:  # swap: the old one leaves the name in one rename, then is deleted
        old = _temp_name(target, "old")
        _remove(old)
        os.rename(target, old)
        os.rename(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:  # merge: each new file replaces its namesake; other files in target stay
        for dirpath, _, files in os.walk(tmp):
            rel = Path(dirpath).relative_to(tmp)
            (target / rel).mkdir(parents=True, exist_ok=True)
            for name in files:
                os.replace(Path(dirpath) / name, target / rel / name)
            fsync_dir(target / rel)
        shutil.rmtree(tmp, ignore_errors=True)
    fsync_dir(target.parent)


@contextlib.contextmanager
def _guard(tmp: Path, target: Path, estimate: int | None, what: str) -> Iterator[None]:
    """Delete ``tmp`` on any exception; turn file-system failures into :class:`WriteError`."""
    try:
        yield
    except BaseException as err:
        written = tree_bytes(tmp)
        _remove(tmp)
        code = write_failure_errno(err) if isinstance(err, Exception) else None
        if code is None or isinstance(err, WriteError):
            raise
        raise write_error(target, code, written, estimate, what) from err


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike, *, replace: bool = True, estimate: int | None = None,
               what: str = "folder") -> Iterator[Path]:
    """Yield an empty temp folder beside ``target`` to fill; on success it becomes ``target``.

    ``replace``: an existing ``target`` is swapped whole (checkpoints) or the new files are moved into it,
    others kept (exports, tokenizers). ``estimate`` (bytes) and ``what`` ("checkpoint") go into the message.

    Raises:
        WriteError: the file system refused a write; the temp folder is removed, ``target`` unchanged.
    """
    target = Path(target)
    tmp = _temp_name(target, "tmp")
    with _guard(tmp, target, estimate, what):
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove(tmp)
        tmp.mkdir()
        yield tmp
        share_like_open(tmp)
        fsync_tree(tmp)
        _publish_dir(tmp, target, replace)


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike, *, estimate: int | None = None, what: str = "file") -> Iterator[Path]:
    """Yield a temp path beside ``target``; on success fsync and ``os.replace``. Errors as :func:`atomic_dir`."""
    target = Path(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with _guard(tmp, target, estimate, what):
        target.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        share_like_open(tmp)
        fsync_tree(tmp)
        os.replace(tmp, target)
        fsync_dir(target.parent)


def being_replaced(target: str | os.PathLike) -> bool:
    """True while :func:`atomic_dir` swaps ``target`` (a ``<name>.old-<pid>`` beside it: between its two renames
    the name is absent for a moment, and a reader must not take that for "never written")."""
    target = Path(target)
    return any(target.parent.glob(f"{target.name}.old-*"))


def _version(folder: Path) -> tuple | None:
    """What changes when :func:`atomic_dir` replaces ``folder`` (swap: the folder's inode; merge: a file's):
    the inodes, sizes and mtimes of the folder and its files; None when absent."""
    try:
        top = os.stat(folder)
        files = sorted((str(p.relative_to(folder)), (st := p.stat()).st_ino, st.st_size, st.st_mtime_ns)
                       for p in folder.rglob("*") if p.is_file())
    except FileNotFoundError:
        return None
    return top.st_ino, files


#: times :func:`read_consistent` reads a folder again after a writer replaced it during the read
READ_TRIES = 20


def read_consistent(folder: str | os.PathLike, read, what: str = "folder"):
    """``read(folder)`` from one whole version of a folder that another process may replace meanwhile with
    :func:`atomic_dir`: when the folder changed during the read, or the read failed while it changed or was
    mid-swap, it reads again, up to :data:`READ_TRIES` times, 0.05 s apart.

    Raises:
        CheckpointError: the folder changed during every read, or stayed mid-swap (a writer killed between its
            two renames): the fix named.
        Exception: ``read``'s own, where the folder did not change (e.g. a folder that was never written).
    """
    folder = Path(folder)
    for _ in range(READ_TRIES):
        before = _version(folder)
        try:
            out = read(folder)
        except Exception:  # noqa: BLE001  (OSError, or a loader's "not found" while the name was absent)
            if before is not None and _version(folder) == before and not being_replaced(folder):
                raise                                   # nothing moved: the folder's own problem
            time.sleep(0.05)
            continue
        if before is not None and _version(folder) == before:
            return out
        time.sleep(0.05)                                # replaced while read: read the new version whole
    raise CheckpointError(f"{folder} was replaced while this {what} was read, {READ_TRIES} times in a row (another "
                          "kernel or job is saving it, or one was killed mid-save: a "
                          f"{folder.name}.old-*/.tmp-* folder beside it). Fix: wait for that run's save to finish and "
                          "run this again, or copy the folder and read the copy.")


#: subfolder prefix a fresh run moves an earlier run's files into (:func:`set_aside`)
PREVIOUS = "previous-"


def set_aside(folder: str | os.PathLike, names: list[str], clock=None) -> Path | None:
    """Move the entries ``names`` of ``folder`` into a new ``folder/previous-<UTC YYYYmmdd-HHMMSS>/`` (``-2``,
    ``-3``, ... when taken) by renames: nothing is copied or deleted, and a kill leaves each entry whole in one
    of the two places. Returns that subfolder; None when ``names`` is empty.

    Raises:
        WriteError: the subfolder could not be created, or an entry could not be moved (the ones moved are put
            back); the entry and the fix are named.
    """
    if not names:
        return None
    folder = Path(folder)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(clock() if clock else None))
    dest, n = folder / f"{PREVIOUS}{stamp}", 1
    while True:
        try:
            dest.mkdir()
            break
        except FileExistsError:
            n += 1
            dest = folder / f"{PREVIOUS}{stamp}-{n}"
        except OSError as exc:      # a read-only folder: named, with the fix (not a bare PermissionError)
            raise WriteError(f"Could not create {dest} to move an earlier run's {', '.join(names[:3])} aside "
                             f"({exc.strerror or exc}): nothing was moved. Fix: make {folder} writable (chmod u+w "
                             f"{folder}), or write somewhere else (another output_dir).") from exc
    moved: list[str] = []
    try:
        for name in names:
            os.rename(folder / name, dest / name)
            moved.append(name)
    except OSError as exc:           # e.g. a read-only entry: put back what moved, leave no empty previous-*
        failed = name
        for back in reversed(moved):
            os.rename(dest / back, folder / back)
        dest.rmdir()
        raise WriteError(f"Could not move {folder / failed} aside into {dest.name}/ ({exc.strerror or exc}): "
                         f"nothing was moved, {folder} is as it was. Fix: make {folder} and what it holds "
                         f"writable (chmod -R u+w {folder}), or write somewhere else (another output_dir).") from exc
    fsync_dir(dest)
    fsync_dir(folder)
    return dest
