"""Load a repository script that is not an importable package (bench/, scripts/, tests/browser/) as a module.

``load_script("bench/gpu_check.py")`` runs the file once and returns the module, as ``import`` would; a script
that puts its own folders on ``sys.path`` (scripts/lib/) does so as it is loaded.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(path: str | Path, name: str | None = None) -> ModuleType:
    """The module run from ``path`` (relative to the repository root, or absolute), named ``name`` (default: the
    file's stem). Raises FileNotFoundError when the file is missing."""
    path = ROOT / path
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
