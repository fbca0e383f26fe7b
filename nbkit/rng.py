"""A seed scope that reaches private generators (an MLM collator's), not only the global RNGs.

``nbkit.switches.isolated_rng(seed)`` seeds and restores Python's, NumPy's and torch's
global RNGs around a block (each training batch, each evaluation batch). A component that keeps
its own ``torch.Generator`` (``MLMCollator(seed=...)``) is out of reach of that: its stream just
continues, so two evaluations of the same checkpoint drew different masks and a resumed run drew
other masks than a straight one. Inside :func:`seed_scope` such a component asks
:func:`current_scope` and derives a fresh generator from (its own seed, the scope's seed) once
per scope entry, so its draws depend on the batch, not on how many calls came before.

Standard library only: ``import nbkit`` stays cheap, and every layer may import it.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class Scope:
    """One entry of :func:`seed_scope`: ``seed`` (int). Compared by identity, so two entries with
    the same seed are two scopes (a component re-derives its generator at each entry)."""

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
