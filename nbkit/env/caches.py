"""Writable cache locations when HOME is not writable (``docker run --user <any uid>``, a locked-down host).

Hugging Face (``HF_HOME``, ``HF_MODULES_CACHE``: where ``trust_remote_code`` copies an export's
``pooling.py``), matplotlib (``MPLCONFIGDIR``), jieba (``NBKIT_JIEBA_CACHE``) and ``XDG_CACHE_HOME``
all default to folders under ``~/.cache``. When that folder cannot be created or written, and the
variable is not set, :func:`ensure_writable_caches` points each at ``$TMPDIR/nbkit-cache-<uid>/...``
instead, the same rule as ``docker/entrypoint.sh``. ``import nbkit`` calls it, so a plain ``python``
with an unwritable HOME loads a mean-pooling export through ``transformers.pipeline`` as the container
does. Variables the user set are never changed. Cost: a few ``stat``/``mkdir`` calls.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK)


def cache_root(environ=os.environ) -> tuple[Path, bool]:
    """``(folder, moved)``: ``$XDG_CACHE_HOME`` or ``~/.cache`` when writable, else the per-uid temp folder."""
    home = environ.get("HOME") or "/nonexistent"
    root = Path(environ.get("XDG_CACHE_HOME") or Path(home) / ".cache")
    if _writable(root):
        return root, False
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return Path(environ.get("TMPDIR") or tempfile.gettempdir()) / f"nbkit-cache-{uid}", True


def ensure_writable_caches(environ=os.environ) -> dict[str, str]:
    """Set the unset cache variables to writable folders when HOME's cache is not writable.

    Returns ``{variable: folder}`` for each variable set (empty when HOME's cache is writable).
    When ``transformers`` was imported before (its module cache path is fixed at import), its
    ``HF_MODULES_CACHE`` constants are pointed at the new folder too.
    """
    root, moved = cache_root(environ)
    if not moved:
        return {}
    root.mkdir(parents=True, exist_ok=True)
    hf_home = environ.get("HF_HOME") or str(root / "huggingface")
    wanted = {"XDG_CACHE_HOME": str(root), "HF_HOME": hf_home, "HF_MODULES_CACHE": str(Path(hf_home) / "modules"),
              "MPLCONFIGDIR": str(root / "matplotlib"), "NBKIT_JIEBA_CACHE": str(root / "jieba")}
    changed = {k: v for k, v in wanted.items() if not environ.get(k)}
    environ.update(changed)
    if "HF_MODULES_CACHE" in changed:
        _point_transformers_at(changed["HF_MODULES_CACHE"])
    return changed


def _point_transformers_at(modules_cache: str) -> None:
    """Update the module-cache constants of an already-imported ``transformers`` (no-op otherwise)."""
    for name in ("transformers.utils.hub", "transformers.utils", "transformers.dynamic_module_utils"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "HF_MODULES_CACHE"):
            module.HF_MODULES_CACHE = modules_cache
