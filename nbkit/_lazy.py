"""Lazy re-exports (PEP 562) read from the ``from X import a`` lines under ``if TYPE_CHECKING:`` in a
package's ``__init__``: editors follow them, and a module is imported only when one of its names is first
used (``import nbkit.gpu`` imports no torch).
"""
from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Callable


def type_checking_imports(init_file: str | Path, package: str) -> dict[str, str]:
    """``{name: defining module}`` from those lines of ``init_file`` (relative imports resolved against ``package``).
    Raises ``ValueError`` for a plain ``import X`` or a star import there.
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
    """``(__getattr__, __dir__)`` for ``package``. A public name must differ from every submodule's name (an
    imported submodule becomes the package attribute of its name); unknown names raise ``AttributeError``.
    """
    exports = type_checking_imports(init_file, package)

    def __getattr__(name: str):
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(exports) | set(importlib.import_module(package).__dict__))

    return __getattr__, __dir__
