"""A CJK font for matplotlib, so that Chinese labels render instead of empty boxes.

matplotlib's default font (DejaVu Sans) has no Chinese glyphs: ``正面`` in a tick label
draws as two boxes and logs ``Glyph 27491 (\\N{CJK UNIFIED IDEOGRAPH-6B63}) missing from
font(s) DejaVu Sans``. :func:`use_cjk_font` looks for an installed CJK font in
matplotlib's font list (``matplotlib.font_manager.fontManager.ttflist``) and puts it first
in ``rcParams["font.sans-serif"]``, keeping the previous entries after it: matplotlib
(>= 3.6) falls back glyph by glyph along that list, so anything the CJK font lacks still
comes from DejaVu Sans. The usual recipe (``plt.rcParams["font.sans-serif"] = ["SimHei"]``)
names one Windows font; here the first installed one of :data:`CJK_FAMILIES` wins.

When none is installed it warns once, with the fix (``apt-get install fonts-noto-cjk``
on Debian/Ubuntu; the container image has it), and callers keep ASCII labels.
``nbkit.views.plots.LivePlot`` and ``nbkit.views.plots.plot_confusion_matrix``
call it before drawing; notebooks call it to choose Chinese or English class names.
"""
from __future__ import annotations

import warnings

# Families in order of preference: Simplified Chinese faces first, then any CJK face
# (Japanese/Korean/Traditional faces of Noto/Source Han cover the same ideographs, with
# regional glyph shapes). matplotlib 3.11 lists every face of a .ttc collection, so
# Debian's fonts-noto-cjk (NotoSansCJK-Regular.ttc) gives "Noto Sans CJK SC"; older
# versions read only the first face, "Noto Sans CJK JP".
CJK_FAMILIES = (
    "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN",
    "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Microsoft YaHei", "PingFang SC",
    "Hiragino Sans GB", "Heiti SC", "SimHei", "Droid Sans Fallback",
    "Noto Sans CJK JP", "Noto Sans CJK TC", "Noto Sans CJK HK", "Noto Sans CJK KR",
    "Source Han Sans", "Source Han Sans TC", "Source Han Sans JP", "Source Han Sans K",
    "Noto Serif CJK SC", "Noto Serif CJK JP", "AR PL UMing CN", "AR PL UKai CN",
)

INSTALL_HINT = ("No CJK font found for matplotlib, so Chinese text in plots would show as empty boxes; "
                "plots use English labels instead. To get Chinese labels install one, e.g. "
                "`sudo apt-get install fonts-noto-cjk` (Debian/Ubuntu; the nbkit container has it; "
                "elsewhere Noto Sans CJK SC or Source Han Sans SC into ~/.local/share/fonts), "
                "then restart the kernel.")


class CjkFontWarning(UserWarning):
    """No CJK font is installed; the message says how to install one."""


_state: dict = {"looked": False, "family": None, "warned": False}


def _first_cjk_family(ttflist) -> str | None:
    installed = {f.name for f in ttflist}
    return next((name for name in CJK_FAMILIES if name in installed), None)


def find_cjk_font(ttflist=None) -> str | None:
    """The first of :data:`CJK_FAMILIES` that is installed, or None.

    Args:
        ttflist: font entries with a ``.name`` (family) attribute, searched as given.
            Default: matplotlib's font list (``matplotlib.font_manager.fontManager.ttflist``),
            and when that has none, also the system fonts installed after matplotlib
            cached its list (they are registered with matplotlib on the way).
    """
    if ttflist is not None:
        return _first_cjk_family(ttflist)
    from matplotlib import font_manager

    family = _first_cjk_family(font_manager.fontManager.ttflist)
    if family is None:
        _add_fonts_missing_from_cache()
        family = _first_cjk_family(font_manager.fontManager.ttflist)
    return family


def _add_fonts_missing_from_cache() -> None:
    """Register system fonts installed after matplotlib wrote its font cache.

    matplotlib scans the system fonts once and caches the list (``fontlist-*.json`` in
    ``matplotlib.get_cachedir()``); a font installed later (``apt-get install
    fonts-noto-cjk`` on a machine that has run matplotlib before) stays invisible until
    that cache is rebuilt. ``FontManager.addfont`` registers the new files.
    """
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
    """Put an installed CJK font first in ``font.sans-serif``; return its family, or None.

    The font lookup runs once per process (later calls reuse its answer, and re-apply it
    to ``rc``, e.g. after ``plt.rcdefaults()``). Entries already in ``font.sans-serif``
    stay behind the CJK font as per-glyph fallbacks; ``font.family`` is not changed
    (its default is ``sans-serif``).

    Args:
        rc: the rcParams mapping to change (default ``matplotlib.rcParams``).

    Returns:
        The family name, e.g. ``"Noto Sans CJK JP"``; None when no CJK font is installed,
        after warning once (:class:`CjkFontWarning`, with the install command).
    """
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


def reset() -> None:
    """Forget the lookup and the warning (tests; after installing a font in a live kernel)."""
    _state.update(looked=False, family=None, warned=False)
