"""The one text-validity rule (nbkit.data.textrule): drops, repairs, long-text cuts."""
from collections import Counter

import pytest

from nbkit.data.textrule import check_text, is_blank, repair_surrogates, split_long


@pytest.mark.parametrize("value", ["\u2060\u200d", " \u3000\t", "\ufeff", "\x00\x1f", "", "\u2028"])
def test_invisible_only_texts_are_blank(value):
    counts = Counter()
    assert check_text(value, counts) is None
    assert counts == {"blank": 1}


@pytest.mark.parametrize("value", [None, float("nan"), 3, b"bytes"])
def test_missing_values(value):
    counts = Counter()
    assert check_text(value, counts) is None
    assert counts == {"missing": 1}


def test_lone_surrogate_repaired_and_counted():
    counts = Counter()
    out = check_text("好\ud83d评", counts)
    assert out == "好\ufffd评"
    assert counts == {"repaired_surrogates": 1}
    out.encode("utf-8")  # encodable now
    assert repair_surrogates("正常") == ("正常", 0)


def test_visible_text_kept_unchanged():
    assert check_text(" 质量很好 ") == " 质量很好 "
    assert not is_blank("\u200d好")


def test_split_long_prefers_sentence_ends_and_round_trips():
    text = "今天天气很好。" * 30 + "没有标点的长句子" * 50
    pieces = split_long(text, 100)
    assert "".join(pieces) == text
    assert all(len(p) <= 100 for p in pieces)
    assert pieces[0].endswith("。")  # cut at a sentence end where the window has one
    assert split_long("短", 10) == ["短"]
    with pytest.raises(ValueError):
        split_long("x", 0)


def test_split_long_hard_cut_without_punctuation():
    pieces = split_long("字" * 1005, 100)
    assert [len(p) for p in pieces] == [100] * 10 + [5]
