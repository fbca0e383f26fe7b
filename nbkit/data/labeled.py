"""Labelled text cleaned and split by unique text (a random split of the raw reviews leaks duplicates).

Per source, ``n_raw = n_empty_dropped + n_duplicates_dropped + n_conflicts_dropped + n_overlap_dropped
+ kept``: invalid texts, duplicates, texts with two labels, validation/test texts also in training.
"""
from __future__ import annotations

import math
import re
import unicodedata
import warnings
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Sequence

from nbkit.data.textrule import check_text, repair_surrogates
from nbkit.errors import ConfigError, DataError

if TYPE_CHECKING:  # pragma: no cover
    import datasets

_WS = re.compile(r"\s+")
#: 1-based row numbers kept per drop reason and source (the counts stay exact)
MAX_LOCATIONS = 5
SPLITS = ("train", "validation", "test")


@dataclass
class LabeledData:
    """Train/validation/test splits of labelled texts plus what was dropped.

    Attributes:
        splits: ``DatasetDict`` ``train``/``validation``/``test``, columns ``text`` and ``label``
            (a ``ClassLabel``, ids ``0 .. num_labels-1``).
        label2id, id2label: name -> id and its inverse.
        report: the ``n_*`` drop counts, ``n_train``/``n_val``/``n_test``, ``class_counts`` per
            split, ``length_chars`` (p50/p95/max characters of training texts), ``sources``.
    """

    splits: "datasets.DatasetDict"
    label2id: dict[str, int]
    id2label: dict[int, str]
    report: dict = field(default_factory=dict)
    #: per split, the source each example came from: ``(source split, 1-based record row in it)`` per example;
    #: :func:`nbkit.data.load_labeled_files` turns them into :attr:`origins`
    rows: dict = field(default_factory=dict)
    #: per split, an :class:`ExampleOrigin` naming each example's file and line (set for files only)
    origins: dict = field(default_factory=dict)

    @property
    def num_labels(self) -> int:
        """``len(label2id)``."""
        return len(self.label2id)

    def summary(self) -> dict[str, Any]:
        """The scalar entries of ``report``, for ``metrics.json``."""
        return {k: v for k, v in self.report.items() if not isinstance(v, dict)}


@dataclass(frozen=True)
class ExampleOrigin:
    """Where each example of one split was read: ``origin(i)`` -> ``"reviews.csv line 12"`` (``unit`` ``record``
    where lines are unknown, e.g. a ``.json`` array). Picklable, so a DataLoader worker's copy of the dataset keeps
    it; a training dataset carries it as ``describe_example`` for the loop's non-finite-loss message."""

    file: str
    places: tuple[int, ...]
    unit: str = "line"

    def __call__(self, i: int) -> str:
        return f"{self.file} {self.unit} {self.places[i]}"


def normalize_text(text: str) -> str:
    """The deduplication key: whitespace runs collapsed to one space, stripped."""
    return _WS.sub(" ", text).strip()


def check_fractions(val: float, test: float, val_arg: str = "val_fraction", test_arg: str = "test_fraction") -> None:
    """Raise :class:`ConfigError` unless both shares are in ``[0, 1)`` and sum below 1 (``*_arg``: their names)."""
    if not (0 <= val < 1 and 0 <= test < 1 and val + test < 1):
        raise ConfigError(f"{val_arg}={val}, {test_arg}={test}: each must be in [0, 1) and their sum below 1 "
                          "(e.g. 0.1 and 0.1).")


def length_summary(lengths: list[int]) -> dict[str, int]:
    """``p50``, ``p95`` and ``max`` of ``lengths`` (characters; 0 for none)."""
    import numpy as np

    a = np.array(lengths or [0])
    return {"p50": int(np.percentile(a, 50)), "p95": int(np.percentile(a, 95)), "max": int(a.max())}


def _clean(texts: Sequence, labels: Sequence, name: str) -> tuple[dict[str, tuple[str, Any]], dict]:
    """``{key: (text, label)}`` in first-occurrence order without invalid texts, duplicates and
    contradictions, and the counts; ``drop_rows``: reason -> its first :data:`MAX_LOCATIONS` 1-based rows
    (a conflict: the text's first row). A missing or empty label counts as missing."""
    if len(texts) != len(labels):
        raise DataError(f"{name}: {len(texts)} texts but {len(labels)} labels; pass one label per text.")
    seen: dict[str, tuple[str, Any]] = {}
    first: dict[str, int] = {}  # key -> its first 1-based row
    conflicting: dict[str, None] = {}  # first-seen order
    rule: Counter = Counter()
    rows: dict[str, list[int]] = {r: [] for r in ("missing_label", "missing_text", "blank", "duplicate")}
    merged: Counter = Counter()
    for row, (raw, label) in enumerate(zip(texts, labels), start=1):
        if isinstance(label, str):
            given, label = label, repair_surrogates(label)[0].strip()
            if label != given and label:
                merged[given, label] += 1
        if label is None or (isinstance(label, float) and math.isnan(label)) or label == "":
            rows["missing_label"].append(row)
            continue
        text = check_text(raw, rule)
        if text is None:
            rows["blank" if isinstance(raw, str) else "missing_text"].append(row)
            continue
        text = text.strip()
        if isinstance(label, float) and label.is_integer():
            label = int(label)  # pandas turns an int column with gaps into floats
        key = normalize_text(text)
        if key in seen:
            rows["duplicate"].append(row)
            if str(seen[key][1]) != str(label):  # 1 and "1" are one label (label_maps looks up str())
                conflicting[key] = None
        else:
            seen[key], first[key] = (text, label), row
    for key in conflicting:
        del seen[key]
    rows["conflict"] = [first[k] for k in conflicting]
    n_no_label = len(rows["missing_label"])
    counts = {"n_raw": len(texts), "n_empty_dropped": rule["missing"] + rule["blank"] + n_no_label,
              "n_missing_dropped": rule["missing"] + n_no_label, "n_blank_dropped": rule["blank"],
              "n_repaired_surrogates": rule["repaired_surrogates"],
              "n_duplicates_dropped": len(rows["duplicate"]), "n_conflicts_dropped": len(conflicting),
              "drop_rows": {k: v[:MAX_LOCATIONS] for k, v in rows.items()}, "_first": first, "_merged": merged}
    return seen, counts


def _stratified_take(keys: list[str], ids: list[int], size: float | int, seed: int, what: str,
                     names: dict[int, str], after: str = "") -> tuple[list[str], list[str]]:
    """Split ``keys`` into (rest, taken) with ``size`` taken, stratified by ``ids`` (``names``: id -> label,
    for messages; ``after``: what was drawn from the texts before, e.g. ``" after drawing the test split"``).

    Raises:
        DataError: fewer taken than classes, or a class with a single example (named by its label).
    """
    from sklearn.model_selection import train_test_split

    counts = Counter(ids)
    arg = {"validation": "val_fraction", "test": "test_fraction"}.get(what, "max_train")
    if what != "max_train" and size < len(counts):  # sklearn's error would say to lower the fraction
        raise DataError(f"A stratified {what} split needs at least one example per class, but {arg} of "
                        f"{len(keys)} texts gives {size} for {len(counts)} classes; raise {arg}, add data, "
                        f"or pass a separate {what} file.")
    fix = "set max_train=None" if what == "max_train" else f"pass a separate {what} file"
    single = [i for i, n in sorted(counts.items()) if n < 2]
    if single:  # sklearn names them by id ("[0]") and says to lower the fraction, which cannot help
        listed = ", ".join(f"{names[i]!r} (1 example{after})" for i in single)
        one = len(single) == 1
        raise DataError(f"Cannot draw a stratified {what} split: class{'' if one else 'es'} {listed} "
                        f"{'is' if one else 'are'} too rare (a stratified split needs at least 2 examples of each "
                        f"class, one for each side). Add examples of {'it' if one else 'them'}, drop or relabel "
                        f"{'its' if one else 'their'} rows in the label column, or {fix}.")
    try:
        rest, taken = train_test_split(keys, test_size=size, stratify=ids, random_state=seed, shuffle=True)
    except ValueError as err:  # what remains is smaller than the number of classes
        fix = ("raise max_train to at least the number of classes" if what == "max_train" else
               f"lower the {what} fraction, or pass a separate {what} file")
        raise DataError(f"Cannot draw a stratified {what} split ({err}). Add examples of the rare "
                        f"classes, or {fix}.") from err
    return rest, taken


def build_labeled_data(
    sources: dict[str, tuple[Sequence, Sequence]],
    *,
    seed: int = 0,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    max_train: int | None = None,
    label2id: dict[str, int] | None = None,
) -> LabeledData:
    """Clean, deduplicate and split labelled texts into a :class:`LabeledData`.

    Args:
        sources: ``{"train": (texts, labels)}``, optionally ``"validation"``/``"test"``; splits not given are
            drawn from the unique training texts, stratified (test first, so both fractions are of the whole).
        seed: ``random_state`` of every split and subsample.
        val_fraction, test_fraction: shares (0-1) of the unique training texts; exactly 0 means no such split.
        max_train: stratified cap on the training split; validation and test stay complete.
        label2id: fixed name -> id (looked up by ``str(label)``); default from the training labels.

    Raises:
        ConfigError: fractions outside ``[0, 1)`` or summing to >= 1, ``max_train`` below 2, an unknown split.
        DataError: nothing left after cleaning, a single class, validation/test labels unseen in training, a
            class too rare to stratify, or a split left empty (named why).

    Warns:
        UserWarning: string labels differing only in case or width, and :func:`check_labels`'s problems.
    """
    import datasets

    check_fractions(val_fraction, test_fraction)
    if max_train is not None and max_train < 2:
        raise ConfigError(f"max_train={max_train}: use None (all) or at least 2 examples.")
    report: dict[str, Any] = {}
    cleaned: dict[str, dict[str, tuple[str, Any]]] = {}
    for split, (texts, labels) in sources.items():
        if split not in SPLITS:
            raise ConfigError(f"Unknown split {split!r}; use one of {SPLITS}.")
        cleaned[split], report[split] = _clean(texts, labels, split)
    first = {split: report[split].pop("_first") for split in report}
    merged = {split: report[split].pop("_merged") for split in report}
    train = cleaned["train"]
    if not train:
        raise DataError("No training examples left after dropping empty lines, duplicates and "
                        f"contradictions ({report['train']}). Check the text and label columns.")
    l2i, to_id = label_maps([lab for _, lab in train.values()], label2id)
    if len(set(to_id(lab) for _, lab in train.values())) < 2:
        raise DataError(f"The training data has a single class ({sorted(l2i)}); a classifier needs "
                        "at least two. Check the label column.")
    # User-given evaluation files: no text also in training, no unseen labels.
    for split in ("validation", "test"):
        if split not in cleaned:
            continue
        overlap = [k for k in cleaned[split] if k in train]
        for k in overlap:
            del cleaned[split][k]
        report[split]["n_overlap_dropped"] = len(overlap)
        report[split]["drop_rows"]["overlap"] = [first[split][k] for k in overlap[:MAX_LOCATIONS]]
        unseen = sorted({str(lab) for _, lab in cleaned[split].values()} - set(l2i))
        if unseen:
            keys = {label_key(name): name for name in l2i}
            near = {u: keys[label_key(u)] for u in unseen if label_key(u) in keys}
            pairs = ", ".join(f"{u!r} vs {t!r}" for u, t in near.items())
            hint = f" ({pairs} differ only in case/width)" if near else ""
            raise DataError(f"Labels in the {split} file never occur in training: {unseen}{hint}. "
                            f"Training labels are {sorted(l2i)}; fix or drop those rows.")
        if not cleaned[split]:
            raise DataError(_empty_file_split(split, report[split]))
    keys = list(train)
    ids = [to_id(train[k][1]) for k in keys]
    names = {i: name for name, i in l2i.items()}
    drawn: dict[str, list[str]] = {}
    for split, fraction in (("test", test_fraction), ("validation", val_fraction)):
        if split in cleaned:
            continue
        if fraction == 0:  # asked for: no such split
            drawn[split] = []
            continue
        size = round(fraction * len(train))  # a share of all unique training texts
        if size == 0 or size >= len(keys):
            raise DataError(_bad_drawn_split(split, fraction, len(train), size, len(set(ids))))
        after = " after drawing the test split" if drawn.get("test") else ""
        keys, drawn[split] = _stratified_take(keys, ids, size, seed, split, names, after)
        ids = [to_id(train[k][1]) for k in keys]
    n_train_full = len(keys)
    per_class = Counter(ids)
    train_full = {name: per_class[i] for name, i in l2i.items()}
    if max_train is not None and max_train < len(keys):
        drew = [s for s in ("test", "validation") if drawn.get(s)]
        after = f" after drawing the {' and '.join(drew)} split{'s' if len(drew) > 1 else ''}" if drew else ""
        _, keys = _stratified_take(keys, ids, max_train, seed, "max_train", names, after)
    pools = {"train": (keys, train)}
    for split in ("validation", "test"):
        pools[split] = (list(cleaned[split]), cleaned[split]) if split in cleaned else (drawn[split], train)

    id2label = {i: name for name, i in l2i.items()}
    features = datasets.Features({"text": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=[id2label[i] for i in range(len(l2i))])})
    columns = {split: {"text": [pool[k][0] for k in split_keys], "label": [to_id(pool[k][1]) for k in split_keys]}
               for split, (split_keys, pool) in pools.items()}
    out = {split: datasets.Dataset.from_dict(cols, features=features) for split, cols in columns.items()}
    source = {split: split if split in cleaned else "train" for split in pools}   # drawn splits come from train
    rows = {split: (source[split], [first[source[split]][k] for k in split_keys])
            for split, (split_keys, _) in pools.items()}
    report = _summarize(report, columns, id2label, n_train_full)
    report["label_checks"] = check_labels(report["class_counts"], train_full, merged)
    return LabeledData(datasets.DatasetDict(out), l2i, id2label, report, rows=rows)


def _empty_file_split(split: str, counts: dict) -> str:
    """Why a given validation/test file has no example left."""
    why = ", ".join(f"{counts[k]} {what}" for k, what in (
        ("n_overlap_dropped", "that also occur in training"), ("n_duplicates_dropped", "duplicates"),
        ("n_conflicts_dropped", "with contradicting labels"),
        ("n_empty_dropped", "empty, invisible-only or unlabelled"))
        if counts.get(k))
    return (f"The {split} split is empty: all {counts['n_raw']} rows of the {split} file were dropped ({why}). "
            f"Give a {split} file with other texts than the training file, or leave {split}=None to draw "
            f"{'val' if split == 'validation' else 'test'}_fraction of the training texts.")


def _bad_drawn_split(split: str, fraction: float, n_unique: int, size: int, n_classes: int) -> str:
    """Why a fraction draws no example, or every one, from training."""
    arg = "val_fraction" if split == "validation" else "test_fraction"
    if size > 0:  # the split would take every remaining training text
        return (f"{arg}={fraction} of {n_unique} unique training texts leaves no training examples; "
                "add training data or lower the fractions.")
    need = math.ceil((n_classes - 0.5) / fraction)
    while round(fraction * need) < n_classes:  # one per class (stratified); Python rounds 0.5 to 0
        need += 1
    return (f"The {split} split would be empty: {arg}={fraction} of {n_unique} unique training texts "
            f"rounds to 0. Add training data (at least {need} unique texts), raise {arg}, pass a {split} "
            f"file, or set {arg}=0 to go without a {split} split.")


def _summarize(per_source: dict, columns: dict, id2label: dict[int, str], n_train_full: int) -> dict:
    """Totals over the sources, split sizes, class counts, training text lengths (characters)."""
    import numpy as np

    keys = ("n_raw", "n_empty_dropped", "n_missing_dropped", "n_blank_dropped", "n_repaired_surrogates",
            "n_duplicates_dropped", "n_conflicts_dropped", "n_overlap_dropped")
    report = {k: sum(src.get(k, 0) for src in per_source.values()) for k in keys}
    report["sources"] = per_source
    report["n_train"], report["n_val"], report["n_test"] = (len(columns[s]["label"]) for s in SPLITS)
    report["n_train_before_max_train"] = n_train_full
    report["class_counts"] = {
        s: {id2label[i]: int(c) for i, c in enumerate(np.bincount(columns[s]["label"], minlength=len(id2label)))}
        for s in SPLITS}
    report["length_chars"] = length_summary([len(t) for t in columns["train"]["text"]])
    return report


#: Fewer training examples than this: a 10 % validation/test share holds 0-1 of the class, so its scores are noise.
RARE_MIN_TRAIN = 10

#: Traditional -> simplified (通用规范汉字表) for characters frequent in label words (負面, 體育, 財經, ...).
_TRAD = (
    "負極積錯對體財經軍娛樂時遊戲農業車國際會電視醫療藥學歷藝術話題問無關類別變劃點滿優質價貴壞評論義觀"
    "聽買賣務態飯廳環發貨運輸傳簡單準確語書讀寫認為開門機場東個們來說這還實現見長動產氣後萬與專號兩當從"
    "進隊線應該聯網絡報導聞區廣絕鬆緊熱涼髒亂舊興歡愛憤驚懼厭惡傷憂鬱喪張擔慮輕穩強漲險贊難過測試訓練驗"
    "證標籤種錢銀讓給陰陽廢差寵物歐亞亂險資訊衛範圍響頭腦紙筆鐘錶漢計劃畫議員職稅")
_SIMP = (
    "负极积错对体财经军娱乐时游戏农业车国际会电视医疗药学历艺术话题问无关类别变划点满优质价贵坏评论义观"
    "听买卖务态饭厅环发货运输传简单准确语书读写认为开门机场东个们来说这还实现见长动产气后万与专号两当从"
    "进队线应该联网络报导闻区广绝松紧热凉脏乱旧兴欢爱愤惊惧厌恶伤忧郁丧张担虑轻稳强涨险赞难过测试训练验"
    "证标签种钱银让给阴阳废差宠物欧亚乱险资讯卫范围响头脑纸笔钟表汉计划画议员职税")
TRAD_TO_SIMP = {t: s for t, s in zip(_TRAD, _SIMP, strict=True) if t != s}


#: a label written as a decimal number (:func:`variant_key` compares its value), and as an integer (numeric order)
_NUMBER = re.compile(r"[+-]?[0-9]+(\.[0-9]+)?")
_INTEGER = re.compile(r"-?[0-9]+")


def label_key(name: str) -> str:
    """NFKC then ``casefold``: labels equal under it differ only in case or width."""
    return unicodedata.normalize("NFKC", name).casefold()


def variant_key(name: str) -> str:
    """:func:`label_key` without spaces, punctuation or invisible characters, simplified (``"負 面。"`` -> ``"负面"``);
    a decimal number as its value (``"01"``, ``"1.0"``, ``"+1"`` -> ``"1"``)."""
    key = label_key(name).strip()
    if _NUMBER.fullmatch(key):
        return format(Decimal(key).normalize(), "f")
    kept = (TRAD_TO_SIMP.get(c, c) for c in key)
    return "".join(c for c in kept if unicodedata.category(c)[0] not in "ZPC")


def _groups(names: list[str], key) -> list[list[str]]:
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(key(name), []).append(name)
    return [g for g in groups.values() if len(g) > 1]


def case_variants(names: Sequence[str]) -> list[list[str]]:
    """The groups of ``names`` (labels, entity types) that differ only in case or character width (equal under
    :func:`label_key`: ``["PER", "per", "ＰＥＲ"]``), each in the order given; ``[]`` when none do."""
    return _groups(list(names), label_key)


def _warn_case_collisions(names: list[str]) -> None:
    """Warn about label names that differ only in case or width (separate classes)."""
    clashes = case_variants(names)
    if clashes:
        warnings.warn(f"Labels that differ only in case or character width become separate classes: "
                      f"{'; '.join(map(str, clashes))}. If each group is one class, normalise the label "
                      "column before loading (e.g. str.lower(), or unicodedata.normalize('NFKC', ...) for "
                      "full-width letters).", UserWarning, stacklevel=5)


def label_maps(labels: list, label2id: dict[str, int] | None) -> tuple[dict[str, int], Any]:
    """``(label2id, raw label -> id)`` from the training labels: integers (numbers, or digits as a CSV cell gives
    them) in numeric order renumbered to ``0..k-1`` (stars 1-5 -> 0-4; ``"01"`` just before ``"1"``), other labels
    as text sorted; DataError when a given ``label2id`` lacks some."""
    if label2id is not None:
        unknown = sorted({str(v) for v in labels} - set(label2id))
        if unknown:
            raise DataError(f"Labels {unknown} are not in the given label2id {dict(label2id)}; "
                            "fix the labels or pass a label2id that includes them.")
        return dict(label2id), lambda raw: label2id[str(raw)]
    values = {str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in labels}
    if all(isinstance(v, str) and _INTEGER.fullmatch(v) for v in values):
        ordered = sorted(values, key=lambda v: (int(v), v))  # numeric order: 2 before 10
    else:
        ordered = sorted({str(v) for v in values})
        _warn_case_collisions(ordered)
    names = {name: i for i, name in enumerate(ordered)}
    # Look-ups go through str() so a "1" in a JSON validation file matches a CSV's 1.
    return names, lambda raw: names[str(raw)]


def check_labels(class_counts: dict[str, dict[str, int]], train_full: dict[str, int],
                 merged: dict[str, Counter]) -> dict:
    """Label variants, rare classes (judged before ``max_train``) and classes absent from a split,
    each warned (``UserWarning``). ``merged``: split -> Counter of (raw, normalised) label pairs.

    Returns:
        ``{"problems": [str], "merged": [{"split", "from", "to", "n_rows"}], "rare_min_train"}``.
    """
    problems = []
    names = [str(n) for n in class_counts["train"]]
    case = {frozenset(g) for g in case_variants(names)}
    for group in _groups(names, variant_key):
        if frozenset(group) not in case:  # case/width-only groups are warned by label_maps
            sizes = ", ".join(f"{n!r}: {train_full.get(n, 0)}" for n in group)
            problems.append(f"Labels {sizes} look like variants of one label (spacing, punctuation, "
                            "traditional/simplified characters, or a number's leading zeros or decimals) and are "
                            "separate classes; if they are one class, map them to one spelling in the label "
                            "column before loading.")
    for name, n in train_full.items():
        if n < RARE_MIN_TRAIN:
            problems.append(f"Class {name!r} has {n} training example(s) (fewer than {RARE_MIN_TRAIN}): too few "
                            "to learn or score; add examples, merge it into another class, or drop its rows.")
    for split in ("validation", "test"):
        counts = class_counts.get(split, {})
        absent = [n for n, c in counts.items() if c == 0]
        if absent and sum(counts.values()):
            problems.append(f"Class(es) {absent} have no example in the {split} split, so their {split} scores "
                            f"are undefined; add examples of them, or give a {split} file that holds them.")
    notes = [{"split": s, "from": raw, "to": to, "n_rows": n}
             for s, pairs in merged.items() for (raw, to), n in sorted(pairs.items())]
    for p in problems:
        warnings.warn(p, UserWarning, stacklevel=4)
    return {"problems": problems, "merged": notes, "rare_min_train": RARE_MIN_TRAIN}
