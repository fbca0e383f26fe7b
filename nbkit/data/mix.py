"""A pretraining corpus mixed from several sources (domain-adaptive pretraining, Gururangan et al. 2020).

Texts are normalised, blank ones and held-out ones (``exclude``) dropped, duplicates across and within
sources dropped (the first source wins), each source repeated ``weight`` times (whole copies plus a
seeded sample for the fraction), then the mix is shuffled.
"""
from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nbkit.data.labeled import normalize_text
from nbkit.errors import ConfigError, DataError


@dataclass
class MixedCorpus:
    """The mixed corpus and what went into it.

    dataset: shuffled; columns ``text``, ``source`` and, when a source had them, ``words``
        (list[str]; ``[]`` for rows without, which :func:`nbkit.text.words.add_words` fills).
    report: per source ``n_in, n_blank, n_excluded, n_duplicates, n_kept, weight, n_out, chars_out``
        and ``char_share`` (0-1 of the mix's characters); totals ``n_out``, ``chars_out``.
    """

    dataset: Any
    report: dict = field(default_factory=dict)

    def table(self):
        """The per-source report, one ``pandas.DataFrame`` row per source."""
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
    """Mix ``sources`` (name -> texts or a Dataset with ``text``, in priority order) into one corpus.

    ``weights``: name -> repeat factor >= 0 (default 1; 0 leaves a source out, still reported).
    ``exclude``: held-out texts never pretrained on, compared after normalisation.

    Raises:
        ConfigError: no sources, a source that is one string, a weight for an unknown source, a
            negative or non-finite weight.
        DataError: a Dataset source without ``text``, or nothing left to pretrain on.
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
