"""Label names: ids, and the problems a label column can hide, reported at load time.

A classifier learns one class per distinct label string, so a label column's slips become
classes: ``"負面"`` (traditional) beside ``"负面"`` (simplified) is a 4th class of 4 rows that
no evaluation split holds, found only as a 0.000 row of the final report. This module looks
at the label names and the class counts once the splits are drawn and says so at load:

- names equal up to case or character width (NFKC + casefold): :func:`label_key`;
- names equal up to whitespace/punctuation inside them or traditional vs simplified Chinese
  characters: :func:`variant_key` (a small table of traditional characters common in label
  words, :data:`TRAD_TO_SIMP`; no dependency: a character missing from it only means no
  warning, never a wrong merge, since nothing is merged on this key);
- a class with fewer than :data:`RARE_MIN_TRAIN` training examples, or absent from a
  non-empty validation/test split (its scores there would be undefined);
- labels merged by normalisation (surrounding whitespace stripped: ``"负面 "`` -> ``"负面"``),
  a note with the row count (no warning: that merge is the intended one).

Each problem is one line of ``report["label_checks"]["problems"]`` and one ``UserWarning``.
"""
from __future__ import annotations

import unicodedata
import warnings
from collections import Counter
from typing import Any

#: Fewer training examples than this: a class the model can hardly learn, and a stratified
#: 80/10/10 split gives its validation/test share 0-1 examples (10 x 0.1 = 1), so its
#: per-class scores are noise. Ten is where both sides get at least one example.
RARE_MIN_TRAIN = 10

#: Traditional -> simplified for characters frequent in label words (sentiment, topics,
#: intents: 負面/中立/積極, 體育/財經/軍事/娛樂, ...). Pairs from the standard simplification
#: table (通用规范汉字表); only characters whose simplified form differs are listed.
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


def label_key(name: str) -> str:
    """Labels equal under this key differ only in case or width: NFKC, then ``str.casefold``."""
    return unicodedata.normalize("NFKC", name).casefold()


def variant_key(name: str) -> str:
    """:func:`label_key` without whitespace, punctuation or invisible characters, traditional
    characters of :data:`TRAD_TO_SIMP` made simplified (``"負 面。"`` -> ``"负面"``)."""
    kept = (TRAD_TO_SIMP.get(c, c) for c in label_key(name))
    return "".join(c for c in kept if unicodedata.category(c)[0] not in "ZPC")


def _groups(names: list[str], key) -> list[list[str]]:
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(key(name), []).append(name)
    return [g for g in groups.values() if len(g) > 1]


def _warn_case_collisions(names: list[str]) -> None:
    """Warn when label names differ only in case/width (they would become separate classes)."""
    clashes = _groups(names, label_key)
    if clashes:
        warnings.warn(f"Labels that differ only in case or character width become separate classes: "
                      f"{'; '.join(map(str, clashes))}. If each group is one class, normalise the label "
                      "column before loading (e.g. str.lower(), or unicodedata.normalize('NFKC', ...) for "
                      "full-width letters).", UserWarning, stacklevel=5)


def label_maps(labels: list, label2id: dict[str, int] | None) -> tuple[dict[str, int], Any]:
    """``label2id`` and a function raw label -> id, from the training labels.

    Integer labels ``0..k-1`` are kept; other integers are renumbered in
    increasing order (``"1".."5"`` stars -> ids 0..4) so ids stay contiguous,
    as classification heads and cross-entropy need. Strings are sorted.

    Raises:
        DataError: a given ``label2id`` lacks some of ``labels`` (listed).
    """
    from nbkit.errors import DataError

    if label2id is not None:
        unknown = sorted({str(v) for v in labels} - set(label2id))
        if unknown:
            raise DataError(f"Labels {unknown} are not in the given label2id {dict(label2id)}; "
                            "fix the labels or pass a label2id that includes them.")
        return dict(label2id), lambda raw: label2id[str(raw)]
    values = set(labels)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        ordered = [str(v) for v in sorted(values)]  # numeric order: 2 before 10
    else:
        ordered = sorted({str(v) for v in values})
        _warn_case_collisions(ordered)
    names = {name: i for i, name in enumerate(ordered)}
    # Look-ups go through str() so a "1" in a JSON validation file matches a CSV's 1.
    return names, lambda raw: names[str(raw)]


def check_labels(class_counts: dict[str, dict[str, int]], train_full: dict[str, int],
                 merged: dict[str, Counter]) -> dict:
    """The label problems of a loaded data set, each also warned (one ``UserWarning`` a line).

    Args:
        class_counts: split -> label -> examples (after the split, the report's ``class_counts``).
        train_full: label -> unique training examples before ``max_train`` (rarity is judged on
            the user's data, not on a smoke subsample).
        merged: split -> Counter of ``(raw label, label)`` pairs made equal by normalisation.

    Returns:
        ``{"problems": [str, ...], "merged": [{"split", "from", "to", "n_rows"}, ...],
        "rare_min_train": RARE_MIN_TRAIN}``.
    """
    problems = []
    names = [str(n) for n in class_counts["train"]]
    case = {frozenset(g) for g in _groups(names, label_key)}
    for group in _groups(names, variant_key):
        if frozenset(group) not in case:  # case/width-only groups are warned by label_maps
            sizes = ", ".join(f"{n!r}: {train_full.get(n, 0)}" for n in group)
            problems.append(f"Labels {sizes} look like variants of one label (spacing, punctuation or "
                            "traditional/simplified characters) and are separate classes; if they are one "
                            "class, map them to one spelling in the label column before loading.")
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
