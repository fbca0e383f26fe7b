"""Lazy re-exports for nbkit's subpackages, written as imports an editor can follow.

Each subpackage's ``__init__`` lists its public API as plain imports under
``if TYPE_CHECKING:``: go-to-definition, type checkers and readers follow them to the
defining module, and at run time nothing there runs. :func:`lazy_exports` reads the
same lines (one list, no second map to keep in step) and imports a module only when
one of its names is first used (PEP 562), so ``import nbkit.gpu`` never imports torch
and ``import nbkit`` works with a broken torch install. This is the shape of SPEC 1's
``lazy_loader.attach_stub``, with the imports in the ``__init__`` instead of a ``.pyi``.
"""
from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Callable


def type_checking_imports(init_file: str | Path, package: str) -> dict[str, str]:
    """``{public name: defining module}`` from the ``from X import a, b`` lines under
    ``if TYPE_CHECKING:`` in ``init_file`` (relative imports resolved against ``package``).

    Raises:
        ValueError: a plain ``import X`` or a star import there (name the objects instead).
    """
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            continue
        for stmt in node.body:
            if not isinstance(stmt, ast.ImportFrom) or any(a.name == "*" for a in stmt.names):
                raise ValueError(f"{init_file}: only `from module import name` lines belong under TYPE_CHECKING")
            module = stmt.module or ""
            if stmt.level:
                base = package.split(".")[:len(package.split(".")) - stmt.level + 1]
                module = ".".join(base + ([module] if module else []))
            for alias in stmt.names:
                out[alias.asname or alias.name] = module
    return out


def lazy_exports(package: str, init_file: str | Path) -> tuple[Callable, Callable]:
    """Return ``(__getattr__, __dir__)`` for ``package`` (PEP 562), its names from :func:`type_checking_imports`.

    A public name must differ from every submodule's name: once a submodule is
    imported, Python sets it as the package attribute of that name.
    ``__getattr__`` raises AttributeError for names not listed (as a module would).
    """
    exports = type_checking_imports(init_file, package)

    def __getattr__(name: str):
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(exports) | set(importlib.import_module(package).__dict__))

    return __getattr__, __dir__
