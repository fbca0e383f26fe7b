"""D06: one validity rule (nbkit.data.textrule) at load, encode and predict; a bad JSON record is
located by its 1-based line and repaired or skipped, the rest of the file kept; counts per split."""
import json
import warnings

import pytest

from nbkit.data.userfiles import load_labeled_files, load_text_file
from nbkit.errors import ConfigError, DataError


def _rows(n, start=0):
    return [{"text": f"第{i}条评论，质量{'好' if i % 2 else '差'}", "label": "好" if i % 2 else "差"}
            for i in range(start, start + n)]


def _jsonl(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_lone_surrogate_is_repaired_counted_and_located_by_1_based_line(tmp_path):
    lines = [json.dumps(r, ensure_ascii=False) for r in _rows(30)]
    lines[11] = '{"text": "\\ud83c 表情坏了也要留下", "label": "好"}'     # line 12, half an emoji escape
    path = _jsonl(tmp_path / "train.jsonl", lines)
    with pytest.warns(UserWarning, match=r"lone surrogate.*line 12\b"):
        d = load_labeled_files(path, val_fraction=0.2, test_fraction=0.2)
    src = d.report["sources"]["train"]
    assert src["n_repaired_surrogates"] == 1 and src["surrogate_lines"] == [12] and src["n_raw"] == 30
    texts = [t for s in ("train", "validation", "test") for t in d.splits[s]["text"]]
    assert "\ufffd 表情坏了也要留下" in texts and len(texts) == 30           # nothing else lost


def test_unreadable_line_raises_with_its_line_or_is_skipped_under_errors_skip(tmp_path):
    lines = [json.dumps(r, ensure_ascii=False) for r in _rows(25)]
    lines[6] = '{"text": "断了的行", "label": '                            # line 7
    lines[19] = '["not", "an", "object"]'                                # line 20
    path = _jsonl(tmp_path / "t.jsonl", lines)
    with pytest.raises(DataError, match=r"line 7 is not valid JSON.*errors=\"skip\""):
        load_labeled_files(path)
    with pytest.warns(UserWarning, match=r"2 unreadable line\(s\) skipped.*line 7, 20"):
        d = load_labeled_files(path, errors="skip", val_fraction=0.2, test_fraction=0.2)
    src = d.report["sources"]["train"]
    assert src["skipped_lines"] == [7, 20] and src["n_skipped_lines"] == 2 and src["n_raw"] == 23
    with pytest.raises(ConfigError, match="errors='ignore'"):
        load_labeled_files(path, errors="ignore")


def test_invisible_only_texts_are_dropped_at_load_with_counts_per_split(tmp_path):
    train = _jsonl(tmp_path / "train.jsonl", [json.dumps(r, ensure_ascii=False) for r in _rows(20)]
                   + [json.dumps({"text": "\ufeff\u200b", "label": "好"}), json.dumps({"text": None, "label": "差"})])
    test = _jsonl(tmp_path / "test.jsonl", [json.dumps(r, ensure_ascii=False) for r in _rows(6, start=100)]
                  + [json.dumps({"text": "\u2060\u3000\u200d", "label": "差"}), json.dumps({"text": "\u00ad", "label": "好"})])
    d = load_labeled_files(train, test=test, val_fraction=0.2)
    assert d.report["sources"]["train"]["n_blank_dropped"] == 1 and d.report["sources"]["train"]["n_missing_dropped"] == 1
    assert d.report["sources"]["test"]["n_blank_dropped"] == 2 and d.report["n_blank_dropped"] == 3
    assert d.report["n_test"] == 6 and d.report["n_empty_dropped"] == 4


def test_corpus_loader_applies_the_same_rule_and_reports_it(tmp_path):
    path = _jsonl(tmp_path / "c.jsonl", [json.dumps({"body": "第一段"}), json.dumps({"body": "\u200d\u2060"}),
                                         '{"body": "\\udc00尾巴"}', json.dumps({"body": "第三段"})])
    report = {}
    with pytest.warns(UserWarning, match="line 3"):
        ds = load_text_file(path, text_column="body", report=report)
    assert ds["text"] == ["第一段", "\ufffd尾巴", "第三段"]
    assert (report["blank"], report["repaired_surrogates"], report["n_read"]) == (1, 1, 4)


@pytest.mark.filterwarnings("ignore:the trained vocabulary")
def test_encoder_and_predict_agree_with_the_loader_and_the_suggested_fix_works(tmp_path):
    import datasets

    from nbkit import text
    from nbkit.evaluate.inference import predict
    from nbkit.models import build_classifier

    tok = text.train_wordpiece(["质量很好", "质量很差", "物流很快"] * 4, 60, tmp_path / "tok", 32)
    bad = datasets.Dataset.from_dict({"text": ["质量很好", "\u2060\u2060", "很差"], "label": [1, 0, 0]})
    with pytest.raises(DataError, match=r"0-based rows \[1\].*check_text"):
        text.encode_classification(bad, tok, 16)
    clf, _ = build_classifier(None, 2, {0: "差", 1: "好"}, tokenizer=tok, preset="tiny")
    texts = ["质量很好", "\u200d", "物流很快", "\u3000\ufeff", "\ud83d很差"]
    with pytest.raises(DataError) as info:
        predict(clf, tok, texts, 16)
    msg = str(info.value)
    assert "0-based indices 1:" in msg and "3:" in msg
    fix = msg.split("Drop them first: ", 1)[1]
    scope = {"texts": texts}
    with warnings.catch_warnings():
        exec(fix, scope)                                   # the suggested fix, as printed
    out = predict(clf, tok, scope["texts"], 16)           # works, surrogate repaired instead of crashing
    assert len(out["label"]) == 3
