"""Label problems are reported at load (rare, absent, variant, merged labels) and drops are located."""
from __future__ import annotations

import json
import warnings

import pytest

from nbkit.data import load_labeled_files
from nbkit.data.labeled import RARE_MIN_TRAIN, build_labeled_data, variant_key


def _texts(prefix, n):
    return [f"{prefix}第{i}条评论内容" for i in range(n)]


def _load(sources, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = build_labeled_data(sources, seed=1, **kw)
    return data, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_traditional_variant_and_rare_class_warn_at_load():
    texts = _texts("体育", 50) + _texts("财经", 50) + _texts("旧稿", 3)
    labels = ["体育"] * 50 + ["财经"] * 50 + ["體育"] * 3
    data, said = _load({"train": (texts, labels)})
    problems = data.report["label_checks"]["problems"]
    assert problems == said  # one warning per problem, the same lines in the report
    assert any("'體育'" in p and "'体育'" in p and "variants" in p for p in problems)
    assert any(p.startswith("Class '體育' has") and f"fewer than {RARE_MIN_TRAIN}" in p for p in problems)
    assert any("no example in the test split" in p and "體育" in p for p in problems)


def test_clean_three_class_data_has_no_label_problem():
    texts = _texts("甲", 40) + _texts("乙", 40) + _texts("丙", 40)
    data, said = _load({"train": (texts, ["正面"] * 40 + ["负面"] * 40 + ["中性"] * 40)})
    assert data.report["label_checks"]["problems"] == [] and said == []


def test_spacing_and_punctuation_variants_warn():
    texts = _texts("a", 30) + _texts("b", 30) + _texts("c", 30)
    labels = ["neg"] * 30 + ["pos"] * 30 + ["p o s."] * 30
    data, _ = _load({"train": (texts, labels)})
    assert any("'p o s.'" in p and "'pos'" in p for p in data.report["label_checks"]["problems"])
    assert variant_key("負 面。") == variant_key("负面") != variant_key("正面")


def test_labels_merged_by_stripping_are_noted():
    texts = _texts("x", 20) + _texts("y", 20)
    labels = ["差"] * 20 + ["好"] * 17 + [" 好"] * 3
    data, _ = _load({"train": (texts, labels)})
    assert data.num_labels == 2
    assert data.report["label_checks"]["merged"] == [{"split": "train", "from": " 好", "to": "好", "n_rows": 3}]


def test_class_absent_from_a_given_test_file_warns():
    train = (_texts("t", 30) + _texts("u", 30), ["A"] * 30 + ["B"] * 30)
    test = (_texts("v", 5), ["A"] * 5)
    data, said = _load({"train": train, "test": test}, val_fraction=0)
    assert any("['B'] have no example in the test split" in p for p in said)


def test_csv_drop_reasons_give_first_file_lines(tmp_path):
    rows = ["text,label"] + [f"评论{i},{'好' if i % 2 else '坏'}" for i in range(40)]
    rows += ["评论1,好", "评论1,好", "评论3,坏", ",好", "无标签评论,"]  # lines 42-46
    rows += [f"重复{i},好" for i in range(3)] + [f"重复{i},好" for i in range(8)]  # 47-49, dups on 50-52
    path = tmp_path / "f.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = load_labeled_files(path, seed=0).report["sources"]["train"]
    lines = src["drop_lines"]
    assert src["n_duplicates_dropped"] == 6 and lines["duplicate"] == [42, 43, 44, 50, 51]  # first 5 of 6
    assert lines["conflict"] == [5] and src["n_conflicts_dropped"] == 1  # 评论3 first on line 5
    assert lines["missing_text"] == [45] and lines["missing_label"] == [46]
    json.dumps(src)  # plain JSON


def test_jsonl_drop_lines_skip_blank_lines(tmp_path):
    recs = [{"text": f"句子{i}", "label": i % 2} for i in range(30)] + [{"text": "句子0", "label": 0}]
    body = "\n".join(json.dumps(r, ensure_ascii=False) for r in recs[:10]) + "\n\n" + \
        "\n".join(json.dumps(r, ensure_ascii=False) for r in recs[10:]) + "\n"
    path = tmp_path / "f.jsonl"
    path.write_text(body, encoding="utf-8")
    src = load_labeled_files(path, seed=0).report["sources"]["train"]
    assert src["drop_lines"]["duplicate"] == [32]  # 31 records, a blank line 11


@pytest.mark.parametrize("n", [RARE_MIN_TRAIN])
def test_a_class_with_enough_examples_is_not_rare(n):
    texts = _texts("p", 40) + _texts("q", n * 2)
    data, _ = _load({"train": (texts, ["p"] * 40 + ["q"] * n * 2)}, val_fraction=0.25, test_fraction=0.25)
    assert not any("training example" in p for p in data.report["label_checks"]["problems"])


def test_numbers_written_differently_warn_as_variants():
    """'1' and '01' (or '1.0') are separate classes, as written, and said to be one number."""
    texts = _texts("a", 30) + _texts("b", 30) + _texts("c", 12)
    data, said = _load({"train": (texts, ["1"] * 30 + ["2"] * 30 + ["01"] * 12)})
    assert data.label2id == {"01": 0, "1": 1, "2": 2}
    assert any("'1': " in p and "'01': " in p and "leading zeros" in p for p in said), said
    assert variant_key("01") == variant_key("1.0") == variant_key("+1") == variant_key("1") != variant_key("10")
    assert variant_key("1.5") != variant_key("15")
