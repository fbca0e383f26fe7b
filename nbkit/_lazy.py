"""Lazy re-exports for nbkit's subpackages.

Each subpackage's ``__init__`` names its public API as ``{name: module}`` and
imports a module only when one of its names is first used, so ``import nbkit.gpu``
never imports torch and ``import nbkit`` works with a broken torch install.
"""
from __future__ import annotations

import importlib
from typing import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable, Callable]:
    """Return ``(__getattr__, __dir__)`` for ``package`` (PEP 562).

    exports: public name -> module (relative to ``package``) that defines it.
        A public name must differ from every submodule's name: once a submodule
        is imported, Python sets it as the package attribute of that name.
    Raises AttributeError for names not in ``exports`` (as a module would).
    """
    def __getattr__(name: str):
        if name in exports:
            return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(exports) | set(importlib.import_module(package).__dict__))

    return __getattr__, __dir__


def names(module: str, *public: str) -> dict[str, str]:
    """``{name: module}`` for each name in ``public`` (shorthand for ``lazy_exports``)."""
    return {n: module for n in public}
