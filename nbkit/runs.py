"""Where artifacts go (one runs directory, one sub-directory per scale and step), and where the notebooks are.

``NBKIT_RUNS_DIR`` overrides the default ``runs/`` in the working directory
(the container mounts a volume there). Layout::

    runs/<scale>/tokenizer/   transformers-loadable tokenizer + stats.json
    runs/<scale>/mlm/         checkpoints/, model/, metrics.json (the scale's recipe on the bundled text)
    runs/<scale>/mlm-<store>-<overrides>/   another pretraining run (nbkit.recipes.pretraining.run_dir)
    runs/<scale>/sentiment/   metrics.json, confusion matrix PNG
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path


def runs_dir() -> Path:
    """The root runs directory, ``$NBKIT_RUNS_DIR`` or ``./runs`` (created if missing)."""
    root = step_path()
    root.mkdir(parents=True, exist_ok=True)
    return root


def step_path(scale: str | None = None, step: str | None = None) -> Path:
    """``runs/<scale>/<step>`` (or the root, or ``runs/<scale>``) without creating anything: for looking."""
    root = Path(os.environ.get("NBKIT_RUNS_DIR", "runs")).expanduser().resolve()
    return root.joinpath(*[p for p in (scale, step) if p])


def step_dir(scale: str, step: str) -> Path:
    """``runs/<scale>/<step>`` (created if missing): where a step writes."""
    path = step_path(scale, step)
    path.mkdir(parents=True, exist_ok=True)
    return path


def path_tag(name: str, key: str, n_hex: int, fallback: str) -> str:
    """``<name>-<hash>`` for a folder named after a path: ``name`` with characters other than
    ``A-Za-z0-9_.-`` replaced by ``_`` and cut to 40 (``fallback`` when empty), then the first ``n_hex``
    hex digits of sha256(``key``), so two paths of the same name get two folders."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:40] or fallback
    return f"{stem}-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:n_hex]}"


def notebooks_dir() -> Path:
    """The ``notebooks/`` folder: ``$NBKIT_NOTEBOOKS_DIR``, else beside the package, else ``./notebooks``.

    Raises:
        FileNotFoundError: none of those exists.
    """
    candidates = [os.environ.get("NBKIT_NOTEBOOKS_DIR"),
                  Path(__file__).resolve().parents[1] / "notebooks",
                  Path.cwd() / "notebooks"]
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c).resolve()
    raise FileNotFoundError("no notebooks/ folder found; run from the nbkit checkout or set NBKIT_NOTEBOOKS_DIR")
