"""Token classification: a BIO tag per character (named entities: People's Daily 1998 or your tagged files), a
token classifier scored by entity-level F1 beside a CRF."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from nbkit.tasks import Task

if TYPE_CHECKING:  # pragma: no cover
    from nbkit.data.ner import NerData

#: the fields only sentence classification reads (tokens and tags are the files' own; no pooling per token)
SENTENCE_FIELDS = ("text_column", "label_column", "pooling", "class_weights")


class TokenTask(Task):
    """Named entities (task ``ner``)."""

    name, headline, rows, files = "ner", "entity_f1", "finetuning/ner", "tagged"
    about = "named entities: People's Daily 1998, or your tagged train_file"

    def unused(self, cfg) -> dict[str, str]:
        """The sentence fields; ``corpus_lines`` with a ``train_file``, the other files and ``span_offsets``
        without one (People's Daily)."""
        out = {k: f"task {self.name}" for k in SENTENCE_FIELDS}
        if cfg.train_file is not None:
            return {**out, "corpus_lines": "train_file is set"}
        return {**out, **{k: "People's Daily (no train_file)" for k in ("validation_file", "test_file",
                                                                         "span_offsets")}}

    def step(self, cfg) -> str:
        """``ner``, or ``ner-own-<train file stem>-<hash of the files>``."""
        return "ner" if cfg.train_file is None else self.files_step("ner-own-", cfg)

    def data(self, cfg) -> "NerData":
        """``cfg.train_file`` (+ validation/test files) through :func:`nbkit.data.ner.load_ner_files`, else
        People's Daily 1998 (``cfg.corpus_lines`` lines), seeded with ``cfg.seed``; ``cfg.max_train``: the first
        that many training sentences. Raises the loader's DataError (file and line named)."""
        from nbkit.data import ner

        if cfg.train_file is not None:
            out = ner.load_ner_files(cfg.train_file, validation=cfg.validation_file, test=cfg.test_file,
                                     seed=cfg.seed, offsets=cfg.span_offsets)
        else:
            out = ner.load_peoples_daily_ner(lines=cfg.corpus_lines, seed=cfg.seed)
        return out if cfg.max_train is None else out.keep_train(cfg.max_train)

    def encode(self, cfg, tok, labeled: "NerData", splits) -> tuple[dict, dict]:
        """Windows of at most ``cfg.max_length`` sub-tokens over each sentence (``cfg.stride`` shared;
        :func:`nbkit.text.token_classification.encode_token_classification`), labels per sub-token; each report
        has ``n_windows``, ``n_windowed`` (sentences in more than one window) and ``truncated_fraction`` 0."""
        from nbkit.text.token_classification import encode_token_classification

        encoded, truncation, label2id = {}, {}, {name: i for i, name in enumerate(labeled.labels)}
        for split in splits:
            if len(labeled.splits.get(split) or ()):
                enc = encode_token_classification(labeled.splits[split], tok, label2id, cfg.max_length, cfg.stride)
                encoded[split], truncation[split] = enc.dataset, {**enc.report, "truncated_fraction": 0.0}
        return encoded, truncation

    def collator(self, tok):
        """Pads windows and their labels (:func:`nbkit.text.token_classification.token_classification_collator`)."""
        from nbkit.text.token_classification import token_classification_collator

        return token_classification_collator(tok)

    def build(self, source, cfg, tok, id2label: dict[int, str]):
        """``(token classifier, how)``: a head per token (:func:`nbkit.models.bert.build_classifier`)."""
        from nbkit.models.bert import build_classifier

        return build_classifier(source, num_labels=len(id2label), id2label=id2label, tokenizer=tok,
                                preset=cfg.model, seed=cfg.seed, head="token")

    def evaluate(self, cfg, classifier, tok, labeled: "NerData", splits=("test",),
                 baseline: bool = True, out_dir=None) -> dict:
        """:func:`evaluate_ner` on the last of ``splits``; with ``out_dir`` the CRF is saved in ``out_dir/crf``."""
        return evaluate_ner(cfg, classifier, tok, labeled, split=splits[-1], baseline=baseline,
                            crf_dir=None if out_dir is None else Path(out_dir) / "crf")

    def metrics(self, cfg, out_dir: Path, loop, labeled: "NerData", truncation: dict,
                scores: dict) -> dict:
        """``metrics.json``'s task keys: ``test_entity_f1`` / ``_precision`` / ``_recall`` (micro, 0-1; null where
        undefined: a test split without entities, said in ``test_entity_undefined``), ``test_entity_f1_interval``
        ([low, high] or null), ``per_type``, the same ``baseline_*`` for the CRF (``baseline_model``: its saved
        folder), ``diff_entity_f1`` (BERT - CRF: ``value``, ``low``, ``high``, paired over the same test
        sentences), ``types``, ``windows`` (the test encoding's counts), ``windows_per_split``, ``n_errors``
        (missed / spurious), ``stride``, ``n_boot``."""
        report, base, errors = scores["report"], scores.get("baseline_report"), scores["errors"]
        crf = Path(out_dir) / "crf"
        interval = lambda key: list(scores[key]) if scores.get(key) else None  # noqa: E731
        return {"test_entity_f1": report["f1"], "test_entity_precision": report["precision"],
                "test_entity_recall": report["recall"], "test_entity_f1_interval": interval("interval"),
                "test_entity_undefined": report.get("undefined"), "per_type": report.get("per_type"),
                "baseline": "CRF (python-crfsuite) over character-window features",
                "baseline_model": str(crf) if crf.is_dir() else None,
                "baseline_entity_f1": base and base["f1"], "baseline_entity_precision": base and base["precision"],
                "baseline_entity_recall": base and base["recall"],
                "baseline_entity_f1_interval": interval("baseline_interval"),
                "baseline_per_type": base and base.get("per_type"), "diff_entity_f1": scores.get("diff"),
                "types": list(labeled.types), "windows": scores["windows"],
                "windows_per_split": {k: v["n_windows"] for k, v in truncation.items()},
                "n_errors": {k: int((errors["kind"] == k).sum()) for k in ("missed", "spurious")},
                "stride": cfg.stride, "n_boot": cfg.n_boot}

    def export(self, cfg, classifier, tok, out_dir, id2label: dict[int, str]) -> Path:
        """A folder ``pipeline("token-classification")`` loads, reading and windowing text as training and scoring
        did (:func:`nbkit.models.export.export_token_classifier`)."""
        from nbkit.models.export import export_token_classifier

        return export_token_classifier(classifier, tok, out_dir, id2label, max_length=cfg.max_length,
                                       stride=cfg.stride)

    def describe(self, labeled: "NerData", truncation: dict) -> str:
        """What loading repaired, dropped and kept and what the windows cut (:func:`nbkit.data.ner.report_text`)."""
        from nbkit.data.ner import report_text

        return report_text(labeled.report, truncation)


NER = TokenTask()


def evaluate_ner(cfg, classifier, tok, labeled: "NerData", split: str = "test",
                 baseline: bool = True, baseline_pred: list | None = None, crf_dir=None) -> dict:
    """Entity-level scores of the token classifier on ``split`` and, beside it, the CRF baseline on the same
    sentences (trained on the same training split; whole sentences, nothing cut for either).

    The model tags every character through the call a user makes on the export
    (:func:`nbkit.evaluate.inference.predict_tags`), so every gold entity is scored. Returns ``"pred"`` (tags per
    sentence; also as ``"<split>_pred"``), ``"report"`` (:func:`nbkit.evaluate.ner.entity_scores`), ``"interval"``
    (bootstrap 95 % interval of the F1, ``cfg.n_boot`` resamples), ``"windows"`` (the encoding's counts), with
    ``baseline`` the same for the CRF (``"baseline_pred"``, ``"baseline_report"``, ``"baseline_interval"``) and
    ``"diff"`` (:func:`nbkit.evaluate.ner.entity_f1_diff`, BERT - CRF), ``"table"``
    (:func:`nbkit.evaluate.ner_report.scores_table`) and ``"errors"`` (the model's missed and spurious entities,
    :func:`nbkit.evaluate.ner_report.entity_errors`). ``baseline_pred``: the CRF's tags on ``split`` when already
    made (notebook 07 trains it before BERT), else it is trained here and, with ``crf_dir``, saved there. A split
    without gold entities warns (``UserWarning``): its F1 is undefined.
    """
    from nbkit.evaluate import ner
    from nbkit.evaluate.inference import predict_tags
    from nbkit.evaluate.ner_report import entity_errors, scores_table

    items = labeled.splits[split]
    gold = [list(it["tags"]) for it in items]
    pred, windows = predict_tags(classifier, tok, items, dict(enumerate(labeled.labels)), cfg.max_length, cfg.stride,
                                 batch_size=64)
    out = {"pred": pred, f"{split}_pred": pred, "report": ner.entity_scores(gold, pred), "windows": windows,
           "interval": ner.entity_f1_interval(gold, pred, n_boot=cfg.n_boot, seed=cfg.seed)}
    results = {"fine-tuned BERT": {"scores": out["report"], "interval": out["interval"]}}
    if baseline:
        crf = baseline_pred if baseline_pred is not None else ner.crf_baseline(labeled.splits["train"], items,
                                                                                save_to=crf_dir)
        out.update(baseline_pred=crf, baseline_report=ner.entity_scores(gold, crf),
                   baseline_interval=ner.entity_f1_interval(gold, crf, n_boot=cfg.n_boot, seed=cfg.seed))
        results["CRF (character windows)"] = {"scores": out["baseline_report"], "interval": out["baseline_interval"]}
        out["diff"] = ner.entity_f1_diff(gold, pred, crf, n_boot=cfg.n_boot, seed=cfg.seed)   # paired, same sentences
    out["table"] = scores_table(results)
    out["errors"] = entity_errors([list(it["tokens"]) for it in items], gold, pred)
    if out["report"]["undefined"]:
        warnings.warn(f"{split} split: {out['report']['undefined']}", UserWarning, stacklevel=2)
    return out
