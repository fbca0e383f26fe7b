"""Numbers as people read them, shared by every progress line (notebook runner, corpus preparation, loop)."""
from __future__ import annotations


def fmt_duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``: wall times as people read them."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
