"""One training run per ``output_dir``: ``Loop.fit()``/``save()`` hold :class:`RunLock` (rank 0 under DDP),
since two runs in one folder prune and overwrite each other's checkpoints."""
from __future__ import annotations

from nbkit.errors import ConfigError
from nbkit.folder_lock import FolderLock


class RunLock(FolderLock):
    """Non-blocking lock on ``output_dir`` (``.nbkit-run.lock``). Raises ``ConfigError`` naming the holder and
    the fixes when another run holds it."""

    LOCK_NAME = ".nbkit-run.lock"
    HOLDER_NAME = ".nbkit-run.json"

    def busy(self, lock) -> None:
        here = " - this process" if self.holder_is_me() else ""
        raise ConfigError(
            f"output_dir={str(self.folder)!r} is in use by another training run: {self.holder()}{here}. Two runs "
            "in one output_dir overwrite and prune each other's checkpoints. Wait for that run to finish "
            "(or stop it), or give this run its own output_dir. The lock is released when its holder "
            f"exits, even if killed (file {self.folder / self.LOCK_NAME}).")
