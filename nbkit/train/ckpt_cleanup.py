"""Deleting checkpoints so that a kill at any moment leaves nothing that looks complete.

Three rules, used by ``nbkit.train.checkpoint`` (every place nbkit deletes a checkpoint):

* :func:`discard_checkpoint` (``keep_last`` pruning, replacing a re-saved step) first
  *renames* ``step-000120`` to ``step-000120.old-<pid>``: one atomic ``rename(2)``
  takes the checkpoint out of the names the loader considers, and only then are its
  files deleted. ``shutil.rmtree`` alone deletes in directory order, so a kill midway
  could leave ``COMPLETE`` beside a missing ``model.safetensors``: a checkpoint that
  claims to be complete and is not (tests/test_ckpt_cleanup.py: with plain ``rmtree``,
  a kill after its first file removal left ``COMPLETE`` beside missing files).
* :func:`remove_stale` deletes ``.tmp-<pid>`` / ``.old-<pid>`` folders only when their
  writer ``<pid>`` is dead or is this process: never another live run's save in
  progress (the ``output_dir`` lock, ``nbkit.train.run_lock``, already keeps a second
  run out; this keeps cleanup safe even without it).
* :func:`missing_files`: the loader also checks that a marked checkpoint holds the
  files a resume reads, so a folder damaged some other way (by hand, by an older
  nbkit's pruning) is skipped with a warning instead of failing the resume.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from nbkit.atomic import fsync_dir  # noqa: F401  (re-exported: one implementation, nbkit.atomic)

_LEFTOVER = re.compile(r"\.(?:tmp|old)-(\d+)$")


def discard_checkpoint(path) -> None:
    """Delete the checkpoint folder ``path`` (``.../checkpoints/step-NNNNNN``), kill-safe.

    Renames it to ``<name>.old-<pid>`` and fsyncs the parent (from here the loader
    never sees it), then removes the files; a kill before the rename leaves the
    complete checkpoint, after it a leftover :func:`remove_stale` deletes at the next save.
    A folder already gone is not an error.
    """
    path = Path(path)
    trash = path.with_name(f"{path.name}.old-{os.getpid()}")
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return
    fsync_dir(path.parent)
    shutil.rmtree(trash, ignore_errors=True)


def leftover_pid(name: str) -> int | None:
    """The writer's pid of a ``step-NNNNNN.tmp-<pid>`` / ``.old-<pid>`` name, else None."""
    m = _LEFTOVER.search(name)
    return int(m.group(1)) if m else None


def remove_stale(root) -> list[Path]:
    """Delete the ``.tmp-<pid>`` / ``.old-<pid>`` folders in ``root`` whose writer is dead or
    is this process (a save it abandoned); return what was deleted. A live other writer's
    folder is left alone (``nbkit.train.run_lock.pid_alive``; pids are of this machine)."""
    from nbkit.train.run_lock import pid_alive

    gone = []
    for p in Path(root).iterdir():
        pid = leftover_pid(p.name)
        if pid is None or (pid != os.getpid() and pid_alive(pid)):
            continue
        shutil.rmtree(p, ignore_errors=True)
        gone.append(p)
    return gone


def missing_files(path, state_file: str) -> list[str]:
    """Files a resume needs that the checkpoint folder ``path`` lacks: ``state_file``,
    ``model/config.json`` and at least one ``model/*.safetensors``."""
    path = Path(path)
    missing = [n for n in (state_file, "model/config.json") if not (path / n).is_file()]
    if not any((path / "model").glob("*.safetensors")):
        missing.append("model/*.safetensors")
    return missing
