"""A CJK font for matplotlib, so that Chinese labels render instead of empty boxes.

:func:`use_cjk_font` puts the first installed of :data:`CJK_FAMILIES` in front of
``font.sans-serif``; matplotlib (>= 3.6) falls back glyph by glyph along that list. Without one it
warns once with the install command, and callers keep ASCII labels.
"""
from __future__ import annotations

import warnings

# Simplified Chinese faces first, then any CJK face (same ideographs, regional shapes); older matplotlib
# reads only the first face of Debian's NotoSansCJK-Regular.ttc, "Noto Sans CJK JP".
CJK_FAMILIES = (
    "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN", "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei", "Microsoft YaHei", "PingFang SC", "Hiragino Sans GB", "Heiti SC", "SimHei",
    "Droid Sans Fallback", "Noto Sans CJK JP", "Noto Sans CJK TC", "Noto Sans CJK HK", "Noto Sans CJK KR",
    "Source Han Sans", "Source Han Sans TC", "Source Han Sans JP", "Source Han Sans K", "Noto Serif CJK SC",
    "Noto Serif CJK JP", "AR PL UMing CN", "AR PL UKai CN")

INSTALL_HINT = ("No CJK font found for matplotlib, so Chinese text in plots would show as empty boxes; plots use "
                "English labels instead. To get Chinese labels install one, e.g. `sudo apt-get install fonts-noto-cjk` "
                "(Debian/Ubuntu; the nbkit container has it; elsewhere Noto Sans CJK SC or Source Han Sans SC into "
                "~/.local/share/fonts), then restart the kernel.")


class CjkFontWarning(UserWarning):
    """No CJK font is installed; the message says how to install one."""


_state: dict = {"looked": False, "family": None, "warned": False}


def _first_cjk_family(ttflist) -> str | None:
    installed = {f.name for f in ttflist}
    return next((name for name in CJK_FAMILIES if name in installed), None)


def find_cjk_font(ttflist=None) -> str | None:
    """The first installed of :data:`CJK_FAMILIES`, or None, in ``ttflist`` (entries with ``.name``);
    default matplotlib's list, then the system fonts installed after matplotlib cached it."""
    if ttflist is not None:
        return _first_cjk_family(ttflist)
    from matplotlib import font_manager

    family = _first_cjk_family(font_manager.fontManager.ttflist)
    if family is None:
        _add_fonts_missing_from_cache()
        family = _first_cjk_family(font_manager.fontManager.ttflist)
    return family


def _add_fonts_missing_from_cache() -> None:
    """Register system fonts missing from matplotlib's cached font list (installed after it was written)."""
    from matplotlib import font_manager

    fm = font_manager.fontManager
    known = {f.fname for f in fm.ttflist} | {f.fname for f in fm.afmlist}
    for path in font_manager.findSystemFonts():
        if path not in known:
            try:
                fm.addfont(path)
            except Exception:  # a broken font file must not break plotting
                continue


def use_cjk_font(rc=None) -> str | None:
    """Put an installed CJK font first in ``rc["font.sans-serif"]`` (default ``matplotlib.rcParams``) and
    return its family; None when there is none, after warning once (:class:`CjkFontWarning`). The lookup
    runs once per process; each call re-applies it."""
    import matplotlib

    rc = matplotlib.rcParams if rc is None else rc
    if not _state["looked"]:
        _state.update(looked=True, family=find_cjk_font())
    family = _state["family"]
    if family is None:
        if not _state["warned"]:
            _state["warned"] = True
            warnings.warn(INSTALL_HINT, CjkFontWarning, stacklevel=2)
        return None
    current = list(rc["font.sans-serif"])
    if current[:1] != [family]:
        rc["font.sans-serif"] = [family] + [f for f in current if f != family]
    return family
