"""The tokenizer recipe (notebook 01): bundled text -> Chinese-aware WordPiece -> coverage statistics.

    cfg = TokenizerConfig.for_scale("cpu")           # every decision, printed as a table
    train_texts, heldout = texts(cfg)                # news (95/5 by line) + the training reviews
    tok, stats = train(cfg, train_texts, heldout, cfg.run_dir())

Later steps read the scale's tokenizer through :func:`load`, which trains it when notebook 01 has not run.
"""
from __future__ import annotations

from dataclasses import dataclass

from nbkit.recipes.config import RecipeConfig


@dataclass(frozen=True, repr=False)
class TokenizerConfig(RecipeConfig):
    """Every setting of notebook 01's WordPiece training; build it with :meth:`for_scale`."""

    corpus_lines: int | None
    vocab_size: int
    model: str
    seed: int = 0
    eval_fraction: float = 0.05

    RECIPE = STEP = "tokenizer"
    HELP = {"scale": "smoke | cpu | gpu", "corpus_lines": "People's Daily lines read (None: all 19,484)",
            "vocab_size": "WordPiece target vocabulary (tokens); a small corpus gives fewer",
            "model": "BERT preset whose position table sets model_max_length",
            "seed": "the news lines' 95/5 split and the review split (notebook 03's seed)",
            "eval_fraction": "share of news lines held out for the [UNK] rate (0-1)"}
    ALL_MEANS_NONE = ("corpus_lines",)

    @property
    def model_max_length(self) -> int:
        """Positions of :attr:`model`'s preset (tokens): the longest input the tokenizer lets through."""
        from nbkit.models.bert import PRESETS

        return PRESETS[self.model]["max_position_embeddings"] if self.model in PRESETS else 512


def texts(cfg: TokenizerConfig) -> tuple[list[str], list[str]]:
    """``(train_texts, heldout_texts)``: People's Daily split 95/5 by line plus the training-split reviews
    (never validation/test: the text the model later reads); the held-out news measures coverage."""
    from nbkit.data import corpora

    splits = corpora.split_corpus(corpora.load_peoples_daily(max_lines=cfg.corpus_lines),
                                  eval_fraction=cfg.eval_fraction, seed=cfg.seed)
    reviews = corpora.load_sentiment(seed=cfg.seed).splits["train"]["text"]
    return list(splits["train"]["text"]) + list(reviews), list(splits["validation"]["text"])


def train(cfg: TokenizerConfig, train_texts, heldout_texts, out_dir) -> tuple:
    """``(tokenizer, stats)``: WordPiece (every character kept, :func:`nbkit.text.train_wordpiece`) trained on
    ``train_texts`` and measured on ``heldout_texts`` (``vocab_size``, ``unk_rate``, ``chars_per_token``, length
    percentiles), both written to ``out_dir``."""
    from nbkit.text import tokenizer as tokenization

    tok = tokenization.train_wordpiece(train_texts, vocab_size=cfg.vocab_size, out_dir=out_dir,
                                       model_max_length=cfg.model_max_length)
    stats = tokenization.tokenizer_stats(tok, heldout_texts)
    tokenization.save_stats(stats, out_dir)
    return tok, stats


def load(scale: str):
    """The scale's tokenizer (a ``PreTrainedTokenizerFast``): notebook 01's ``runs/<scale>/tokenizer``, trained now
    (and said so) if missing."""
    from transformers import AutoTokenizer

    from nbkit.runs import step_path

    path = step_path(scale, TokenizerConfig.STEP)
    if (path / "tokenizer.json").exists():
        return AutoTokenizer.from_pretrained(path)
    print(f"No tokenizer in {path} (notebook 01 not run at scale {scale!r}): training one now.")
    cfg = TokenizerConfig.for_scale(scale)
    tok, _ = train(cfg, *texts(cfg), cfg.run_dir())
    return tok
