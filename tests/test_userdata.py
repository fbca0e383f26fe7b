"""User files: loaders, dedup/conflicts, label mapping and every bad-input error."""
from __future__ import annotations

import codecs
import csv
import json
import logging
from pathlib import Path

import pytest

from nbkit.data import filecheck
from nbkit.data.labeled import build_labeled_data, normalize_text
from nbkit.data.userfiles import load_labeled_files, load_text_file
from nbkit.errors import DataError

FIXTURES = Path(__file__).parent / "fixtures"


def _write_csv(path: Path, rows, header=("text", "label")) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def _write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _reviews(n_per_class=10, labels=("好", "差")):
    return [(f"评论{label}{i}号", label) for label in labels for i in range(n_per_class)]


# --- dedup, conflicts, splits ----------------------------------------------------------

def test_fixture_duplicates_conflicts_and_empties_are_counted():
    d = load_labeled_files(FIXTURES / "reviews_dups.csv", val_fraction=0.2, test_fraction=0.2)
    r = d.report
    assert (r["n_raw"], r["n_empty_dropped"], r["n_duplicates_dropped"], r["n_conflicts_dropped"]) == (34, 2, 5, 2)
    texts = [t for s in ("train", "validation", "test") for t in d.splits[s]["text"][:]]
    keys = [normalize_text(t) for t in texts]
    assert len(texts) == 25 and len(set(keys)) == 25
    assert "还行吧" not in keys and "一般 般" not in keys  # contradictions gone entirely
    assert all(t == t.strip() and t for t in texts)
    assert d.label2id == {"negative": 0, "positive": 1}
    assert sum(r["class_counts"][s]["negative"] for s in r["class_counts"]) == 13


def test_split_is_deterministic_per_seed(tmp_path):
    path = _write_csv(tmp_path / "r.csv", _reviews(20))
    a = load_labeled_files(path, seed=3)
    b = load_labeled_files(path, seed=3)
    c = load_labeled_files(path, seed=4)
    assert a.splits["test"]["text"][:] == b.splits["test"]["text"][:]
    assert a.splits["test"]["text"][:] != c.splits["test"]["text"][:]
    assert a.report["class_counts"]["test"] == {"好": 2, "差": 2}  # stratified: 10 % of each class


def test_given_validation_and_test_files_lose_texts_seen_in_training(tmp_path):
    train = _write_csv(tmp_path / "train.csv", _reviews(10))
    val = _write_csv(tmp_path / "val.csv", [("评论好0号", "好"), ("新的好评", "好"), ("新的差评", "差")])
    test = _write_jsonl(tmp_path / "test.jsonl", [{"text": "评论差3号", "label": "差"}, {"text": "另一条", "label": "差"}])
    d = load_labeled_files(train, validation=val, test=test)
    assert d.splits["validation"]["text"][:] == ["新的好评", "新的差评"]
    assert d.splits["test"]["text"][:] == ["另一条"]
    assert d.report["n_overlap_dropped"] == 2
    assert d.report["n_train"] == 20  # nothing drawn from training when both files are given
    assert d.report["files"]["test"].endswith("test.jsonl")


def test_unseen_labels_in_validation_are_listed(tmp_path):
    train = _write_csv(tmp_path / "train.csv", _reviews(10))
    val = _write_csv(tmp_path / "val.csv", [("甲", "好"), ("乙", "中性"), ("丙", "未知")])
    with pytest.raises(DataError, match=r"\['中性', '未知'\]"):
        load_labeled_files(train, validation=val)


# --- label mapping ------------------------------------------------------------------

def test_string_labels_sorted_ids(tmp_path):
    path = _write_jsonl(tmp_path / "r.jsonl", [{"text": t, "label": lab} for t, lab in _reviews(10, ("zeta", "alpha", "mid"))])
    d = load_labeled_files(path)
    assert d.label2id == {"alpha": 0, "mid": 1, "zeta": 2}
    train = d.splits["train"]
    for text, label in zip(train["text"][:6], train["label"][:6]):
        assert d.id2label[label] in text  # "评论zeta3号" carries its label name


def test_integer_labels_kept(tmp_path):
    path = _write_csv(tmp_path / "r.csv", _reviews(10, (1, 0)))
    d = load_labeled_files(path)
    assert d.label2id == {"0": 0, "1": 1}
    for text, label in zip(d.splits["train"]["text"][:], d.splits["train"]["label"][:]):
        assert text.startswith(f"评论{label}")


def test_non_contiguous_integer_labels_renumbered_in_order(tmp_path):
    path = _write_csv(tmp_path / "r.csv", _reviews(10, (5, 1, 3)))
    d = load_labeled_files(path)
    assert d.label2id == {"1": 0, "3": 1, "5": 2}
    assert d.id2label == {0: "1", 1: "3", 2: "5"}
    for text, label in zip(d.splits["train"]["text"][:], d.splits["train"]["label"][:]):
        assert text.startswith(f"评论{d.id2label[label]}")


def test_single_class_is_an_error():
    with pytest.raises(DataError, match="single class"):
        build_labeled_data({"train": (["a", "b", "c"], ["x", "x", "x"])})


def test_class_too_rare_to_stratify_names_the_fix():
    texts = [f"t{i}" for i in range(20)] + ["rare"]
    with pytest.raises(DataError, match="separate validation file|separate test file"):
        build_labeled_data({"train": (texts, ["a"] * 20 + ["b"])})


# --- text files ---------------------------------------------------------------------

def test_load_text_file_each_format(tmp_path):
    (tmp_path / "c.txt").write_text("第一行\n\n  第二行  \n", encoding="utf-8")
    _write_jsonl(tmp_path / "c.jsonl", [{"body": "甲"}, {"body": ""}, {"body": "乙"}])
    _write_csv(tmp_path / "c.csv", [("丙", 1), ("123", 0)], header=("content", "x"))
    assert load_text_file(tmp_path / "c.txt")["text"][:] == ["第一行", "第二行"]
    assert load_text_file(tmp_path / "c.jsonl", text_column="body")["text"][:] == ["甲", "乙"]
    ds = load_text_file(tmp_path / "c.csv", text_column="content")
    assert ds.column_names == ["text"] and ds["text"][:] == ["丙", "123"]  # digits stay text


def test_utf8_bom_csv_header_is_clean(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes("\ufefftext,label\n好,1\n差,0\n".encode("utf-8"))
    assert load_text_file(path)["text"][:] == ["好", "差"]


def test_no_cache_in_data_dir_and_edits_are_seen(tmp_path):
    path = tmp_path / "c.jsonl"
    _write_jsonl(path, [{"text": "旧"}])
    assert load_text_file(path)["text"][:] == ["旧"]
    _write_jsonl(path, [{"text": "新"}, {"text": "更新"}])
    assert load_text_file(path)["text"][:] == ["新", "更新"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]


# --- bad input ----------------------------------------------------------------------

def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="File not found.*Check the path"):
        load_text_file(tmp_path / "missing.txt")


def test_unsupported_extension(tmp_path):
    path = tmp_path / "data.xlsx"
    path.write_bytes(b"PK\x03\x04")
    with pytest.raises(DataError, match=r"unsupported extension '\.xlsx'.*\.csv"):
        load_text_file(path)


def test_empty_file_and_header_only_and_blank_only(tmp_path):
    (tmp_path / "e.txt").write_bytes(b"")
    with pytest.raises(DataError, match="empty"):
        load_text_file(tmp_path / "e.txt")
    (tmp_path / "h.csv").write_text("text,label\n", encoding="utf-8")
    with pytest.raises(DataError, match="no rows"):
        load_labeled_files(tmp_path / "h.csv")
    (tmp_path / "b.txt").write_text("\n  \n\n", encoding="utf-8")
    with pytest.raises(DataError, match="only blank"):
        load_text_file(tmp_path / "b.txt")
    blanks = _write_csv(tmp_path / "b.csv", [("  ", "x"), ("", "y")])
    with pytest.raises(DataError, match="No training examples left"):
        load_labeled_files(blanks)


def test_missing_column_lists_existing_columns(tmp_path):
    path = _write_csv(tmp_path / "r.csv", _reviews(3), header=("review", "stars"))
    with pytest.raises(DataError, match=r"no column 'text'.*\['review', 'stars'\].*text_column="):
        load_labeled_files(path)
    with pytest.raises(DataError, match=r"no column 'label'.*label_column="):
        load_labeled_files(path, text_column="review")


def test_gbk_bytes_report_file_offset_and_iconv():
    path = FIXTURES / "reviews_gbk.csv"
    with pytest.raises(DataError) as info:
        load_labeled_files(path)
    msg = str(info.value)
    assert "reviews_gbk.csv is not UTF-8" in msg
    assert "offset 11 (line 2)" in msg and "0xd6" in msg
    assert "iconv -f GBK -t UTF-8" in msg


def test_utf8_offset_exact_across_chunk_boundaries(tmp_path, monkeypatch):
    monkeypatch.setattr(filecheck, "_CHUNK", 4)  # split multi-byte characters between reads
    good = "第一\n第二行\n".encode("utf-8")
    path = tmp_path / "x.txt"
    path.write_bytes(good + b"\xff" + "尾".encode("utf-8"))
    with pytest.raises(DataError, match=rf"offset {len(good)} \(line 3\)"):
        filecheck.check_utf8(path)
    path.write_bytes(good + "尾".encode("utf-8")[:2])  # truncated last character
    with pytest.raises(DataError, match=rf"offset {len(good)} \(line 3\)"):
        filecheck.check_utf8(path)
    path.write_bytes(good)
    assert filecheck.check_utf8(path) == "utf-8"


def test_txt_has_no_labels_and_bad_json_is_reported(tmp_path):
    (tmp_path / "l.txt").write_text("好\n", encoding="utf-8")
    with pytest.raises(DataError, match="no label column.*csv or .jsonl"):
        load_labeled_files(tmp_path / "l.txt")
    (tmp_path / "bad.jsonl").write_text('{"text": "好", "label": 1}\n{"text": \n', encoding="utf-8")
    with pytest.raises(DataError, match="Could not read .*bad.jsonl as JSON"):
        load_text_file(tmp_path / "bad.jsonl")


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(DataError, match="is a directory"):
        load_text_file(tmp_path)


def test_missing_labels_dropped_and_int_labels_survive_pandas_floats(tmp_path):
    path = tmp_path / "r.csv"  # an empty label cell turns pandas' int column into floats
    path.write_text("text,label\n" + "".join(f"文{i},{i % 2}\n" for i in range(20)) + "无标签,\n",
                    encoding="utf-8")
    d = load_labeled_files(path)
    assert d.report["n_empty_dropped"] == 1
    assert d.label2id == {"0": 0, "1": 1}
    for text, label in zip(d.splits["train"]["text"][:], d.splits["train"]["label"][:]):
        assert int(text[1:]) % 2 == label


def test_fixed_label2id_rejects_other_labels():
    with pytest.raises(DataError, match=r"Labels \['maybe'\] are not in the given label2id"):
        build_labeled_data({"train": (["a", "b", "c"], ["yes", "no", "maybe"])}, label2id={"no": 0, "yes": 1})


def test_integer_labels_match_across_file_formats(tmp_path):
    train = _write_csv(tmp_path / "train.csv", _reviews(10, (10, 2)))  # numeric order: 2 < 10
    val = _write_jsonl(tmp_path / "val.jsonl", [{"text": "新评论", "label": "10"}, {"text": "旧评论", "label": 2}])
    d = load_labeled_files(train, validation=val)
    assert d.label2id == {"2": 0, "10": 1}
    assert d.splits["validation"]["label"][:] == [1, 0]


# --- empty splits -------------------------------------------------------------------

def test_test_file_that_repeats_training_is_an_error_not_an_empty_split(tmp_path):
    path = _write_csv(tmp_path / "train.csv", _reviews(50), header=("review", "stars"))
    with pytest.raises(DataError, match=r"test split is empty: all 100 rows of the test file were dropped "
                                        r"\(100 that also occur in training\).*test file with other texts"):
        load_labeled_files(path, test=path, text_column="review", label_column="stars")


def test_fraction_rounding_to_zero_is_an_error_but_zero_means_no_split(tmp_path):
    path = _write_csv(tmp_path / "r.csv", [("好书", "好"), ("烂书", "差"), ("一般", "差")])
    with pytest.raises(DataError, match=r"test split would be empty: test_fraction=0.1 of 3 unique training "
                                        r"texts rounds to 0.*at least 15 unique texts.*test_fraction=0"):
        load_labeled_files(path)
    d = load_labeled_files(path, val_fraction=0, test_fraction=0)  # asked for: no validation, no test
    assert (d.report["n_train"], d.report["n_val"], d.report["n_test"]) == (3, 0, 0)
    with pytest.raises(DataError, match=r"gives 1 for 2 classes; raise test_fraction"):
        build_labeled_data({"train": ([f"t{i}" for i in range(10)], ["x", "y"] * 5)}, test_fraction=0.1)
    with pytest.raises(DataError, match="leaves no training examples"):
        build_labeled_data({"train": (["a", "b", "c", "d"], ["x", "y", "x", "y"])},
                           test_fraction=0.5, val_fraction=0.45)


# --- labels that differ only in case or width ---------------------------------------

def test_labels_differing_in_case_or_width_warn_and_list_them(tmp_path):
    rows = [(f"好评{i}", "Positive") for i in range(5)] + [(f"好{i}", "positive") for i in range(5)]
    rows += [(f"差评{i}", "ｎｅｇ") for i in range(5)] + [(f"差{i}", "neg") for i in range(5)]
    path = _write_csv(tmp_path / "r.csv", rows)
    with pytest.warns(UserWarning, match=r"case or character width.*\['Positive', 'positive'\].*"
                                         r"\['neg', 'ｎｅｇ'\].*normalise the label column"):
        d = load_labeled_files(path, val_fraction=0.2, test_fraction=0.2)
    assert d.num_labels == 4  # still loaded as given: the user decides


def test_clean_labels_do_not_warn(tmp_path, recwarn):
    load_labeled_files(_write_csv(tmp_path / "r.csv", _reviews(10, ("pos", "neg"))))
    assert not [w for w in recwarn if "case or character width" in str(w.message)]


def test_unseen_label_that_differs_only_in_case_says_so(tmp_path):
    train = _write_csv(tmp_path / "train.csv", _reviews(10, ("pos", "neg")))
    val = _write_csv(tmp_path / "val.csv", [("新的", "POS")])
    with pytest.raises(DataError, match=r"\['POS'\] \('POS' vs 'pos' differ only in case/width\)"):
        load_labeled_files(train, validation=val)


# --- encodings, delimiters, JSON lines ----------------------------------------------

@pytest.mark.parametrize("encoding, iconv", [("utf-16", "UTF-16"), ("utf-16-be", "UTF-16BE"),
                                             ("utf-16-le", "UTF-16LE"), ("utf-32", "UTF-32")])
def test_utf16_and_utf32_files_get_the_right_iconv(tmp_path, encoding, iconv):
    path = tmp_path / "excel.csv"
    data = "text,label\n好评,1\n差评,0\n".encode(encoding)
    if encoding == "utf-16-be":  # Excel writes a BOM; big-endian with one too
        data = codecs.BOM_UTF16_BE + data
        iconv = "UTF-16"
    path.write_bytes(data)
    with pytest.raises(DataError) as info:
        load_labeled_files(path)
    msg = str(info.value)
    assert f"iconv -f {iconv} -t UTF-8" in msg and "GBK" not in msg and "not UTF-8" in msg


def test_tab_separated_csv_suggests_tsv_and_tsv_loads(tmp_path):
    content = "review\tstars\n" + "".join(f"评论{i}\t{i % 2}\n" for i in range(20))
    (tmp_path / "r.csv").write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=r"r.csv looks tab-separated.*'review\\tstars'.*Rename it to r.tsv"):
        load_labeled_files(tmp_path / "r.csv", text_column="review", label_column="stars")
    (tmp_path / "r.tsv").write_text(content, encoding="utf-8")
    d = load_labeled_files(tmp_path / "r.tsv", text_column="review", label_column="stars")
    assert d.report["n_raw"] == 20 and d.label2id == {"0": 0, "1": 1}


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_bad_json_line_is_reported_1_based_without_datasets_log(tmp_path):
    rows = [json.dumps({"text": f"文本{i}", "label": i % 2}, ensure_ascii=False) for i in range(12)]
    rows[9] = '{"text": "坏", "label": '
    (tmp_path / "bad.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad.jsonl as JSON: line 10 is not valid JSON"):
        load_labeled_files(tmp_path / "bad.jsonl")
    rows[9] = "[1, 2]"  # datasets logs "Failed to load JSON ..." on this one
    (tmp_path / "bad.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    records = _Records()  # datasets' loggers do not propagate to the root: listen on theirs
    logging.getLogger("datasets").addHandler(records)
    try:
        with pytest.raises(DataError, match=r"line 10 is a JSON array, not an object"):
            load_labeled_files(tmp_path / "bad.jsonl")
    finally:
        logging.getLogger("datasets").removeHandler(records)
    assert not [m for m in records.messages if "Failed to load JSON" in m]
    (tmp_path / "bad.json").write_text('[{"text": "a", "label": 1},\n{"text": ]', encoding="utf-8")
    with pytest.raises(DataError, match=r"line 2, column 10"):
        load_labeled_files(tmp_path / "bad.json")


def _message(fn, *args, **kwargs) -> str:
    with pytest.raises(DataError) as info:
        fn(*args, **kwargs)
    return str(info.value)


def test_mostly_utf8_file_gets_the_bad_line_not_gbk_advice_from_every_loader():
    """C12: one corrupt line in a UTF-8 file: name it and say how to drop or replace it; never `iconv -f GBK`."""
    from nbkit.data import corpora

    path = FIXTURES / "mostly_utf8_one_bad_line.txt"
    msgs = {"load_text_file": _message(load_text_file, path),
            "load_labeled_files": _message(load_labeled_files, path),
            "load_peoples_daily": _message(corpora.load_peoples_daily, path=path),
            "bundled reviews reader": _message(corpora._read_lines, path)}
    assert len(set(msgs.values())) == 1, msgs  # one wording for every loader
    msg = msgs["load_text_file"]
    assert "byte 0xff at offset 83 (line 3)" in msg and "1 of 4 line(s) (line 3)" in msg
    assert "iconv -c -f UTF-8 -t UTF-8" in msg and "sed -e '3d'" in msg and 'errors="replace"' in msg
    assert "iconv -f GBK" not in msg


def test_an_old_mac_file_gets_its_bad_line_by_number_and_no_sed(tmp_path):
    """Lines ended by a lone CR are numbered as the loaders read them (not all "line 1"), and sed, which reads
    LF-ended lines, is not offered: `sed -e '3d'` would keep the bad line (or '1d' drop the whole file)."""
    path = tmp_path / "mac.txt"
    path.write_bytes((FIXTURES / "mostly_utf8_one_bad_line.txt").read_bytes().replace(b"\n", b"\r"))
    msg = _message(load_text_file, path)
    assert "byte 0xff at offset 83 (line 3)" in msg and "1 of 4 line(s) (line 3)" in msg
    assert "iconv -c -f UTF-8 -t UTF-8" in msg and "sed" not in msg
    assert _message(load_text_file, FIXTURES / "mostly_utf8_one_bad_line.txt").count("sed -e '3d'") == 1


def test_gbk_advice_only_when_the_file_reads_as_gbk(tmp_path):
    from nbkit.data import corpora

    gbk = tmp_path / "news.txt"
    gbk.write_bytes("人民/n 日报/n\n北京/ns 新闻/n\n".encode("gbk"))
    msg = _message(corpora.load_peoples_daily, path=gbk)
    assert msg == _message(load_text_file, gbk)
    assert "reads as GBK" in msg and "iconv -f GBK -t UTF-8" in msg and "(line 1)" in msg
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("café\nnaïve\n".encode("latin-1"))
    msg = _message(load_text_file, latin1)
    assert "does not read as GBK either" in msg and "file -bi" in msg and "iconv -f GBK" not in msg
    assert "2 of 2 line(s) (line 1, 2)" in msg


@pytest.mark.parametrize("item", ["a text", [1, 2], 3])
def test_a_json_array_item_that_is_no_object_is_named_with_its_kind_for_both_loaders(tmp_path, item):
    """Labelled files and NER span files read a .json array through one reader: a non-object item is named by its
    1-based position and its JSON kind, and nothing is loaded."""
    from nbkit.data.ner import read_ner_file

    kind = {str: "a JSON string", list: "a JSON array", int: "a JSON number"}[type(item)]
    labeled = tmp_path / "reviews.json"
    labeled.write_text(json.dumps([{"text": "好看", "label": 1}, item], ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DataError, match=rf"reviews\.json: item 2 \(1-based\) of the JSON array is {kind}, not an object"):
        load_labeled_files(labeled, text_column="text", label_column="label")
    spans = tmp_path / "spans.json"
    spans.write_text(json.dumps([item], ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DataError, match=rf"spans\.json: item 1 \(1-based\) of the JSON array is {kind}, not an object"):
        read_ner_file(spans)


# --- value types: every column read as written, whatever the file's mix of types --------------------

def _json_file(path: Path, rows) -> Path:
    """``rows`` as JSON lines (``.jsonl``) or as one JSON array with an item per line (``.json``)."""
    if path.suffix == ".json":
        path.write_text("[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n]\n", encoding="utf-8")
        return path
    return _write_jsonl(path, rows)


@pytest.mark.parametrize("name", ["r.jsonl", "r.json"])
def test_json_columns_of_mixed_types_keep_their_values_as_written(tmp_path, name):
    """A number among strings gave the whole column as escaped JSON text ('"\\u592a..."'), silently: each value
    is now read as written, a number as its text, in both JSON forms and both loaders."""
    rows = [{"review": f"物流很快{i}" if i % 2 else f"太差了{i}", "label": "正面" if i % 2 else "负面"} for i in range(30)]
    rows.append({"review": 2024, "label": "正面"})
    d = load_labeled_files(_json_file(tmp_path / name, rows), text_column="review", label_column="label")
    texts = [t for s in ("train", "validation", "test") for t in d.splits[s]["text"]]
    assert sorted(texts) == sorted([r["review"] for r in rows[:30]] + ["2024"])
    assert d.label2id == {"正面": 0, "负面": 1}
    assert load_text_file(tmp_path / name, text_column="review")["text"][:] == [str(r["review"]) for r in rows]
    rows = [{"review": f"评论{i}", "label": 5 if i % 2 else "差"} for i in range(30)]   # mixed label column
    d = load_labeled_files(_json_file(tmp_path / name, rows), text_column="review", label_column="label")
    assert d.id2label == {0: "5", 1: "差"}


def test_a_label_written_as_number_and_as_string_is_one_label(tmp_path):
    rows = [{"text": f"评论{i}", "label": i % 2} for i in range(20)] + [{"text": "评论3", "label": "1"}]
    d = load_labeled_files(_write_jsonl(tmp_path / "r.jsonl", rows), val_fraction=0, test_fraction=0)
    assert d.report["n_duplicates_dropped"] == 1 and d.report["n_conflicts_dropped"] == 0
    assert d.label2id == {"0": 0, "1": 1}


@pytest.mark.parametrize("suffix, sep", [(".csv", ","), (".tsv", "\t")])
def test_csv_cells_are_read_as_written(tmp_path, suffix, sep):
    """pandas' inference turned a numeric text column into numbers (dropped as missing), '01' into 1 (merged
    with '1' silently) and 'None'/'NA' into missing values: every cell is now its text, only an empty one is
    missing, and '1' beside '01' warns as a variant."""
    rows = [(f"{i:03d}", "1") for i in range(20)] + [(str(1000 + i), "2") for i in range(20)]
    rows += [("None", "01"), ("NA", "2"), ("", "2"), ("空标签", "")]
    path = tmp_path / f"r{suffix}"
    path.write_text("text" + sep + "label\n" + "".join(f"{t}{sep}{lab}\n" for t, lab in rows), encoding="utf-8")
    with pytest.warns(UserWarning, match=r"Labels '01': 1, '1': 20 look like variants of one label \(.*leading "
                                         r"zeros"):
        d = load_labeled_files(path, val_fraction=0, test_fraction=0)
    assert d.label2id == {"01": 0, "1": 1, "2": 2}
    texts = d.splits["train"]["text"][:]
    assert texts[:2] == ["000", "001"] and "None" in texts and "NA" in texts and len(texts) == 42
    assert d.report["n_missing_dropped"] == 2
    assert load_text_file(path)["text"][:3] == ["000", "001", "002"]


def test_a_text_column_that_looks_numeric_for_a_whole_csv_chunk_loads(tmp_path):
    """pandas reads a CSV 10,000 rows at a time and typed the column from the first chunk: digits there, then a
    Chinese text, stopped the load ('Failed to parse string ... as int64')."""
    rows = [(str(i), i % 2) for i in range(10_000)] + [(f"文本{i}", i % 2) for i in range(20)]
    d = load_labeled_files(_write_csv(tmp_path / "r.csv", rows), val_fraction=0, test_fraction=0)
    assert d.report["n_train"] == 10_020 and d.splits["train"]["text"][-1] == "文本19"


def test_integer_labels_written_as_text_keep_numeric_order(tmp_path):
    path = _write_csv(tmp_path / "r.csv", _reviews(10, (10, 2, 9)))
    assert load_labeled_files(path).label2id == {"2": 0, "9": 1, "10": 2}
    rows = [{"text": t, "label": str(lab)} for t, lab in _reviews(10, (10, 2, 9))]
    assert load_labeled_files(_write_jsonl(tmp_path / "r.jsonl", rows)).label2id == {"2": 0, "9": 1, "10": 2}


_KINDS = {"list": (["正面"], "an array"), "object": ({"name": "正面"}, "an object"), "bool": (True, "a boolean")}


@pytest.mark.parametrize("column", ["review", "label"])
@pytest.mark.parametrize("kind", list(_KINDS))
@pytest.mark.parametrize("name", ["r.jsonl", "r.json"])
def test_a_list_object_or_boolean_in_a_used_column_names_its_line(tmp_path, column, kind, name):
    """Arrow read a list column without complaint and the loader died on 'unhashable type: list' (or kept
    'true' as a text): each such value is a DataError with the file, its 1-based line and the fix, in both
    JSON forms (an array's item k sits on line k + 1 here); errors="skip" skips those lines and lists them."""
    value, said = _KINDS[kind]
    rows = [{"review": f"好{i}" if i % 2 else f"差{i}", "label": "正面" if i % 2 else "负面"} for i in range(30)]
    for i in (4, 17):
        rows[i][column] = value
    path = _json_file(tmp_path / name, rows)
    where = "line 5" if name == "r.jsonl" else r"item 5 \(1-based\) of the JSON array \(line 6\)"
    with pytest.raises(DataError, match=rf"{name} as JSON: {where}: field '{column}' is {said}; use a string "
                                        r"or a number\. Fix that line, or load with errors=\"skip\""):
        load_labeled_files(path, text_column="review", label_column="label")
    with pytest.warns(UserWarning, match=r"2 unreadable line\(s\) skipped"):
        d = load_labeled_files(path, text_column="review", label_column="label", errors="skip",
                               val_fraction=0, test_fraction=0)
    shift = name == "r.json"
    assert d.report["sources"]["train"]["skipped_lines"] == [5 + shift, 18 + shift]
    assert d.report["n_train"] == 28


def test_a_label_given_as_a_list_on_every_line_names_the_first(tmp_path):
    rows = [{"review": f"好{i}", "label": ["正面"]} for i in range(30)]
    with pytest.raises(DataError, match=r"r\.jsonl as JSON: line 1: field 'label' is an array; use a string"):
        load_labeled_files(_write_jsonl(tmp_path / "r.jsonl", rows), text_column="review", label_column="label")


def test_null_stays_a_missing_value_counted_in_the_report(tmp_path):
    rows = [{"text": f"评论{i}", "label": "好" if i % 2 else "差"} for i in range(20)]
    rows += [{"text": None, "label": "好"}, {"text": "无标签", "label": None}, {"label": "差"}]
    d = load_labeled_files(_write_jsonl(tmp_path / "r.jsonl", rows), val_fraction=0, test_fraction=0)
    assert d.report["n_missing_dropped"] == 3 and d.report["n_train"] == 20


# --- a class too rare for a stratified draw is named by its label ------------------------------------

def test_class_too_rare_to_stratify_is_named_by_label_with_the_fix(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("review,label\n" + "".join(f"文本{i},{'正面' if i % 2 else '负面'}\n" for i in range(120))
                    + "Positive,POSITIVE\n", encoding="utf-8")
    msg = _message(load_labeled_files, path, text_column="review", label_column="label")
    assert "'POSITIVE' (1 example)" in msg and "[0]" not in msg, msg
    assert "Cannot draw a stratified test split" in msg and "separate test file" in msg
    texts, labels = [f"t{i}" for i in range(40)] + ["r1", "r2"], ["a", "b"] * 20 + ["c", "d"]
    msg = _message(build_labeled_data, {"train": (texts, labels)}, test_fraction=0)
    assert "stratified validation split: classes 'c' (1 example), 'd' (1 example) are too rare" in msg
    assert "separate validation file" in msg
    msg = _message(build_labeled_data, {"train": (texts, labels)}, test_fraction=0, val_fraction=0, max_train=10)
    assert "max_train" in msg and "'c' (1 example)" in msg and "max_train=None" in msg
    texts, labels = [f"t{i}" for i in range(40)] + ["c1", "c2"], ["a", "b"] * 20 + ["c", "c"]
    msg = _message(build_labeled_data, {"train": (texts, labels)}, test_fraction=0.5)   # the test split takes 'c1'
    assert "validation split: class 'c' (1 example after drawing the test split) is too rare" in msg
