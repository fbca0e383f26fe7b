"""nbkit's settings that more than one layer reads, defined once: the scale names ``NBKIT_SCALE`` takes.

:mod:`nbkit.recipes.scales` holds the defaults per name; the environment report (:mod:`nbkit.env.layer_checks`, which
stands below the notebook layer and must not import it) checks ``NBKIT_SCALE`` against the same names, read the same way
(:func:`scale_name`). Plain Python: importing this module imports nothing else.
"""
from __future__ import annotations

SCALES = ("smoke", "cpu", "gpu")   # smallest first; docs/architecture.md and README describe each


def scale_name(raw: str) -> str:
    """A scale name as given (``NBKIT_SCALE``, ``--scale``, a notebook's ``scale``) -> the name compared
    with :data:`SCALES`: case and surrounding spaces ignored (``" CPU "`` -> ``"cpu"``); ``""`` stays ``""``.
    Not validated here: callers say which of :data:`SCALES` to use, each in its own words."""
    return raw.strip().lower()
