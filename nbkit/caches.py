"""Writable per-user cache folders when HOME's is not (``docker run --user <uid>``), the rule of
``docker/entrypoint.sh``. Never at import: called by :func:`nbkit.cli.main.main`, :func:`nbkit.jobs.outcome.run_job`
and :func:`nbkit.models.export_classifier` (a mean-pooling export's code is copied to ``HF_MODULES_CACHE`` on load).
"""
from __future__ import annotations

import os
import sys
import tempfile
import warnings
from pathlib import Path


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK)


def cache_root(environ=os.environ) -> tuple[Path, bool]:
    """``(folder, moved)``: ``$XDG_CACHE_HOME`` or ``~/.cache`` when writable, else ``$TMPDIR/nbkit-cache-<uid>``."""
    home = environ.get("HOME") or "/nonexistent"
    root = Path(environ.get("XDG_CACHE_HOME") or Path(home) / ".cache")
    if _writable(root):
        return root, False
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return Path(environ.get("TMPDIR") or tempfile.gettempdir()) / f"nbkit-cache-{uid}", True


def ensure_writable_caches(environ=os.environ) -> dict[str, str]:
    """When HOME's cache is not writable, point the unset ``XDG_CACHE_HOME``, ``HF_HOME``, ``HF_MODULES_CACHE``,
    ``MPLCONFIGDIR`` and ``NBKIT_JIEBA_CACHE`` at ``$TMPDIR/nbkit-cache-<uid>/...`` (an imported ``transformers``
    too) and warn (``UserWarning``). Returns ``{variable: folder}`` of what it set.
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
        for name in ("transformers.utils.hub", "transformers.utils", "transformers.dynamic_module_utils"):
            module = sys.modules.get(name)
            if module is not None and hasattr(module, "HF_MODULES_CACHE"):
                module.HF_MODULES_CACHE = changed["HF_MODULES_CACHE"]
    if changed:
        warnings.warn(f"HOME's cache folder is not writable: caches go to {root} for this process ("
                      + ", ".join(changed) + "); set them yourself to choose other folders", UserWarning,
                      stacklevel=2)
    return changed
