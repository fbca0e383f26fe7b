"""The pretraining recipe's data stages: corpus -> tokenizer -> (run sized for the corpus) -> MLM blocks.

Re-exported by :mod:`nbkit.recipes.pretraining` (``pt.corpus(cfg)``, ``pt.tokenizer(cfg, source)``, ...).
A *source* is either the bundled mix as a ``DatasetDict`` (train/validation texts) or a prepared
store's directory (``cfg.corpus``: the user's corpus, read from disk block by block).
"""
from __future__ import annotations

import os
from pathlib import Path

from nbkit import jsonio
from nbkit.recipes.pretrain_config import PretrainConfig


def corpus(cfg: PretrainConfig, labeled=None, texts=None):
    """``(source, what_went_in)``: the text pretraining reads.

    ``cfg.corpus`` None: the one builder :func:`nbkit.pipeline.pretraining_text.pretraining_corpus` over
    ``cfg.mix`` (``labeled``: the labelled data whose training texts are the ``reviews`` source and
    whose validation/test texts are excluded; ``texts``: the ``own`` source), returning the
    ``DatasetDict`` and the per-source table (a DataFrame). Else the prepared store
    (:func:`nbkit.pipeline.pretraining_text.corpus_store`: prepared once under ``runs/corpus/``, then
    reused) and its summary dict (:func:`nbkit.pipeline.pretraining_text.store_summary`).

    Raises:
        ConfigError / DataError: from the builder or the store writer (unknown source, too little text, ...).
    """
    from nbkit.pipeline import pretraining_text as corpora
    from nbkit.pipeline import runs

    if cfg.corpus is not None:
        store = corpora.corpus_store(cfg.corpus, scale_name=cfg.scale)
        return store, corpora.store_summary(store)
    splits, mixed = corpora.pretraining_corpus(
        cfg.mix, labeled=labeled, texts=texts, corpus_lines=cfg.corpus_lines, max_train=cfg.max_train,
        seed=cfg.seed, split_seed=cfg.split_seed, eval_fraction=cfg.eval_fraction,
        cache_dir=runs.step_dir(cfg.scale, "cache"))
    return splits, mixed.table()


def store_dir(cfg: PretrainConfig) -> Path | None:
    """The store ``cfg.corpus`` names, without preparing it: the folder itself when it is a prepared
    store, else where :func:`corpus` prepares it (:func:`nbkit.pipeline.pretraining_text.store_dir_for`,
    ``runs/corpus/<first input's name>-<hash>``); None without ``cfg.corpus`` (the bundled mix)."""
    if cfg.corpus is None:
        return None
    from nbkit.corpus.store import given_store
    from nbkit.pipeline.pretraining_text import store_dir_for

    return given_store(cfg.corpus) or store_dir_for(cfg.corpus)


def run_dir(cfg: PretrainConfig) -> Path:
    """The run's folder (created if missing): ``runs/<scale>/mlm[-<store>]<overrides>``, the one name of a
    pretraining run (notebook 02, ``python -m nbkit.jobs.pretrain``, :func:`run_pretraining` without ``out_dir``).

    ``<store>``: the folder name of :func:`store_dir` (``mlm-wiki`` for ``--corpus runs/corpus/wiki``; raw
    files: ``<name>-<hash>``, never the whole path), prefixed ``corpus-`` when it begins with a field name
    (a store called ``seed3`` is ``mlm-corpus-seed3``, never the bundled run ``mlm-seed3``).
    ``<overrides>``: :meth:`~nbkit.recipes.config_base.RecipeConfig.run_tag` (``-lr0.002-max_steps40``), so
    a run with other settings neither resumes nor overwrites another's checkpoints. Give ``cfg`` as built
    (before :func:`size`): the sizes fitted to a store are not overrides. The scale's recipe on the
    bundled text is ``runs/<scale>/mlm`` (notebook 03's default encoder).
    """
    import dataclasses

    from nbkit.pipeline.runs import pretrain_dir

    store = store_dir(cfg)
    part = ""
    if store is not None:
        name = store.name or "corpus"
        tagged = [f.name for f in dataclasses.fields(cfg) if f.name not in cfg.QUIET]
        part = "-" + ("corpus-" + name if any(name.startswith(f) for f in tagged) else name)
    return pretrain_dir(cfg.scale, part + cfg.run_tag())


def is_store(source) -> bool:
    """True when ``source`` is a prepared store's directory (not an in-memory ``DatasetDict``)."""
    return isinstance(source, (str, Path))


def tokenizer(cfg: PretrainConfig, source):
    """The store's own tokenizer for a store, else notebook 01's for ``cfg.scale`` (trained now if missing)."""
    if is_store(source):
        from nbkit.corpus.store import store_tokenizer

        return store_tokenizer(source)
    from nbkit.pipeline.artifacts import load_tokenizer
    from nbkit.pipeline.scale import get_scale

    return load_tokenizer(get_scale(cfg.scale))


def size(cfg: PretrainConfig, source, device: str | None = None) -> tuple[PretrainConfig, dict | None]:
    """``(cfg, plan)``: for a store with ``cfg.fit_to_corpus``, the model, batch, steps, lr, warm-up and
    evaluation interval of :func:`nbkit.pipeline.sizing.size_run` for its token count; fields you
    overrode stay, and ``smoke`` keeps its CI sizes (``plan["applied"]`` says which). Else ``(cfg, None)``.
    ``device``: ``"cuda"``/``"cpu"`` (None: CUDA when usable); under torchrun the plan is for its world size."""
    if not (is_store(source) and cfg.fit_to_corpus):
        return cfg, None
    from nbkit.pipeline.pretraining_text import store_summary
    from nbkit.pipeline.scale import cuda_usable
    from nbkit.pipeline.sizing import size_run
    from nbkit.train.ddp_loop import launch_world_size

    device = device or ("cuda" if cuda_usable() else "cpu")
    plan = size_run(store_summary(source)["n_tokens_train"], device, block_size=cfg.block_size,
                    max_passes=cfg.max_passes, world_size=launch_world_size())
    if cfg.scale == "smoke":
        plan["applied"] = "not applied: the smoke scale keeps its CI sizes"
        return cfg, plan
    mine = {k: plan[k] for k in ("model", "batch_size", "grad_accum_steps", "max_steps", "lr", "warmup_ratio",
                                 "eval_every")}
    kept = set(cfg.overrides()) & set(mine)
    plan["applied"] = "applied" + (f", except what you set: {', '.join(sorted(kept))}" if kept else "")
    return cfg.replace(**{k: v for k, v in mine.items() if k not in kept}), plan


def blocks(cfg: PretrainConfig, tok, source, rank: int = 0) -> dict:
    """``{"train", "validation"}`` MLM blocks of ``cfg.block_size`` tokens, ``[CLS] ... [SEP]``.

    Bundled mix: texts tokenized, concatenated and cut (:func:`nbkit.text.mlm.make_blocks`), with
    ``word_ids`` for whole-word masking. Store: :class:`nbkit.corpus.StoreMLMDataset` over both
    splits (random access from disk, constant memory). With ``NBKIT_BLOCK_LOG=DIR`` the training
    blocks of every batched fetch are appended to ``DIR/blocks-rank<rank>.jsonl`` (a debugging aid).
    """
    if is_store(source):
        from nbkit.pipeline.pretraining_text import store_blocks

        out = store_blocks(source, cfg.block_size)
    else:
        from nbkit.text import mlm

        out = {split: mlm.make_blocks(source[split], tok, cfg.block_size, words_column="words")
               for split in ("train", "validation")}
    out["train"] = _block_log(out["train"], rank)
    return out


class _BlockLog:
    """``data`` with every batched fetch (the training DataLoader's) logged to ``$NBKIT_BLOCK_LOG``."""

    def __init__(self, data, path: Path):
        self.data, self.path = data, path

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]

    def __getitems__(self, indices):
        with self.path.open("a", encoding="utf-8") as f:
            f.write(jsonio.dumps([int(i) for i in indices]) + "\n")
        getitems = getattr(self.data, "__getitems__", None)
        return getitems(indices) if getitems else [self.data[i] for i in indices]

    def __getattr__(self, name):   # block_size, n_tokens, sample_blocks, ...
        if name == "data":
            raise AttributeError(name)
        return getattr(self.data, name)


def _block_log(data, rank: int):
    target = os.environ.get("NBKIT_BLOCK_LOG")
    if not target:
        return data
    Path(target).mkdir(parents=True, exist_ok=True)
    return _BlockLog(data, Path(target) / f"blocks-rank{rank}.jsonl")
