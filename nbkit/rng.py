"""A seed scope that reaches private generators (an ``MLMCollator(seed=...)``'s), not only the global RNGs:
inside :func:`seed_scope` such a component derives a fresh generator from (its seed, the scope's) once
per scope entry, so its draws depend on the batch, not on how many calls came before. Standard library only.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class Scope:
    """One entry of :func:`seed_scope`, compared by identity (two entries with one ``seed`` are two scopes)."""

    seed: int


_SCOPE: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("nbkit_seed_scope", default=None)


@contextlib.contextmanager
def seed_scope(seed: int):
    """Run a block inside a seed scope of ``seed`` (int); nested scopes shadow outer ones."""
    token = _SCOPE.set(Scope(int(seed)))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def current_scope() -> Scope | None:
    """The innermost active :class:`Scope`, or ``None`` outside any :func:`seed_scope`."""
    return _SCOPE.get()
