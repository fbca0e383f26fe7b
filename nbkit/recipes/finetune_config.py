"""The fine-tuning recipe's settings: :class:`FinetuneConfig`, its defaults per scale, and their table.

Every decision the fine-tuning step makes is one field here, so a notebook cell that prints the
config shows all of them, and a benchmark changes one by an override
(``FinetuneConfig.for_scale(scale, lr=1e-3)``). The stages that read it are in
:mod:`nbkit.recipes.finetuning`.
"""
from __future__ import annotations

from dataclasses import dataclass

from nbkit.errors import ConfigError
from nbkit.recipes.config_base import RecipeConfig

#: task -> {config field: the Scale field its default comes from}; fields not listed: recipe constants
FROM_SCALE = {
    "reviews": {"scale": "name", "model": "model", "max_length": "cls_max_length", "batch_size": "cls_batch_size",
                "epochs": "cls_epochs", "lr": "cls_lr", "pooling": "cls_pooling", "seed": "seed",
                "max_train": "sentiment_max_train", "num_workers": "num_workers"},
}
# news (notebook 03's second task): the reviews recipe with its own length, passes and size, the loss
# weighted by inverse class frequency (unweighted it all but ignores the 10 % positive class:
# bench/results/pretrain_value_news vs pretrain_value_news_balanced), and no mid-run evaluation (time)
FROM_SCALE["news"] = {**FROM_SCALE["reviews"], "max_length": "news_max_length", "epochs": "news_epochs",
                      "max_train": "news_max_train"}
ALL_MEANS_NONE = ("max_train", "max_steps")   # papermill passes "all" for None ("the whole split")
TASK_DEFAULTS = {"reviews": {}, "news": {"class_weights": "balanced", "eval_every": 0}}


@dataclass(frozen=True, repr=False)
class FinetuneConfig(RecipeConfig):
    """Every setting of sentiment (sequence-classification) fine-tuning; build it with :meth:`for_scale`.

    Fields (units in brackets):
        scale: name of the scale the defaults came from (``runs/<scale>/``, the tokenizer to load).
        model: BERT preset (:data:`nbkit.models.bert.PRESETS`) when starting without a checkpoint.
        max_length: tokens per text, ``[CLS]``/``[SEP]`` included; longer texts are cut (and counted).
        batch_size: texts per micro-batch (per process under torchrun).
        grad_accum_steps: micro-batches per optimizer step.
        epochs: passes over the training split; sets the steps unless ``max_steps`` is given.
        max_steps: optimizer steps in all, or None (from ``epochs``).
        lr: peak learning rate; warmup_ratio: share of steps warming up (0-1); scheduler: LR decay
            after warm-up (``linear``/``cosine``/``constant``); weight_decay: AdamW's.
        pooling: classifier input: ``"mean"`` of the token states (what MLM-only pretraining trains)
            or ``"cls"`` (BERT's pooler, untrained without next-sentence prediction).
        class_weights: None, ``"balanced"`` (``n / (K n_c)``, also for the TF-IDF baseline) or a list.
        seed: data split, subsample, new head's weights, data order, dropout.
        max_train: training examples kept after cleaning (None: all).
        precision: ``"auto"`` | ``"fp32"`` | ``"bf16"`` | ``"fp16"`` (:mod:`nbkit.train.precision`).
        eval_every: steps between validation evaluations; None: 4 per run; 0: none.
        checkpoint_every: steps between checkpoints; None: 2 per run; 0: none (also without an output dir).
        keep_last: checkpoints kept; group_by_length: batch texts of similar length (less padding).
        num_workers: DataLoader workers; log_every: steps between log lines (None: about 20 per run).
        resume: continue from the newest checkpoint in the output directory; progress: a tqdm bar.
    """

    scale: str
    model: str
    max_length: int
    batch_size: int
    epochs: float
    lr: float
    pooling: str
    seed: int
    max_train: int | None
    grad_accum_steps: int = 1
    max_steps: int | None = None
    warmup_ratio: float = 0.1
    scheduler: str = "linear"
    weight_decay: float = 0.01
    class_weights: str | list | None = None
    precision: str = "auto"
    eval_every: int | None = None
    checkpoint_every: int | None = None
    keep_last: int = 1
    group_by_length: bool = True
    num_workers: int = 0
    log_every: int | None = None
    resume: bool = True
    progress: bool = True

    ALL_MEANS_NONE = ALL_MEANS_NONE
    QUIET = frozenset({"progress", "resume", "num_workers", "log_every"})   # how a run shows, not what it trains: not in run_tag

    @classmethod
    def for_scale(cls, scale=None, task: str = "reviews", **overrides) -> "FinetuneConfig":
        """The recipe at ``scale`` (a :class:`nbkit.pipeline.scale.Scale`, its name, or None for ``$NBKIT_SCALE``).

        ``task`` (``"reviews"`` or ``"news"``) picks which of the scale's fields give the defaults
        (:data:`FROM_SCALE`, :data:`TASK_DEFAULTS`); ``overrides`` (field=value) win; a ``None``
        override keeps the default, so notebook parameters can be passed as they are
        (``max_train="all"``: the whole split).

        Raises:
            ConfigError: an unknown field or task, naming the valid ones.
        """
        from nbkit.pipeline.params import resolve_scale

        if task not in FROM_SCALE:
            raise ConfigError(f"task={task!r}: the recipe has defaults for {', '.join(FROM_SCALE)}; for your own "
                              "data pass task='reviews' (the general recipe) and a LabeledData to the stages")
        sc = resolve_scale(scale)
        values = {f: getattr(sc, s) for f, s in FROM_SCALE[task].items()}
        values.update(TASK_DEFAULTS[task])
        return cls(**values).replace(**overrides)

    def _base(self, task: str = "reviews"):
        return FinetuneConfig.for_scale(self.scale, task=task) if task in FROM_SCALE else None

    def _source(self, name, task: str = "reviews"):
        return FROM_SCALE.get(task, {}).get(name)
