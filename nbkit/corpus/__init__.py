"""The corpus store: a user's text prepared once into sharded token ids + word starts (``nbkit-corpus/1``).

``prepare_corpus(inputs, out_dir, **settings) -> manifest`` (also ``nbkit prepare-corpus``); the
format and its reasons are in ``docs/corpus.md``. Names are imported lazily (``import nbkit.corpus``
stays cheap).
"""
from __future__ import annotations

import importlib

_LAZY = {"prepare_corpus": "nbkit.corpus.prepare", "DEFAULTS": "nbkit.corpus.manifest"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'nbkit.corpus' has no attribute {name!r}")
