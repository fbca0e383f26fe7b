"""One write path for every artifact nbkit writes: temp output beside the target, fsync, rename.

Checkpoints (:mod:`nbkit.train.checkpoint`), classifier exports
(:func:`nbkit.models.export.export_classifier`), tokenizers
(:func:`nbkit.text.tokenizer.train_wordpiece`) and JSON (:func:`nbkit.jsonio.write_json`) all
write through :func:`atomic_dir` or :func:`atomic_file`:

1. the content goes into ``<target>.tmp-<pid>`` in the target's own folder (same file
   system, so the final ``rename(2)`` is atomic);
2. every file and folder written gets the permissions ``open()`` would give (``0o666 & ~umask``;
   safetensors writes weights ``0600``), is ``fsync``'ed, then renamed to the target (a folder that
   already exists is either replaced whole, ``replace=True``, or has the new files moved
   into it one ``os.replace`` each, ``replace=False``, so other files in it survive);
3. on *any* exception inside the block the temp output is deleted before the error
   propagates: a failed write leaves nothing behind (a process killed mid-write leaves its
   ``.tmp-<pid>``, which :func:`nbkit.train.checkpoint.remove_stale` removes later).

A failure that the file system caused (disk full ``ENOSPC``, quota ``EDQUOT``, read-only
``EROFS``, no permission ``EACCES``/``EPERM``) becomes a :class:`~nbkit.errors.WriteError`
naming the target, the cause, the free space (``shutil.disk_usage``) and the size needed
(bytes written before the failure, or the caller's estimate when larger). Libraries that do
not raise ``OSError`` for it are recognised by their messages: safetensors'
``SafetensorError: ... No space left on device (os error 28)`` and torch's
``[enforce fail at inline_container.cc] unexpected pos`` (the disk full seen by its C++
writer; :mod:`nbkit.train.checkpoint` passes torch a Python file object so it raises
``OSError`` instead). Other exceptions propagate unchanged.

Standard library only (``import nbkit.jsonio`` stays cheap).
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from pathlib import Path
from typing import Iterator

from nbkit.errors import WriteError

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
    """Flush a folder's entries (renames, deletions) to disk (``fsync`` on the folder).

    A file system that cannot fsync a folder (``EINVAL``/``ENOTSUP``, e.g. some container bind mounts)
    is skipped, as SQLite and git do; any other ``OSError`` (``EIO``: the disk failed) propagates.
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
    """Give every file under ``root`` (or ``root`` itself) ``0o666 & ~umask`` and every folder ``0o777 & ~umask``:
    what ``open()``/``mkdir`` give. safetensors writes weights ``0600``, so without this a container
    or colleague of another uid could read a model's ``config.json`` but not its weights."""
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
    """Move the finished ``tmp`` folder to ``target`` (see the module docstring, step 2)."""
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
    """Write a folder atomically: yields an empty temp folder beside ``target`` to fill.

    Args:
        target: the final folder (its parent is created).
        replace: an existing ``target`` is swapped out whole (True: checkpoints) or the new files
            are moved into it, others kept (False: exports and tokenizers into a user's folder).
        estimate: bytes the write is expected to take (for the message when it fails).
        what: what is written, for the message ("checkpoint", "export", ...).

    Raises:
        WriteError: the file system refused a write (full, quota, read-only, permission); the
            temp folder is removed, ``target`` is as it was.
        Exception: any other error from the block, unchanged, after removing the temp folder.
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
    """Write one file atomically: yields a temp path beside ``target``; on success fsync + ``os.replace``.

    Same errors and clean-up as :func:`atomic_dir` (the temp file is removed on any failure).
    """
    target = Path(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with _guard(tmp, target, estimate, what):
        target.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        share_like_open(tmp)
        fsync_tree(tmp)
        os.replace(tmp, target)
        fsync_dir(target.parent)
