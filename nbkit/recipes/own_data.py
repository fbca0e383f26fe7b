"""The own-data recipe (notebook 05): notebooks 01-03 on your labelled files and an optional corpus.

    cfg = OwnDataConfig.for_scale("cpu", train_file="reviews.csv", text_column="review", corpus_file="c.txt")
    labeled = ft.data(finetune_config(cfg))                          # your files, checked and split
    store = corpus_store(cfg, labeled)                               # corpus + training texts -> a token store
    pcfg = pretrain_config(cfg, store)                               # notebook 02's recipe on it
    fcfg = finetune_config(cfg)                                      # notebook 03's recipe on your labels
    ncfg = ner_config(cfg)                                           # notebook 07's on your tagged file (optional)

Pretraining never reads a validation or test text: they are the store's ``exclude_texts``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nbkit import jsonio
from nbkit.recipes.config import RecipeConfig
from nbkit.recipes.scales import constant


@dataclass(frozen=True, repr=False)
class OwnDataConfig(RecipeConfig):
    """Every setting of notebook 05; the pretraining and fine-tuning configs derive from it."""

    model: str
    max_length: int
    block_size: int
    vocab_size: int
    seed: int = 0
    train_file: str | None = None
    validation_file: str | None = None
    test_file: str | None = None
    text_column: str = "text"
    label_column: str = "label"
    corpus_file: str | list | None = None
    corpus_text_column: str = "text"
    pretrain: bool = True
    init: str | None = None
    max_passes: float = constant("own_data", "max_passes")   # its reason: nbkit/recipes/scales.py
    run_name: str = "own"
    ner_file: str | None = None

    RECIPE, STEP = "own_data", "own_data"
    HELP = {"scale": "smoke | cpu | gpu", "model": "BERT preset",
            "max_length": "tokens per text for fine-tuning, [CLS]/[SEP] included",
            "block_size": "tokens per MLM block", "vocab_size": "WordPiece target vocabulary of the store",
            "seed": "data split and training order",
            "train_file": "your labelled texts (.csv/.tsv/.jsonl/.json)",
            "validation_file": "None: 10 % drawn from train_file (by unique text, stratified)",
            "test_file": "None: 10 % drawn from train_file",
            "text_column": "the text column / JSON key", "label_column": "the label column (strings or integers)",
            "corpus_file": "unlabelled text for MLM (.txt/.jsonl/.json/.parquet, .gz/.zst, a folder); None: the "
                           "training texts only",
            "corpus_text_column": "JSON key / parquet column of corpus_file",
            "pretrain": "False: skip MLM pretraining, fine-tune from init (or random weights)",
            "init": "a published BERT masked LM to start from (a folder or Hub name): its tokenizer, continued "
                    "on your text; None: random weights of model",
            "max_passes": "MLM reads your text at most this many times",
            "run_name": "the run's folder under runs/<scale>/own_data/",
            "ner_file": "optional: your tagged file for named entities (CoNLL char<TAB>tag, BIO/BIOES, or JSONL "
                        "spans); None: that part is skipped"}
    QUIET = frozenset({"run_name", "train_file", "validation_file", "test_file", "text_column", "label_column",
                       "corpus_file", "corpus_text_column", "pretrain", "max_passes", "init", "ner_file"})   # run_name names the run

    def unused(self) -> dict[str, str]:
        """With ``init`` the checkpoint fixes the model and the vocabulary."""
        return {k: "init is set" for k in ("model", "vocab_size")} if self.init is not None else {}

    def run_dir(self) -> Path:
        """``runs/<scale>/own_data<overrides>/<run_name>`` (created)."""
        from nbkit.runs import step_dir

        path = step_dir(self.scale, self.STEP + self.run_tag()) / self.run_name
        path.mkdir(parents=True, exist_ok=True)
        return path


def finetune_config(cfg: OwnDataConfig, **overrides):
    """Notebook 03's recipe on your labels: task ``own`` with your files, ``model``, ``max_length``, ``seed``;
    every run starts over (``resume=False``: your data may have changed)."""
    from nbkit.recipes.finetuning import FinetuneConfig

    return FinetuneConfig.for_scale(
        cfg.scale, task="own", train_file=cfg.train_file, validation_file=cfg.validation_file,
        test_file=cfg.test_file, text_column=cfg.text_column, label_column=cfg.label_column, model=cfg.model,
        max_length=cfg.max_length, seed=cfg.seed, resume=False, **overrides)


def ner_config(cfg: OwnDataConfig, **overrides):
    """Notebook 07's recipe on your tagged file: task ``ner`` with ``train_file=cfg.ner_file`` (validation and
    test drawn from it, seeded), ``model``, ``max_length``, ``seed``; ``resume=False``.

    Raises:
        ConfigError: ``cfg.ner_file`` is None (the part is optional: check it first).
    """
    from nbkit.errors import ConfigError
    from nbkit.recipes.finetuning import FinetuneConfig

    if cfg.ner_file is None:
        raise ConfigError("ner_file=None: set it to your tagged file (CoNLL or JSONL spans) to train a tagger on it")
    return FinetuneConfig.for_scale(cfg.scale, task="ner", train_file=cfg.ner_file, model=cfg.model,
                                    max_length=cfg.max_length, seed=cfg.seed, resume=False, **overrides)


def pretrain_config(cfg: OwnDataConfig, store=None, **overrides):
    """Notebook 02's recipe on your text: ``store`` (:func:`corpus_store`) as its corpus, else the training
    texts alone (mix ``reviews``); ``model``, ``block_size``, ``seed``, ``max_passes``, ``init`` (then its
    continued-pretraining defaults); ``resume=False``."""
    from nbkit.recipes.pretraining import PretrainConfig

    text = {"corpus": str(store)} if store is not None else {"mix": (("reviews", 1.0),)}
    return PretrainConfig.for_scale(cfg.scale, model=cfg.model, block_size=cfg.block_size, seed=cfg.seed,
                                    split_seed=cfg.seed, max_passes=cfg.max_passes, resume=False, init=cfg.init,
                                    **text, **overrides)


def pretraining_texts(labeled, corpus=None, eval_fraction: float = 0.05, seed: int = 0):
    """``(splits, report)``: the labelled training texts plus ``corpus`` (a Dataset with ``text``, a list of str, or
    None) in memory, through :func:`nbkit.recipes.pretraining.pretraining_corpus` (mix ``reviews`` + ``own``); a
    corpus that does not fit: :func:`corpus_store`. Raises DataError when too few texts remain."""
    from nbkit.recipes.pretraining import pretraining_corpus

    mix = (("reviews", 1.0),) + ((("own", 1.0),) if corpus is not None else ())
    splits, mixed = pretraining_corpus(mix, labeled=labeled, texts=corpus, seed=seed,
                                       eval_fraction=eval_fraction, words=False)
    return splits, mixed.report


def corpus_store(cfg: OwnDataConfig, labeled, out_dir=None, heldout_share: float = 0.05, **settings) -> Path:
    """``cfg.corpus_file`` and the labelled *training* texts (written beside as ``labeled_train.jsonl``, rewritten
    only when they change) prepared into one token store (:func:`nbkit.corpus.prepare_corpus`, ``settings`` passed
    on), validation and test texts excluded, with a WordPiece of ``cfg.vocab_size`` or ``cfg.init``'s tokenizer.
    ``out_dir``: None is ``cfg.run_dir() / "corpus"``.

    Raises:
        ConfigError / DataError: what ``prepare_corpus`` raises (an unreadable format, no text kept).
    """
    from nbkit.atomic import atomic_file
    from nbkit.corpus import prepare_corpus
    from nbkit.models.bert import PRESETS

    out = Path(out_dir) if out_dir is not None else cfg.run_dir() / "corpus"
    out.parent.mkdir(parents=True, exist_ok=True)
    train_file = out.parent / "labeled_train.jsonl"
    lines = "".join(jsonio.dumps({cfg.corpus_text_column: t}) + "\n" for t in labeled.splits["train"]["text"])
    if not train_file.is_file() or train_file.read_text(encoding="utf-8") != lines:
        with atomic_file(train_file, what="labelled training texts") as tmp:
            tmp.write_text(lines, encoding="utf-8")
    evaluation = list(labeled.splits["validation"]["text"]) + list(labeled.splits["test"]["text"])
    files = cfg.corpus_file if isinstance(cfg.corpus_file, (list, tuple)) else [cfg.corpus_file]
    if cfg.init is not None:   # the checkpoint's tokenizer, nothing trained
        from nbkit.models.loading import resolve_checkpoint

        vocab = {"tokenizer": str(resolve_checkpoint(cfg.init))}
    else:
        vocab = {"vocab_size": cfg.vocab_size, "model_max_length": PRESETS[cfg.model]["max_position_embeddings"]}
    prepare_corpus([str(p) for p in files] + [str(train_file)], out, text_field=cfg.corpus_text_column,
                   heldout_share=heldout_share, exclude_texts=evaluation, overwrite=True, **vocab, **settings)
    return out
