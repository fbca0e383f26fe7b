"""A pretraining corpus mixed from several sources, deduplicated across them, with held-out text kept out.

Domain-adaptive pretraining (Gururangan et al. 2020, "Don't Stop Pretraining") continues
MLM on in-domain unlabelled text: for the review task, the review texts of the *training*
split. :func:`mix_corpora` combines such sources (People's Daily, optional news, training
reviews, a user's corpus) into one ``datasets.Dataset`` and reports what went in:

1. every text is normalised (:func:`nbkit.data.labeled.normalize_text`) and blank ones go;
2. a text equal to one in ``exclude`` (validation/test texts of any task evaluated
   later) is dropped, so no held-out text is ever pretrained on;
3. a text already taken from an earlier source (or earlier in the same source) is a
   duplicate and dropped, so overlapping corpora do not count twice;
4. each source's kept texts are repeated ``weight`` times: an integer part of whole
   copies plus a seeded random sample for the fraction (0.5 = a random half, 2 = twice);
5. the result is shuffled with ``seed``.
"""
from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nbkit.data.labeled import normalize_text
from nbkit.errors import ConfigError, DataError

if TYPE_CHECKING:  # pragma: no cover
    pass


@dataclass
class MixedCorpus:
    """The mixed corpus and what went into it.

    dataset: columns ``text`` (str) and ``source`` (str), plus ``words`` (list[str])
        when a source gave word boundaries (``[]`` for rows of sources without them:
        :func:`nbkit.text.words.add_words` fills those with jieba); shuffled.
    report: per source ``{n_in, n_blank, n_excluded, n_duplicates, n_kept, weight,
        n_out, chars_out, char_share}`` (``char_share`` of the mix's characters, 0-1)
        plus totals ``n_out`` and ``chars_out``.
    """

    dataset: Any
    report: dict = field(default_factory=dict)

    def table(self):
        """The per-source report as a ``pandas.DataFrame`` (one row per source)."""
        import pandas as pd

        return pd.DataFrame({k: v for k, v in self.report.items() if isinstance(v, dict)}).T


def _rows(source) -> tuple[list[str], list | None]:
    """Texts (and word lists, if the source has a ``words`` column) of one source."""
    if isinstance(source, str):
        raise ConfigError("a source must be a sequence of texts or a datasets.Dataset, not one string")
    column_names = getattr(source, "column_names", None)
    if column_names is not None:
        if "text" not in column_names:
            raise DataError(f"a dataset source needs a 'text' column; it has {column_names}")
        return list(source["text"]), (list(source["words"]) if "words" in column_names else None)
    return list(source), None


def mix_corpora(sources: Mapping[str, Sequence[str] | Any], weights: Mapping[str, float] | None = None,
                *, exclude: Iterable[str] = (), seed: int = 0) -> MixedCorpus:
    """Mix ``sources`` (name -> texts or a Dataset with ``text``) into one shuffled corpus.

    Args:
        sources: in priority order: a text found in two sources counts for the first.
        weights: name -> repeat factor >= 0 (default 1 for every source); see the
            module docstring. 0 leaves a source out (still reported).
        exclude: texts that must never be pretrained on (held-out splits); compared
            after :func:`~nbkit.data.labeled.normalize_text`.
        seed: for the fractional sampling and the shuffle.

    Raises:
        ConfigError: a weight for an unknown source, a negative or non-finite weight,
            no sources.
        DataError: nothing left to pretrain on.
    """
    import datasets

    weights = dict(weights or {})
    if not sources:
        raise ConfigError("mix_corpora needs at least one source")
    unknown = sorted(set(weights) - set(sources))
    if unknown:
        raise ConfigError(f"weights for unknown sources {unknown}; the sources are {list(sources)}")
    for name, w in weights.items():
        if not (isinstance(w, (int, float)) and math.isfinite(w) and w >= 0):
            raise ConfigError(f"weight {name}={w!r} must be a finite number >= 0 (repeat factor, 1 = once)")
    held_out = {normalize_text(t) for t in exclude}
    rng = random.Random(seed)
    seen: set[str] = set()
    rows: list[tuple[str, str, list | None]] = []
    report: dict[str, Any] = {}
    any_words = False
    for name, source in sources.items():
        texts, words = _rows(source)
        any_words |= words is not None
        counts = dict.fromkeys(("n_in", "n_blank", "n_excluded", "n_duplicates", "n_kept"), 0)
        counts["n_in"] = len(texts)
        kept = []
        for i, text in enumerate(texts):
            key = normalize_text(text)
            if not key:
                counts["n_blank"] += 1
            elif key in held_out:
                counts["n_excluded"] += 1
            elif key in seen:
                counts["n_duplicates"] += 1
            else:
                seen.add(key)
                kept.append((key, words[i] if words is not None else None))
        counts["n_kept"] = len(kept)
        w = float(weights.get(name, 1.0))
        whole, frac = int(w), w - int(w)
        chosen = kept * whole + rng.sample(kept, round(frac * len(kept)))
        rows += [(text, name, wl) for text, wl in chosen]
        report[name] = {**counts, "weight": w, "n_out": len(chosen), "chars_out": sum(len(t) for t, _ in chosen)}
    if not rows:
        raise DataError(f"nothing to pretrain on after dedup and exclusion: {report}")
    rng.shuffle(rows)
    total = sum(r["chars_out"] for r in report.values())
    for r in report.values():
        r["char_share"] = round(r["chars_out"] / total, 4) if total else 0.0
    report.update(n_out=len(rows), chars_out=total)
    columns = {"text": [r[0] for r in rows], "source": [r[1] for r in rows]}
    if any_words:
        columns["words"] = [r[2] or [] for r in rows]
    return MixedCorpus(datasets.Dataset.from_dict(columns), report)
