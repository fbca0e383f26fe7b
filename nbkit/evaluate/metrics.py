"""Classification metrics (scikit-learn) in ``id2label`` order, as plain Python types for ``metrics.json``,
and tables for notebooks.

Macro-F1 averages the classes that occur in ``y_true`` or ``y_pred``: a class in neither has no F1
(0/0) and is listed under ``absent``; a class never predicted right is under ``zero_recall`` and warned.
"""
from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from nbkit.errors import DataError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def _as_int_array(values: Any, name: str):
    import numpy as np

    if hasattr(values, "detach"):  # a torch tensor, possibly on a GPU
        values = values.detach().cpu().numpy()
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise DataError(f"{name} must be 1-D label ids, got shape {arr.shape}; "
                        "for logits of shape (N, num_labels) pass logits.argmax(-1).")
    return arr.astype(int)


def classification_report(y_true: Sequence[int], y_pred: Sequence[int], id2label: Mapping[int, str]) -> dict:
    """Accuracy, macro-F1, per-class scores and the confusion matrix of ``(N,)`` label ids (list, array or
    tensor), classes in sorted ``id2label`` order.

    Returns:
        ``n``, ``accuracy`` and ``macro_f1`` (0-1), ``labels``, ``per_class`` (name -> ``precision``,
        ``recall``, ``f1``, 0 when undefined, and ``support``), ``confusion_matrix`` (nested list of
        counts, rows true, columns predicted), ``absent``, ``zero_recall`` and ``degenerate`` (why a
        classifier predicting one class for all is useless, else None).

    Warns:
        UserWarning: a class with recall 0, an absent class, a degenerate classifier.

    Raises:
        DataError: lengths differ, no examples, ids not in ``id2label``, or not 1-D.
    """
    import numpy as np
    from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support

    true, pred = _as_int_array(y_true, "y_true"), _as_int_array(y_pred, "y_pred")
    if len(true) != len(pred):
        raise DataError(f"y_true has {len(true)} labels but y_pred {len(pred)}; pass one prediction per example.")
    if len(true) == 0:
        raise DataError("No examples to evaluate; check that the evaluation split is not empty.")
    ids = sorted(int(i) for i in id2label)
    unknown = sorted(set(np.unique(np.concatenate([true, pred])).tolist()) - set(ids))
    if unknown:
        raise DataError(f"Label ids {unknown} are not in id2label {dict(id2label)}; "
                        "pass the id2label the model was trained with.")
    names = [str(id2label[i]) for i in ids]
    precision, recall, f1, support = precision_recall_fscore_support(
        true, pred, labels=ids, average=None, zero_division=0)
    cm = confusion_matrix(true, pred, labels=ids)
    seen = (cm.sum(axis=0) + cm.sum(axis=1)) > 0                     # (K,): in y_true or y_pred
    absent = [n for n, s in zip(names, seen) if not s]
    zero_recall = [n for n, r, s in zip(names, recall, support) if s > 0 and r == 0]
    _warn_classes(absent, zero_recall, names, cm)
    predicted = sorted(set(pred.tolist()))
    degenerate = None
    if len(true) > 1 and len(predicted) == 1 and len(set(true.tolist())) > 1:
        degenerate = (f"degenerate classifier: it predicts {names[ids.index(predicted[0])]!r} for all {len(true)} "
                      f"examples (accuracy {accuracy_score(true, pred):.3f} is the share of that class); train "
                      "longer, with a higher lr, or with TrainConfig(class_weights='balanced'), and compare with "
                      "the baseline")
        warnings.warn(degenerate, UserWarning, stacklevel=2)
    return {
        "n": int(len(true)),
        "accuracy": float(accuracy_score(true, pred)),
        "macro_f1": macro_f1(cm),                                     # the mean of f1[seen]
        "labels": names,
        "per_class": {name: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
                      for name, p, r, f, s in zip(names, precision, recall, f1, support)},
        "confusion_matrix": cm.tolist(),
        "absent": absent,
        "zero_recall": zero_recall,
        "degenerate": degenerate,
    }


def _warn_classes(absent: list, zero_recall: list, names: list, cm) -> None:
    for name in zero_recall:
        row = cm[names.index(name)]
        went = ", ".join(f"{names[j]} {int(c)}" for j, c in enumerate(row) if c)
        warnings.warn(f"class {name!r} has recall 0: none of its {int(row.sum())} examples was predicted as "
                      f"{name!r} (predicted: {went}). Accuracy hides this; with imbalanced classes train with "
                      "TrainConfig(class_weights='balanced') and compare macro-F1.", UserWarning, stacklevel=3)
    if absent:
        warnings.warn(f"classes {absent} occur neither in y_true nor in y_pred: they have no F1 (0/0) and are "
                      "left out of macro_f1 (listed in report['absent']).", UserWarning, stacklevel=3)


def format_report(report: dict, digits: int = 3) -> "pd.DataFrame":
    """A :func:`classification_report` as a ``DataFrame``: one row per class plus ``"macro avg"`` (over
    classes not absent), columns ``precision``, ``recall``, ``f1``, ``support``; accuracy and classes
    with recall 0 in the caption, accuracy also in ``df.attrs["accuracy"]``."""
    import pandas as pd

    df = pd.DataFrame.from_dict(report["per_class"], orient="index")[["precision", "recall", "f1", "support"]]
    seen = df.loc[[n for n in df.index if n not in report.get("absent", [])]]  # absent classes: no score
    df.loc["macro avg"] = [seen["precision"].mean(), seen["recall"].mean(), report["macro_f1"], df["support"].sum()]
    df["support"] = df["support"].astype(int)
    df = df.round(digits)
    df.attrs["accuracy"] = report["accuracy"]
    zero = report.get("zero_recall") or []
    df.index.name = f"accuracy {report['accuracy']:.{digits}f} (n={report['n']})" + (
        f"; recall 0: {', '.join(zero)}" if zero else "")
    return df


def compare_reports(reports: Mapping[str, dict], digits: int = 3) -> "pd.DataFrame":
    """``accuracy``, ``macro_f1`` and ``n`` per model (name -> :func:`classification_report`) as a ``DataFrame``."""
    import pandas as pd

    rows = {name: {"accuracy": r["accuracy"], "macro_f1": r["macro_f1"], "n": r["n"]} for name, r in reports.items()}
    return pd.DataFrame.from_dict(rows, orient="index").round(digits)


def macro_f1(confusion) -> float:
    """Macro-F1 (0-1) of a (C, C) count matrix (rows true, columns predicted; tensor or array): the mean of
    2 TP / (2 TP + FP + FN) over classes with an example or a prediction; NaN when there is none."""
    import numpy as np

    cm = np.asarray(confusion.detach().cpu() if hasattr(confusion, "detach") else confusion, dtype=np.float64)
    tp = np.diag(cm)
    denom = cm.sum(0) + cm.sum(1)                                     # 2 TP + FP + FN, per class
    seen = denom > 0
    return float(np.mean(2 * tp[seen] / denom[seen])) if seen.any() else math.nan
