"""Word segmenters for whole-word masking: ``rjieba`` (jieba-rs, faster) when importable, else ``jieba``; the
backend and its version are part of a store's settings. ``"none"`` segments nothing: a store's word starts are
then the tokenizer's own words (every token but a ``##`` continuation), and its preparation skips the segmenter,
the largest per-text cost (docs/corpus.md).
"""
from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version

from nbkit.errors import ConfigError

BACKENDS = ("rjieba", "jieba", "none")


def resolve(name: str = "auto") -> str:
    """The backend ``name`` stands for (``"auto"``: rjieba if importable, else jieba).

    Raises:
        ConfigError: an unknown name, or ``"rjieba"`` asked for but not installed.
    """
    if name not in (*BACKENDS, "auto"):
        raise ConfigError(f"segmenter={name!r}: use 'auto', 'rjieba', 'jieba' or 'none' (no word segmentation)")
    if name in ("auto", "rjieba"):
        try:
            import rjieba  # noqa: F401
        except ImportError as exc:
            if name == "auto":
                return "jieba"
            raise ConfigError("segmenter='rjieba' is not installed: pip install rjieba, or use "
                              "segmenter='jieba'") from exc
        return "rjieba"
    return name


def version(name: str) -> str:
    """``"rjieba 0.1.13"``: the backend and its installed version (recorded in the store's settings); ``"none"``."""
    if name == "none":
        return name
    try:
        return f"{name} {dist_version(name)}"
    except PackageNotFoundError:  # pragma: no cover
        return name


def cutter(name: str, keep_space: bool = False) -> Callable[[str], list[str]] | None:
    """``text -> words`` (HMM on) of backend ``name``: ``"我爱北京天安门"`` -> ``["我", "爱", "北京", "天安门"]``;
    whitespace-only words dropped unless ``keep_space`` (then the words join to the text). None for ``"none"``."""
    name = resolve(name)
    if name == "none":
        return None
    if name == "rjieba":
        import rjieba

        cut = rjieba.cut
    else:
        from nbkit.text.words import _jieba

        cut = _jieba().lcut

    def words(text: str) -> list[str]:
        return [w for w in cut(text) if not w.isspace()]

    return cut if keep_space else words
