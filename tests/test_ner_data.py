"""NER data: People's Daily to character BIO (persons merged, sentences cut, dedupe, leak-free split) and the
user's tagged files (CoNLL BIO/BIOES, JSON spans) with every error naming its file and line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from nbkit.data import ner
from nbkit.errors import ConfigError, DataError


def _pd_file(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "pd.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _pairs(item: dict) -> list[tuple[str, str]]:
    return list(zip(item["tokens"], item["tags"]))


# ----- People's Daily -------------------------------------------------------------------------------------

@pytest.mark.parametrize("words, groups", [
    (["江", "泽民"], [(0, 2)]),                                   # surname + given name
    (["江", "泽民", "李", "鹏", "朱", "镕基"], [(0, 2), (2, 4), (4, 6)]),  # a list without separators
    (["陈", "方", "安生"], [(0, 3)]),                             # a married name: two surnames
    (["欧阳", "修"], [(0, 2)]),                                   # a compound surname
    (["克林顿"], [(0, 1)]), (["马克思", "恩格斯"], [(0, 1), (1, 2)]),  # one-word names
    (["李", "鹏", "朱", "镕基"], [(0, 2), (2, 4)]),
])
def test_person_groups_cut_runs_of_nr_words_at_each_surname(words, groups):
    assert ner.person_groups(words) == groups


def test_peoples_daily_bio_on_hand_written_lines(tmp_path):
    path = _pd_file(tmp_path, [
        "国家/n  主席/n  江/nr  泽民/nr  在/p  北京/ns  会见/v  克林顿/nr  。/w  新华社/nt  报道/v  。/w",
        "",
        "江/nr  泽民/nr  李/nr  鹏/nr  出席/v  [中国/ns  共产党/nt]nt  会议/n  ！/w  “/w  好/a  。/w  ”/w  完/v",
    ])
    data = ner.load_peoples_daily_ner(path=path, validation=0, test=0)
    items = {item["id"]: item for item in data.splits["train"]}
    assert sorted(items) == ["pd-00001-0", "pd-00001-1", "pd-00003-0", "pd-00003-1", "pd-00003-2"]
    first = items["pd-00001-0"]
    assert "".join(first["tokens"]) == "国家主席江泽民在北京会见克林顿。"
    assert first["tags"] == (["O"] * 4 + ["B-PER", "I-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "O"]
                             + ["B-PER", "I-PER", "I-PER", "O"])
    assert _pairs(items["pd-00001-1"])[:3] == [("新", "B-ORG"), ("华", "I-ORG"), ("社", "I-ORG")]
    names = items["pd-00003-0"]
    assert ner.entity_spans(names["tags"]) == [("PER", 0, 3), ("PER", 3, 5), ("LOC", 7, 9), ("ORG", 9, 12)]
    assert "".join(items["pd-00003-1"]["tokens"]) == "“好。”"  # the closing quote stays with its sentence
    assert "".join(items["pd-00003-2"]["tokens"]) == "完"
    assert data.types == ["LOC", "ORG", "PER"]
    assert data.labels == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    assert data.report["persons"] == {"nr_runs": 3, "persons": 4, "nr_runs_split": 1}
    assert data.report["entities"]["train"] == {"LOC": 2, "ORG": 2, "PER": 4}


def test_keep_train_keeps_the_first_sentences_and_recounts(tmp_path):
    lines = [f"第{i}/m  次/q  去/v  北京/ns  。/w" for i in range(30)]
    data = ner.load_peoples_daily_ner(path=_pd_file(tmp_path, lines), seed=0, validation=0.2, test=0.2)
    n = len(data.splits["train"])
    kept = data.keep_train(5)
    assert kept.splits["train"] == data.splits["train"][:5] and kept.splits["test"] == data.splits["test"]
    assert kept.report["n_train"] == 5 and kept.report["n_train_unused"] == n - 5
    assert kept.report["entities"]["train"] == {"LOC": 5} and kept.report["n_read"] == data.report["n_read"]
    assert data.keep_train(n) is data and "n_train_unused" not in data.report


def test_peoples_daily_dedupe_and_no_text_shared_across_splits(tmp_path):
    lines = [f"第{i}/m  次/q  去/v  北京/ns  。/w  重复/v  。/w" for i in range(40)]
    data = ner.load_peoples_daily_ner(path=_pd_file(tmp_path, lines), seed=3, validation=0.2, test=0.2)
    assert data.report["n_read"] == 80 and data.report["n_duplicates_dropped"] == 39
    texts = {s: ["".join(item["tokens"]) for item in data.splits[s]] for s in ("train", "validation", "test")}
    assert sum(map(len, texts.values())) == 41
    assert len(texts["test"]) == len(texts["validation"]) == 8
    seen = [t for split in texts.values() for t in split]
    assert len(seen) == len(set(seen))  # no sentence in two splits, none twice
    again = ner.load_peoples_daily_ner(path=_pd_file(tmp_path, lines), seed=3, validation=0.2, test=0.2)
    assert again.splits == data.splits
    other = ner.load_peoples_daily_ner(path=_pd_file(tmp_path, lines), seed=4, validation=0.2, test=0.2)
    assert other.splits["test"] != data.splits["test"]
    table = data.table()
    assert table.loc["sentences", "total"] == 41 and table.loc["LOC", "total"] == 40


def test_peoples_daily_bad_arguments(tmp_path):
    with pytest.raises(ConfigError, match="lines=0"):
        ner.load_peoples_daily_ner(lines=0)
    with pytest.raises(ConfigError, match="validation=0.6, test=0.5"):
        ner.load_peoples_daily_ner(validation=0.6, test=0.5)
    with pytest.raises(DataError, match="no nr/ns/nt word"):
        ner.load_peoples_daily_ner(path=_pd_file(tmp_path, ["你好/v  。/w"]))


def test_bundled_peoples_daily_first_lines():
    data = ner.load_peoples_daily_ner(lines=300)
    assert data.report["n_lines_read"] == 300
    for split in data.splits.values():
        for item in split:
            assert len(item["tokens"]) == len(item["tags"]) and all(len(c) == 1 for c in item["tokens"])
            assert set(item["tags"]) <= set(data.labels)
    found = [("".join(item["tokens"][s:e]), k) for item in data.splits["train"] for k, s, e in
             ner.entity_spans(item["tags"])]
    assert ("江泽民", "PER") in found and ("中共中央", "ORG") in found


# ----- the user's files -----------------------------------------------------------------------------------

def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _jsonl(tmp_path: Path, name: str, rows: list) -> Path:
    return _write(tmp_path, name, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def test_conll_bio_and_bioes_read_as_bio(tmp_path):
    bio = _write(tmp_path, "a.conll", "张\tB-PER\n三\tI-PER\n在\tO\n\n\n北 B-LOC\n京 I-LOC\n")
    bioes = _write(tmp_path, "b.bioes", "-DOCSTART- O\n\n张\tB-PER\n小\tI-PER\n三\tE-PER\n在\tO\n京\tS-LOC\n")
    report: dict = {}
    items = ner.read_ner_file(bio)
    assert [item["tags"] for item in items] == [["B-PER", "I-PER", "O"], ["B-LOC", "I-LOC"]]
    assert [item["id"] for item in items] == ["a.conll:1", "a.conll:6"]
    (item,) = ner.read_ner_file(bioes, report=report)
    assert item["tags"] == ["B-PER", "I-PER", "I-PER", "O", "B-LOC"]
    assert report["scheme"] == "BIOES" and report["n_docstart_lines"] == 1
    bmes = _write(tmp_path, "c.bmes", "张\tB-PER\n小\tM-PER\n三\tE-PER\n")
    assert ner.read_ner_file(bmes)[0]["tags"] == ["B-PER", "I-PER", "I-PER"]


def test_i_without_b_is_repaired_and_counted_or_an_error(tmp_path):
    path = _write(tmp_path, "t.conll", "北\tO\n京\tI-LOC\n人\tI-LOC\n\n张\tB-PER\n三\tI-LOC\n")
    report: dict = {}
    items = ner.read_ner_file(path, report=report)
    assert [item["tags"] for item in items] == [["O", "B-LOC", "I-LOC"], ["B-PER", "B-LOC"]]
    assert report["n_i_without_b_repaired"] == 2 and report["i_without_b_lines"] == [2, 6]
    with pytest.raises(DataError, match=r"t\.conll, line 2: I-LOC does not continue a B-LOC"):
        ner.read_ner_file(path, repair_orphan_i=False)


@pytest.mark.parametrize("text, match", [
    ("张\tB-PER\n三\tX\n", r"line 2: unknown tag 'X'"),
    ("张\tb-per\n", r"line 1: unknown tag 'b-per' \(prefixes are upper case"),
    ("张\tPER\n", r"line 1: unknown tag 'PER' \(a bare type has no scheme"),
    ("张\n", r"line 1: '张' has no tag"),
    ("张三\tB-PER\n", r"line 1: the token '张三' has 2 characters"),
    ("张\tB-PER\n三\tI-PER\n\n李\tS-PER\n", r"line 2: the sentence ends inside a PER entity .*first at line 4"),
    ("张\tB-PER\n三\tE-PER\n\n李\tS-PER\n\n王\tB-PER\n五\tI-PER\n", r"line 7: the sentence ends inside a PER entity"),
    ("张\tE-PER\n", r"line 1: E-PER without a B-PER"),
    ("张\tB-PER\n三\tO\n\n李\tS-PER\n", r"line 2: the PER entity opened above is not closed with E-PER before this O"),
    ("张\tB-PER\n三\tI-PER\n\n李\tB-PER\n四\tM-PER\n", r"mixes schemes: I- tags \(first at line 2\) and M- tags"),
    ('{"text": "x"}\n', r"looks like JSON"),
])
def test_conll_errors_name_file_and_line(tmp_path, text, match):
    path = _write(tmp_path, "bad.conll", text)
    with pytest.raises(DataError, match=match) as err:
        ner.read_ner_file(path)
    assert str(path) in str(err.value)


def test_json_spans_to_bio_in_every_accepted_shape(tmp_path):
    path = _jsonl(tmp_path, "s.jsonl", [
        {"text": "张三在北京", "entities": [[0, 2, "PER"], [3, 5, "LOC"]]},              # end exclusive
        {"text": "李四", "label": [{"start": 0, "end": 2, "labels": ["PER"], "text": "李四"}]},  # Label Studio MIN
        {"text": "王五去上海", "label": {"PER": {"王五": [[0, 1]]}, "LOC": {"上海": [[3, 4]]}}},  # CLUENER
        {"text": "上海", "entities": [[0, 2, "LOC"], [0, 2, "LOC"]]},                   # a repeat: kept once
        {"text": "没有", "entities": []},
    ])
    report: dict = {}
    items = ner.read_ner_file(path, report=report)
    assert [item["tags"] for item in items] == [
        ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"], ["B-PER", "I-PER"], ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"],
        ["B-LOC", "I-LOC"], ["O", "O"]]
    assert report["n_duplicate_spans"] == 1 and report["scheme"] == "spans"
    studio = _write(tmp_path, "ls.json", json.dumps([{"data": {"text": "在北京"}, "annotations": [
        {"result": [{"value": {"start": 1, "end": 3, "text": "北京", "labels": ["LOC"]}}]}]}], ensure_ascii=False))
    assert ner.read_ner_file(studio)[0]["tags"] == ["O", "B-LOC", "I-LOC"]


@pytest.mark.parametrize("row, match", [
    ({"text": "张三在北京", "entities": [[0, 2, "PER"], [1, 4, "LOC"]]}, r"line 2: spans \[0, 2, 'PER'\] and \[1, 4, 'LOC'\] overlap"),
    ({"text": "张三", "entities": [[0, 3, "PER"]]}, r"line 2: span \[0, 3, 'PER'\] runs past the text"),
    ({"text": "张三", "entities": [[1, 1, "PER"]]}, r"line 2: .* is empty or reversed"),
    ({"text": "张三", "entities": [[0, 1, "PER"]], "label": []}, r"line 2: both 'entities' and 'label'"),
    ({"text": "张三", "entities": [{"start": 0, "end": 1, "label": "PER", "text": "张三"}]}, r"line 2: .* names '张三'"),
    ({"text": "张三", "entities": [[0, 2, "B-PER"]]}, r"line 2: .* the type must be a name"),
    ({"words": "张三"}, r"line 2: no \"text\" string"),
])
def test_json_errors_name_file_and_line(tmp_path, row, match):
    path = _jsonl(tmp_path, "bad.jsonl", [{"text": "好", "entities": []}, row])
    with pytest.raises(DataError, match=match) as err:
        ner.read_ner_file(path)
    assert str(path) in str(err.value)


def test_json_line_that_is_not_json(tmp_path):
    path = _write(tmp_path, "bad.jsonl", '{"text": "好", "entities": []}\n{"text": \n')
    with pytest.raises(DataError, match=r"line 2 is not valid JSON"):
        ner.read_ner_file(path)


def test_file_checks_are_shared(tmp_path):
    with pytest.raises(DataError, match="unsupported extension '.xlsx'"):
        ner.read_ner_file(_write(tmp_path, "a.xlsx", "x"))
    with pytest.raises(DataError, match="is empty"):
        ner.read_ner_file(_write(tmp_path, "a.conll", ""))
    gbk = tmp_path / "g.conll"
    gbk.write_bytes("张\tB-PER\n".encode("gbk"))
    with pytest.raises(DataError, match="iconv -f GBK"):
        ner.read_ner_file(gbk)


def test_load_ner_files_dedupes_draws_splits_and_counts(tmp_path):
    rows = [{"text": f"张{i}去北京", "entities": [[0, 2, "PER"], [3, 5, "LOC"]]} for i in range(20)]
    rows += [rows[0], {"text": "张0去北京", "entities": [[3, 5, "LOC"]]}, {"text": "", "entities": []}]
    train = _jsonl(tmp_path, "train.jsonl", rows)
    test = _write(tmp_path, "test.conll", "张\tB-PER\n1\tI-PER\n去\tO\n北\tB-LOC\n京\tI-LOC\n\n"
                                          "李\tB-PER\n四\tI-PER\n")
    data = ner.load_ner_files(train, test=test, seed=0, val_fraction=0.25)
    rep = data.report
    assert rep["n_duplicates_dropped"] == 2 and rep["n_conflicts_dropped"] == 1 and rep["n_empty_dropped"] == 1
    assert rep["n_overlap_dropped"] == 1  # 张1去北京 is also in training
    assert [item["tokens"] for item in data.splits["test"]] == [["李", "四"]]
    assert rep["n_val"] == 5 and rep["n_train"] == 14  # 19 unique texts: a quarter drawn for validation
    assert rep["schemes"] == {"train": "spans", "test": "BIO"}
    keys = [tuple(item["tokens"]) for s in data.splits.values() for item in s]
    assert len(keys) == len(set(keys))
    assert data.types == ["LOC", "PER"] and data.label2id["O"] == 0
    assert data.summary()["n_train"] == 14


def test_load_ner_files_refuses_types_unseen_in_training(tmp_path):
    train = _jsonl(tmp_path, "train.jsonl", [{"text": f"张{i}", "entities": [[0, 1, "PER"]]} for i in range(5)])
    test = _jsonl(tmp_path, "test.jsonl", [{"text": "北京", "entities": [[0, 2, "LOC"]]}])
    with pytest.raises(DataError, match=r"Entity types \['LOC'\] occur in the test split but never in training"):
        ner.load_ner_files(train, test=test, val_fraction=0)
    with pytest.raises(DataError, match="validation split would be empty: val_fraction=0.01 of 5"):
        ner.load_ner_files(train, test=_jsonl(tmp_path, "t2.jsonl", [{"text": "李", "entities": []}]),
                           val_fraction=0.01)
    with pytest.raises(ConfigError, match="train=None"):
        ner.load_ner_files(None)


def test_conll_bracket_and_space_characters_are_tokens(tmp_path):
    path = _write(tmp_path, "b.conll", "[\tO\n \tO\n张\tB-PER\n]\tO\n")
    assert ner.read_ner_file(path)[0]["tokens"] == ["[", " ", "张", "]"]


# ----- offsets in UTF-16 units, spans with edge spaces (issue 52, item 3) ------------------------------------

def _utf16(text: str, i: int) -> int:
    """The UTF-16 offset of character ``i``: what JavaScript's ``String.length`` counts, so Label Studio's editor."""
    return len(text[:i].encode("utf-16-le")) // 2


def _label_studio_export(tmp_path: Path, texts: list[tuple[str, list[tuple[str, str]]]], with_text: bool = True):
    """A Label Studio full JSON export of ``(text, [(mention, type)])`` tasks, offsets in UTF-16 units as its
    browser editor records them (``with_text=False``: the mention text left out, as some exporters do)."""
    tasks = []
    for n, (text, mentions) in enumerate(texts, start=1):
        result = []
        for mention, kind in mentions:
            i = text.index(mention)
            value = {"start": _utf16(text, i), "end": _utf16(text, i + len(mention)), "labels": [kind]}
            if with_text:
                value["text"] = mention
            result.append({"value": value, "from_name": "label", "to_name": "text", "type": "labels"})
        tasks.append({"id": n, "data": {"text": text}, "annotations": [{"result": result}]})
    return _write(tmp_path, "project-1-at-2026.json", json.dumps(tasks, ensure_ascii=False))


TASKS = [("😀张三去北京出差", [("张三", "PER"), ("北京", "LOC")]),
         ("李四在上海", [("李四", "PER"), ("上海", "LOC")]),
         ("𠮷野家在东京🎉王五来了", [("东京", "LOC"), ("王五", "PER")])]


def test_label_studio_utf16_offsets_with_text_are_reread_and_counted(tmp_path):
    path = _label_studio_export(tmp_path, TASKS)
    report: dict = {}
    items = ner.read_ner_file(path, report=report)
    got = [ner.entity_spans(item["tags"]) for item in items]
    spans = [[(k, "".join(item["tokens"][s:e])) for k, s, e in g] for g, item in zip(got, items)]
    assert spans == [[("PER", "张三"), ("LOC", "北京")], [("PER", "李四"), ("LOC", "上海")],
                     [("LOC", "东京"), ("PER", "王五")]]
    assert report["offsets"] == "utf16" and report["n_offsets_utf16"] == 2      # the two tasks with an astral character
    data = ner.load_ner_files(path, val_fraction=0, test_fraction=0.34)
    assert data.report["n_offsets_utf16"] == 2 and data.summary()["n_offsets_utf16"] == 2


def test_utf16_offsets_without_text_are_refused_naming_the_unit_and_loaded_when_told(tmp_path):
    path = _label_studio_export(tmp_path, TASKS, with_text=False)
    with pytest.raises(DataError, match=r"item 1 of the JSON array: '😀' at character 0 is one character but 2 UTF-16 "
                                        r"units.*characters give '三去'.*UTF-16 units.*'张三'.*offsets=\"utf16\""):
        ner.read_ner_file(path)
    report: dict = {}
    items = ner.read_ner_file(path, offsets="utf16", report=report)
    assert items[0]["tags"] == ["O", "B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "O"]
    assert report["n_offsets_utf16"] == 2
    # a Python tool's file (offsets in characters): an offset inside the emoji's surrogate pair says so
    chars = _jsonl(tmp_path, "doccano.jsonl", [{"text": "😀张三去北京", "entities": [[1, 3, "PER"], [4, 6, "LOC"]]}])
    assert ner.read_ner_file(chars)[0]["tags"] == ["O", "B-PER", "I-PER", "O", "B-LOC", "I-LOC"]
    # where both readings fit, the user says which
    both = _jsonl(tmp_path, "both.jsonl", [{"text": "😀😀张三去北京", "entities": [[2, 4, "PER"], [5, 7, "LOC"]]}])
    with pytest.raises(DataError, match="line 1: '😀' at character 0 is one character but 2 UTF-16 units"):
        ner.read_ner_file(both)
    assert ner.read_ner_file(both, offsets="chars")[0]["tags"] == ["O", "O", "B-PER", "I-PER", "O", "B-LOC", "I-LOC"]
    with pytest.raises(ConfigError, match="offsets='bytes'"):
        ner.read_ner_file(chars, offsets="bytes")


def test_a_span_text_that_fits_neither_unit_names_utf16_not_only_inclusive_ends(tmp_path):
    path = _jsonl(tmp_path, "x.jsonl", [{"text": "张三", "entities": [[0, 2, "PER"]]},
                                        {"text": "😀张三去北京", "label": [{"start": 4, "end": 6, "labels": ["LOC"],
                                                                          "text": "上海"}]}])
    with pytest.raises(DataError, match=r"line 2: .*covers '北京' but names '上海'.*'😀' at character 0 counts as 2 "
                                        r"UTF-16 units.*would cover '去北'"):
        ner.read_ner_file(path)


def test_character_offsets_after_an_emoji_with_text_still_load_as_characters(tmp_path):
    path = _jsonl(tmp_path, "c.jsonl", [{"text": "😀张三去北京", "label": [
        {"start": 1, "end": 3, "labels": ["PER"], "text": "张三"}, {"start": 4, "end": 6, "labels": ["LOC"]}]}])
    report: dict = {}
    (item,) = ner.read_ner_file(path, report=report)
    assert item["tags"] == ["O", "B-PER", "I-PER", "O", "B-LOC", "I-LOC"]
    assert report["offsets"] == "chars" and report["n_offsets_utf16"] == 0


def test_spans_with_edge_spaces_are_trimmed_and_counted(tmp_path):
    text = "他 去 北京 了"
    path = _label_studio_export(tmp_path, [(text, [(" 北京", "LOC"), ("他 ", "PER")]), ("李四", [("李四", "PER")])])
    rows = json.loads(path.read_text(encoding="utf-8"))
    rows[1]["annotations"][0]["result"].append({"value": {"start": 0, "end": 0 + 1, "labels": ["PER"], "text": "李"}})
    rows.append({"data": {"text": "在 上海"}, "annotations": [{"result": [
        {"value": {"start": 1, "end": 2, "labels": ["LOC"], "text": " "}}]}]})
    path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DataError, match="overlap"):      # 李 inside 李四: still an error, trimmed or not
        ner.read_ner_file(path)
    del rows[1]["annotations"][0]["result"][-1]
    path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    report: dict = {}
    items = ner.read_ner_file(path, report=report)
    assert items[0]["tags"] == ["B-PER", "O", "O", "O", "B-LOC", "I-LOC", "O", "O"]     # no space tagged
    assert items[2]["tags"] == ["O", "O", "O", "O"]
    assert report["n_spans_trimmed"] == 2 and report["n_blank_spans_dropped"] == 1


# ----- a new user's files: line ends, trailing tabs, lone surrogates, unannotated tasks, type spellings -----------

SAMPLE = Path(__file__).resolve().parents[1] / "notebooks" / "data" / "sample_ner.conll"


@pytest.mark.parametrize("end", ["\r\n", "\r", "\r\r\n"])
def test_conll_line_ends_crlf_and_lone_cr_read_as_lf(tmp_path, end):
    """An old Mac file (lone CR) is read line by line as LF and CRLF files are, not as one sentence of one line;
    U+2028 stays a character inside its line."""
    text = SAMPLE.read_text(encoding="utf-8") + "\n\u2028\tO\n他\tO\n"
    lf = [(i["id"], i["tokens"], i["tags"]) for i in ner.read_ner_file(_write(tmp_path, "lf.conll", text))]
    other = _write(tmp_path, "other.conll", "")
    other.write_bytes(text.replace("\n", end).encode("utf-8"))
    got = [(i["id"].replace("other", "lf"), i["tokens"], i["tags"]) for i in ner.read_ner_file(other)]
    assert len(got) == 202 and got == lf
    assert got[-1][1:] == (["\u2028", "他"], ["O", "O"])


def test_conll_trailing_empty_columns_are_ignored(tmp_path):
    """A spreadsheet's export ends lines with empty columns: the tag is the last non-empty column."""
    path = _write(tmp_path, "t.conll", "张\tB-PER\t\n三\tI-PER\t\t\n在\tO\t \n北\tx\tB-LOC\t\n")
    assert ner.read_ner_file(path)[0]["tags"] == ["B-PER", "I-PER", "O", "B-LOC"]
    with pytest.raises(DataError, match=r"line 1: '张\\t\\t' has no tag"):
        ner.read_ner_file(_write(tmp_path, "u.conll", "张\t\t\n"))


def test_a_lone_surrogate_in_json_is_read_as_ufffd_counted_and_warned(tmp_path):
    """Half an emoji as a JSON escape: the tokenizer would refuse it later (a TypeError naming no file); read as
    U+FFFD, one character as it was one UTF-16 unit, so the offsets still fit; counted, located and said."""
    rows = [{"text": f"张{i}去北京", "entities": [[0, 2, "PER"], [3, 5, "LOC"]]} for i in range(20)]
    path = _write(tmp_path, "spans.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
                  + '{"text":"\\ud83d李鹏在上海","entities":[[1,3,"PER"],[4,6,"LOC"]]}\n')
    with pytest.warns(UserWarning, match=r"spans\.jsonl: 1 line\(s\) with a lone surrogate escape .* U\+FFFD: line 21"):
        data = ner.load_ner_files(path)
    (item,) = [i for s in data.splits.values() for i in s if i["id"] == "spans.jsonl:21"]
    assert item["tokens"] == list("\ufffd李鹏在上海") and item["tags"] == ["O", "B-PER", "I-PER", "O", "B-LOC", "I-LOC"]
    assert data.report["n_repaired_surrogates"] == 1 and data.report["repairs"]["train"]["surrogate_lines"] == [21]
    assert "repaired: 1 record with a lone surrogate escape (half of an emoji) read as U+FFFD" in ner.report_text(
        data.report)
    # UTF-16 offsets (Label Studio): the lone surrogate is one unit, the emoji two
    export = _write(tmp_path, "ls.json", json.dumps([{"data": {"text": "\ud83d😀张三"}, "annotations": [{"result": [
        {"value": {"start": 3, "end": 5, "labels": ["PER"], "text": "张三"}}]}]}]))
    report: dict = {}
    with pytest.warns(UserWarning, match=r"1 item\(s\) with a lone surrogate escape .*: item 1"):
        (item,) = ner.read_ner_file(export, report=report)
    assert item["tokens"] == ["\ufffd", "😀", "张", "三"] and item["tags"] == ["O", "O", "B-PER", "I-PER"]
    assert report["offsets"] == "utf16" and report["n_repaired_surrogates"] == 1


def test_label_studio_tasks_nobody_annotated_are_dropped_and_counted(tmp_path):
    """A skipped task (only a cancelled annotation) or one never annotated is no all-O sentence: dropped, counted,
    said; an annotation whose result is empty stays (the annotator saw no entity)."""
    tasks = [{"data": {"text": "张三在北京"}, "annotations": [{"result": [
                 {"value": {"start": 0, "end": 2, "labels": ["PER"], "text": "张三"}}]}]},
             {"data": {"text": "李四去了上海"}, "annotations": []},
             {"data": {"text": "王五住在广州"}, "annotations": [{"was_cancelled": True, "result": []}]},
             {"data": {"text": "今天下雨"}, "annotations": [{"result": []}]},
             {"data": {"text": "赵六到了"}},
             {"data": {"text": "孙七来自杭州"}, "annotations": [{"was_cancelled": True, "result": []}, {"result": [
                 {"value": {"start": 0, "end": 2, "labels": ["PER"], "text": "孙七"}}]}]}]
    path = _write(tmp_path, "project.json", json.dumps(tasks, ensure_ascii=False))
    report: dict = {}
    items = ner.read_ner_file(path, report=report)
    assert [("".join(i["tokens"]), i["tags"][0]) for i in items] == [("张三在北京", "B-PER"), ("今天下雨", "O"),
                                                                      ("孙七来自杭州", "B-PER")]
    assert report["n_unannotated_dropped"] == 3
    assert report["unannotated_ids"] == ["project.json#2", "project.json#3", "project.json#5"]
    data = ner.load_ner_files(path, val_fraction=0, test_fraction=0)
    assert data.report["n_unannotated_dropped"] == 3 and data.report["n_read"] == 6 and data.report["n_train"] == 3
    assert data.report["sources"]["train"]["drop_ids"]["unannotated"] == report["unannotated_ids"]
    assert "dropped: 3 Label Studio tasks without an annotation (skipped or cancelled)" in ner.report_text(data.report)
    nobody = _write(tmp_path, "nobody.json", json.dumps(tasks[1:3], ensure_ascii=False))
    with pytest.raises(DataError, match=r"nobody\.json holds no annotated task: 2 tasks without an annotation"):
        ner.read_ner_file(nobody)


def test_entity_types_that_differ_only_in_case_or_width_are_warned(tmp_path):
    """PER, per and full-width ＰＥＲ would be three types, silently: warned with the fix, as labels are."""
    rows = [{"text": f"张{i}去北京", "entities": [[0, 2, "PER"], [3, 5, "LOC"]]} for i in range(10)]
    rows += [{"text": "李四", "entities": [[0, 2, "per"]]}, {"text": "王五", "entities": [[0, 2, "ＰＥＲ"]]}]
    path = _jsonl(tmp_path, "case.jsonl", rows)
    with pytest.warns(UserWarning, match=r"Entity types that differ only in case or character width become separate "
                                         r"types: \['PER', 'per', 'ＰＥＲ'\]\. If each group is one type"):
        data = ner.load_ner_files(path, val_fraction=0, test_fraction=0)
    assert data.report["type_case_variants"] == [["PER", "per", "ＰＥＲ"]]
    train = _jsonl(tmp_path, "train.jsonl", rows[:10])
    test = _jsonl(tmp_path, "test.jsonl", [{"text": "李四", "entities": [[0, 2, "per"]]}])
    with pytest.raises(DataError, match=r"never in training \(\['LOC', 'PER'\]\) \('per' vs 'PER' differ only in "
                                        r"case/width\)"), pytest.warns(UserWarning, match=r"\['PER', 'per'\]"):
        ner.load_ner_files(train, test=test, val_fraction=0)


@pytest.mark.slow
def test_the_docs_first_block_says_what_a_run_gives():
    """docs/ner.md's first block, run as written: its first training item, its labels and its counts table are what
    the run gives (the item's lists are prefixes, ``...`` the rest)."""
    import re

    doc = (SAMPLE.parents[2] / "docs" / "ner.md").read_text(encoding="utf-8")
    block = doc.split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict = {}
    exec(compile(block, "docs/ner.md", "exec"), scope)  # noqa: S102  the documented lines, as a user runs them
    data = scope["data"]
    said = json.loads(re.search(r'data\.splits\["train"\]\[0\] +# (\{.*\})', block).group(1).replace(", ...", ""))
    first = data.splits["train"][0]
    assert first["id"] == said["id"]
    assert first["tokens"][:len(said["tokens"])] == said["tokens"] and first["tags"][:len(said["tags"])] == said["tags"]
    assert data.labels == json.loads(re.search(r"data\.labels +# (\[.*\])", block).group(1))
    table = data.table()
    rows = re.findall(r"^\| (\w+) \| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \|$", doc.split("Counts at seed 0", 1)[1], re.M)
    assert [r[0] for r in rows] == list(table.index)
    counts = [[int(v.replace(",", "")) for v in r[1:]] for r in rows]
    assert counts == table[["train", "validation", "test"]].values.tolist()
