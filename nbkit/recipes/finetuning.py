"""The fine-tuning recipe: labelled data -> tokens -> classifier -> training -> honest evaluation -> export.

One driver for every fine-tuning in nbkit: notebook 03 calls the stages cell by cell, notebook 05
on the user's files, ``python -m nbkit.jobs.finetune`` and ``bench/pretrain_value.py`` call
:func:`run_finetuning` or the same stages with overrides of :class:`FinetuneConfig`::

    cfg = FinetuneConfig.for_scale("cpu")                       # every decision, printed as a table
    labeled = data(cfg, "reviews")                             # deduplicated, split by unique text
    encoded, truncation = encode(cfg, tokenizer, labeled)      # and what the cut at max_length loses
    clf, how = model(cfg, tokenizer, labeled, pretrained=path)  # None: random weights of cfg.model
    loop, result = train(cfg, clf, tokenizer, encoded, out_dir)
    scores = evaluate(cfg, loop.model, tokenizer, labeled)     # test split + TF-IDF baselines
    export(cfg, loop.model, tokenizer, labeled, out_dir / "model")
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

from nbkit.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from nbkit.data.labeled import LabeledData
from dataclasses import dataclass

from nbkit.recipes.config import RecipeConfig

__all__ = ["FinetuneConfig", "data", "encode", "model", "train_config", "train", "evaluate", "export",
           "save", "run_finetuning"]


def data(cfg: FinetuneConfig, task="reviews") -> "LabeledData":
    """The labelled splits: ``task`` ``"reviews"``/``"news"`` (:func:`nbkit.recipes.tasks.load_task` with
    ``cfg.seed``, ``cfg.max_train``), or a :class:`~nbkit.data.labeled.LabeledData` (the user's, returned as is).

    Raises:
        ConfigError: unknown task. DataError: ``news`` without the optional package (says how to install it).
    """
    if not isinstance(task, str):
        return task
    from nbkit.recipes.tasks import load_task

    return load_task(task, seed=cfg.seed, max_train=cfg.max_train)


def tokenizer_for(cfg: FinetuneConfig, pretrained=None):
    """The tokenizer a run reads its text with: ``pretrained``'s own when given (a model directory or hub name,
    ``AutoTokenizer.from_pretrained``: a model pretrained on your corpus brings the tokenizer its ids belong
    to), else notebook 01's for ``cfg.scale`` (:func:`nbkit.recipes.tokenizer.load_tokenizer`, trained when
    missing). Raises ``OSError`` from transformers when ``pretrained`` holds no tokenizer files."""
    if pretrained is None:
        from nbkit.recipes.scale import get_scale
        from nbkit.recipes.tokenizer import load_tokenizer

        return load_tokenizer(get_scale(cfg.scale))
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(pretrained))


def encode(cfg: FinetuneConfig, tokenizer, labeled: "LabeledData",
           splits=("train", "validation", "test")) -> tuple[dict, dict]:
    """Token ids cut at ``cfg.max_length``: ``({split: Dataset}, {split: truncation report})``.

    Rows hold ``input_ids``/``attention_mask`` (unpadded) and ``labels``; each report has
    ``truncated_fraction`` (0-1), ``max_length`` and token-length percentiles
    (:func:`nbkit.text.mlm.encode_classification`). Splits that are empty or absent are skipped.
    """
    from nbkit.text.mlm import encode_classification

    encoded, truncation = {}, {}
    for split in splits:
        if split in labeled.splits and len(labeled.splits[split]):
            encoded[split], truncation[split] = encode_classification(labeled.splits[split], tokenizer, cfg.max_length)
    return encoded, truncation


def run_dir(cfg: FinetuneConfig, pretrained=None, step: str = "sentiment") -> Path:
    """The run's folder: ``runs/<scale>/<step><overrides>``, plus ``-from-<name>-<hash>`` when ``pretrained``
    names an encoder (``<name>``: its folder, ``mlm-wiki`` for ``runs/cpu/mlm-wiki/model``; ``<hash>``: 6 hex
    of its absolute path). So a run from another encoder never resumes, or overwrites, this one's
    checkpoints; ``pretrained=None`` (notebook 02's default encoder, or random weights) keeps the plain name."""
    from nbkit.runs import path_tag, step_dir

    tag = ""
    if pretrained is not None:
        where = Path(pretrained).expanduser()
        name = where.parent.name if where.name == "model" and where.parent.name else where.name
        key = str(where.resolve()) if where.exists() else str(pretrained)
        tag = "-from-" + path_tag(name, key, 6, fallback="encoder")
    return step_dir(cfg.scale, step + cfg.run_tag() + tag)


def encoder_identity(pretrained, cfg: FinetuneConfig) -> dict:
    """What a fine-tuning run starts from: ``{"source", "sha256"}`` of ``pretrained``'s weight files
    (``*.safetensors`` / ``*.bin`` in the folder; ~2 ms per MB), or ``{"source": None, "random": cfg.model}``."""
    if pretrained is None:
        return {"source": None, "random": cfg.model}
    where = Path(pretrained).expanduser()
    if not where.is_dir():
        return {"source": str(pretrained), "sha256": None}       # a hub name: its files are not ours to read
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
    has_checkpoints = any((out_dir / "checkpoints").glob("step-*"))
    if cfg.resume and has_checkpoints and path.is_file():
        before = jsonio.loads_strict(path.read_text(encoding="utf-8"))
        if before != ident:
            raise ConfigError(
                f"the checkpoints in {out_dir / 'checkpoints'} were trained from {before}, this run starts from "
                f"{ident}: resuming would report that run's result as this one's. Use another folder "
                f"(finetuning.run_dir(cfg, pretrained) names one per encoder), or resume=False to train anew here")
    jsonio.write_json(path, ident)


def model(cfg: FinetuneConfig, tokenizer, labeled: "LabeledData", pretrained=None, out_dir=None):
    """``(classifier, how)``: the encoder from ``pretrained`` (a checkpoint/model directory or hub name), else
    random weights of ``cfg.model``; a new head for the task's labels seeded with ``cfg.seed``; ``cfg.pooling``.

    ``out_dir``: the run's folder: the encoder's identity (:func:`encoder_identity`) is recorded there, and
    checkpoints in it that began from another encoder are not resumed (ConfigError) while ``cfg.resume``.

    Raises:
        ConfigError / CheckpointError: from :func:`nbkit.models.bert.build_classifier` (a tokenizer that
        is not the checkpoint's, a head of another label count, an unreadable checkpoint); ConfigError:
        ``out_dir`` holds checkpoints of another encoder.
    """
    from nbkit.models.bert import build_classifier

    if out_dir is not None:
        _check_encoder(cfg, Path(out_dir), encoder_identity(pretrained, cfg))
    return build_classifier(pretrained, num_labels=labeled.num_labels, id2label=labeled.id2label,
                            tokenizer=tokenizer, preset=cfg.model, seed=cfg.seed, pooling=cfg.pooling)


def train_config(cfg: FinetuneConfig, n_train: int, out_dir=None, world_size: int = 1):
    """The loop's :class:`nbkit.train.config.TrainConfig` for ``n_train`` training examples.

    Steps: ``cfg.max_steps``, else ``cfg.epochs`` passes at the global batch
    ``world_size * batch_size * grad_accum_steps`` (:func:`train` passes torchrun's world size:
    each rank reads ``1/world_size`` of every epoch). Evaluations/checkpoints: ``cfg.eval_every`` /
    ``cfg.checkpoint_every`` (None: 4 / 2 per run; 0, or no ``out_dir`` for checkpoints: none).
    """
    from nbkit.recipes.tokenizer import steps_for_epochs
    from nbkit.train import TrainConfig

    steps = cfg.max_steps or steps_for_epochs(n_train, cfg.batch_size * cfg.grad_accum_steps * world_size,
                                              cfg.epochs)
    every = lambda value, per_run: max(steps // per_run, 1) if value is None else (value or None)  # noqa: E731
    return TrainConfig(max_steps=steps, batch_size=cfg.batch_size, grad_accum_steps=cfg.grad_accum_steps,
                       lr=cfg.lr, warmup_ratio=cfg.warmup_ratio, scheduler=cfg.scheduler,
                       weight_decay=cfg.weight_decay, precision=cfg.precision, class_weights=cfg.class_weights,
                       eval_every=every(cfg.eval_every, 4),
                       checkpoint_every=every(cfg.checkpoint_every, 2) if out_dir is not None else None,
                       keep_last=cfg.keep_last, output_dir=None if out_dir is None else Path(out_dir),
                       seed=cfg.seed, num_workers=cfg.num_workers, group_by_length=cfg.group_by_length,
                       log_every=cfg.log_every or max(1, min(10, steps // 20)), resume=cfg.resume,
                       progress=cfg.progress)


def train(cfg: FinetuneConfig, classifier, tokenizer, encoded: dict, out_dir=None, callbacks=(), device=None):
    """Fine-tune with :class:`nbkit.train.Loop` (validation scored when ``encoded`` has it and evaluations are on).

    ``out_dir``: checkpoints under ``out_dir/checkpoints`` (resumed when ``cfg.resume``); None: none.
    Returns ``(loop, result)``; ``result.metrics`` has ``train_loss``, ``tokens_per_s``, ``eval_*`` ...
    and ``finetune_s`` (wall seconds of ``fit``).
    """
    from nbkit.text.mlm import classification_collator
    from nbkit.train import Loop
    from nbkit.train.ddp.group import launch_world_size

    tcfg = train_config(cfg, len(encoded["train"]), out_dir, world_size=launch_world_size())
    val = encoded.get("validation") if tcfg.eval_every else None
    loop = Loop(classifier, tcfg, encoded["train"], val, collate_fn=classification_collator(tokenizer),
                callbacks=list(callbacks), device=device)
    t0 = time.perf_counter()
    result = loop.fit()
    result.metrics["finetune_s"] = time.perf_counter() - t0
    return loop, result


def evaluate(cfg: FinetuneConfig, classifier, tokenizer, labeled: "LabeledData", splits=("test",),
             baseline: bool = True) -> dict:
    """Score ``splits`` (default the test split, used for nothing before) and, beside it, the TF-IDF baseline.

    Returns ``{"<split>_report": classification report (accuracy, macro_f1, per_class, confusion_matrix,
    ...), "<split>_pred": list[int]}`` per split, ``"report"`` (the last split's), and with ``baseline``:
    ``"baseline_report"`` (TF-IDF char 1-3-gram + LR on the full texts) and ``"baseline_cut_report"``
    (the same on each text cut where the model's tokenizer cuts it at ``cfg.max_length``, the fair
    comparison for long texts), both weighted like the model (``cfg.class_weights``), and ``"table"``
    (the three side by side, a DataFrame).
    """
    from nbkit.evaluate.baseline import baseline_at_cut, fit_tfidf_baseline
    from nbkit.evaluate.inference import predict
    from nbkit.evaluate.metrics import classification_report, compare_reports

    out, s = {}, labeled.splits
    for split in splits:
        pred = predict(classifier, tokenizer, s[split]["text"], max_length=cfg.max_length, batch_size=128)["label"]
        out[f"{split}_pred"] = [int(p) for p in pred]
        out[f"{split}_report"] = out["report"] = classification_report(s[split]["label"], pred, labeled.id2label)
    if baseline:
        split = splits[-1]
        weight = cfg.class_weights if isinstance(cfg.class_weights, str) else None
        full = fit_tfidf_baseline(s["train"]["text"], s["train"]["label"], class_weight=weight)
        out["baseline_report"] = classification_report(s[split]["label"], full.predict(s[split]["text"]),
                                                       labeled.id2label)
        cut = baseline_at_cut(labeled, tokenizer, cfg.max_length, splits=(split,), class_weight=weight)
        out["baseline_cut_report"] = cut[f"{split}_report"]
        out["table"] = compare_reports({"fine-tuned BERT": out["report"], "TF-IDF + LR (full text)":
                                        out["baseline_report"], f"TF-IDF + LR (same {cfg.max_length}-token cut)":
                                        out["baseline_cut_report"]})
    return out


def export(cfg: FinetuneConfig, classifier, tokenizer, labeled: "LabeledData", out_dir) -> Path:
    """One directory plain ``transformers`` loads (:func:`nbkit.models.export.export_classifier`), cut at ``cfg.max_length``."""
    from nbkit.models.export import export_classifier

    return export_classifier(classifier, tokenizer, out_dir, labeled.id2label, max_length=cfg.max_length)


def save(cfg: FinetuneConfig, out_dir, labeled: "LabeledData", truncation: dict, scores: dict, how: str,
         result, task: str = "reviews", world_size: int = 1) -> dict:
    """Write ``out_dir/metrics.json`` (strict JSON, atomic) and return it.

    Keys: ``scale``, ``task``, ``data_files`` (split -> path of the user's files,
    :func:`nbkit.data.load_labeled_files`'s ``report["files"]``; None for a bundled task),
    ``init`` (how the model was initialised), ``test_accuracy``,
    ``test_macro_f1``, ``baseline_accuracy``/``baseline_macro_f1`` (full text),
    ``baseline_cut_accuracy``/``baseline_cut_macro_f1`` (same cut), the data report's ``n_*`` counts,
    ``truncated_fraction`` per split, ``max_length``, ``per_class``, ``confusion_matrix``, ``warnings``
    (e.g. a model that predicts one class), ``config`` (every field), ``world_size`` (processes that trained)
    and the loop's summary under ``train``.
    """
    from nbkit import jsonio

    report, base, cut = scores["report"], scores.get("baseline_report"), scores.get("baseline_cut_report")
    metrics = {"scale": cfg.scale, "task": task, "data_files": labeled.report.get("files"), "init": how,
               "test_accuracy": report["accuracy"], "test_macro_f1": report["macro_f1"],
               "baseline_accuracy": base and base["accuracy"], "baseline_macro_f1": base and base["macro_f1"],
               "baseline_cut_accuracy": cut and cut["accuracy"], "baseline_cut_macro_f1": cut and cut["macro_f1"],
               **{k: v for k, v in labeled.report.items() if k.startswith("n_")},
               "truncated_fraction": {k: v["truncated_fraction"] for k, v in truncation.items()},
               "max_length": cfg.max_length, "class_weights": cfg.class_weights,
               "per_class": report["per_class"], "confusion_matrix": report["confusion_matrix"],
               "warnings": [w for w in (report.get("degenerate"),) if w],
               "config": cfg.to_dict(), "world_size": int(world_size), "train": result.metrics, "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    return jsonio.write_json(Path(out_dir) / "metrics.json", metrics)


def run_finetuning(cfg: FinetuneConfig, out_dir, *, pretrained=None, task="reviews", tokenizer=None,
                   callbacks=(), export_model: bool = False, task_name: str | None = None) -> dict:
    """Every stage end to end; returns the dict written to ``out_dir/metrics.json``.

    ``pretrained``: the encoder to start from (None: random weights of ``cfg.model``); ``task``: a
    name or a LabeledData; ``tokenizer``: None is :func:`tokenizer_for` (``pretrained``'s own, else
    notebook 01's for ``cfg.scale``). ``export_model``: also
    write ``out_dir/model`` (:func:`export`). ``task_name``: ``metrics.json``'s ``task`` (default: ``task``
    when a name, else ``"own"``). Under torchrun every rank trains; only rank 0 evaluates
    and writes (the others return the loop's summary). The returned dict adds ``"table"`` (a
    DataFrame, not in the file) on rank 0.
    """
    labeled = data(cfg, task)
    tokenizer = tokenizer if tokenizer is not None else tokenizer_for(cfg, pretrained)
    encoded, truncation = encode(cfg, tokenizer, labeled)
    classifier, how = model(cfg, tokenizer, labeled, pretrained, out_dir=out_dir)
    loop, result = train(cfg, classifier, tokenizer, encoded, out_dir, callbacks)
    if not loop.dist.is_main:
        return dict(result.metrics)
    scores = evaluate(cfg, loop.model, tokenizer, labeled)
    if export_model:
        export(cfg, loop.model, tokenizer, labeled, Path(out_dir) / "model")
    name = task_name or (task if isinstance(task, str) else "own")
    return {**save(cfg, out_dir, labeled, truncation, scores, how, result, task=name,
                   world_size=loop.dist.world_size), "table": scores["table"]}


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
        """The recipe at ``scale`` (a :class:`nbkit.recipes.scale.Scale`, its name, or None for ``$NBKIT_SCALE``).

        ``task`` (``"reviews"`` or ``"news"``) picks which of the scale's fields give the defaults
        (:data:`FROM_SCALE`, :data:`TASK_DEFAULTS`); ``overrides`` (field=value) win; a ``None``
        override keeps the default, so notebook parameters can be passed as they are
        (``max_train="all"``: the whole split).

        Raises:
            ConfigError: an unknown field or task, naming the valid ones.
        """
        from nbkit.recipes.params import resolve_scale

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
