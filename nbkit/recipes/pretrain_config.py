"""The pretraining recipe's settings: :class:`PretrainConfig`, its defaults per scale, and their table.

Every decision MLM pretraining makes is one field here, so notebook 02's cell that prints the config
shows all of them, and a benchmark changes one by an override (``PretrainConfig.for_scale("cpu",
lr=2e-3)``). The stages that read it are in :mod:`nbkit.recipes.pretraining`.
"""
from __future__ import annotations

from dataclasses import dataclass

from nbkit.recipes.config_base import RecipeConfig

#: config field -> the Scale field its default comes from; fields not listed: recipe constants
FROM_SCALE = {"scale": "name", "model": "model", "block_size": "block_size", "batch_size": "mlm_batch_size",
              "grad_accum_steps": "mlm_grad_accum", "max_steps": "mlm_steps", "lr": "mlm_lr",
              "eval_every": "mlm_eval_every", "seed": "seed", "split_seed": "seed", "mix": "mlm_mix",
              "corpus_lines": "corpus_lines", "max_train": "sentiment_max_train", "patience": "mlm_patience",
              "num_workers": "num_workers"}
ALL_MEANS_NONE = ("corpus_lines", "max_train", "eval_blocks")   # papermill passes "all" for None ("every line")


@dataclass(frozen=True, repr=False)
class PretrainConfig(RecipeConfig):
    """Every setting of BERT masked-LM pretraining; build it with :meth:`for_scale`.

    Fields (units in brackets):
        scale: the scale the defaults came from (``runs/<scale>/``, notebook 01's tokenizer).
        model: BERT preset (:data:`nbkit.models.bert.PRESETS`); block_size: tokens per block
            (``[CLS]``/``[SEP]`` included, at most the preset's positions).
        batch_size: blocks per micro-batch (per process under torchrun); grad_accum_steps:
            micro-batches per optimizer step; max_steps: optimizer steps in all.
        lr: peak learning rate; warmup_ratio: share of steps warming up (0-1); schedule: LR decay
            after warm-up (``linear``/``cosine``/``constant``); weight_decay: AdamW's.
        eval_every: steps between held-out evaluations; checkpoint_every: steps between
            checkpoints (None: ``eval_every``; 0: only the last); keep_last: checkpoints kept.
        patience: stop after this many evaluations without a lower held-out loss (None: never).
        mlm_probability: share of tokens chosen as targets (0-1; 80 % ``[MASK]``, 10 % random,
            10 % unchanged); whole_word: choose whole words (jieba/gold boundaries).
        precision: ``"auto"`` | ``"fp32"`` | ``"bf16"`` | ``"fp16"`` (:mod:`nbkit.train.precision`).
        seed: initial weights, data order, masking, the mix's shuffle and 95/5 split.
        split_seed: the sentiment split whose validation/test reviews are kept out (notebook 03's seed).
        corpus: None for the bundled ``mix``; else a prepared store or files/globs/folders to
            prepare (docs/corpus.md), which replace the mix and notebook 01's tokenizer.
        mix: ``(source, repeat weight)`` pairs (:data:`nbkit.pipeline.pretraining_text.SOURCES`).
        corpus_lines: People's Daily lines read (None: all); max_train: training reviews read (None: all).
        eval_fraction: share of texts held out for the MLM loss (0-1).
        eval_blocks: held-out blocks scored per evaluation (the first ones of the validation split,
            which a store chose by hash; None: all). A 2 GB corpus holds out ~55,000 blocks: scoring
            them all at every evaluation took 4 of the 5 minutes of a 30-step smoke run on 2 cores.
        max_passes: cap the steps at this many passes over the training blocks (None: no cap).
        fit_to_corpus: with ``corpus``, size model/steps/lr to its token count
            (:func:`nbkit.pipeline.sizing.size_run`; fields you override stay; never at ``smoke``).
        dropout: hidden and attention dropout (None: the preset's 0.1).
        num_workers: DataLoader workers; log_every: steps between log lines (None: ~20 per run).
        resume: continue from the newest checkpoint in the output directory; progress: a tqdm bar.
    """

    scale: str
    model: str
    block_size: int
    batch_size: int
    grad_accum_steps: int
    max_steps: int
    lr: float
    eval_every: int
    seed: int
    split_seed: int
    mix: tuple
    corpus_lines: int | None
    max_train: int | None
    patience: int | None = None
    num_workers: int = 0
    warmup_ratio: float = 0.06
    schedule: str = "linear"
    weight_decay: float = 0.01
    checkpoint_every: int | None = None
    keep_last: int = 2
    mlm_probability: float = 0.15
    whole_word: bool = True
    precision: str = "auto"
    corpus: str | list | None = None
    eval_fraction: float = 0.05
    eval_blocks: int | None = 4096
    max_passes: float | None = None
    fit_to_corpus: bool = True
    dropout: float | None = None
    log_every: int | None = None
    resume: bool = True
    progress: bool = True

    ALL_MEANS_NONE = ALL_MEANS_NONE
    QUIET = frozenset({"progress", "resume", "num_workers", "log_every", "corpus"})   # not in run_tag

    def unused(self) -> dict[str, str]:
        """With ``corpus`` the store replaces the bundled mix and its split (``mix``, ``corpus_lines``,
        ``max_train``, ``split_seed``, ``eval_fraction`` play no part); without, ``fit_to_corpus`` none."""
        if self.corpus is None:
            return {"fit_to_corpus": "no corpus"}
        return {k: "corpus is set" for k in ("mix", "corpus_lines", "max_train", "split_seed", "eval_fraction")}

    @classmethod
    def for_scale(cls, scale=None, **overrides) -> "PretrainConfig":
        """The recipe at ``scale`` (a :class:`nbkit.pipeline.scale.Scale`, its name, or None for ``$NBKIT_SCALE``).

        ``overrides`` (field=value) win; a ``None`` override keeps the default, so notebook
        parameters can be passed as they are (``corpus_lines="all"``: every line).

        Raises:
            ConfigError: an unknown field (naming the valid ones) or scale.
        """
        from nbkit.pipeline.params import resolve_scale

        sc = resolve_scale(scale)
        return cls(**{f: getattr(sc, s) for f, s in FROM_SCALE.items()}).replace(**overrides)

    def _base(self):
        return PretrainConfig.for_scale(self.scale)

    def _source(self, name):
        return FROM_SCALE.get(name)

    def _coerce(self, name, value):
        return tuple(map(tuple, value)) if name == "mix" else value
