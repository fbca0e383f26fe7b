"""A corpus as users have it: a wiki_zh dump folder, datasets objects, BOM/CRLF/NUL, non-string fields,
parquet column types, symlinked folders, MediaWiki markup, and the trained vocabulary's shortfall warning."""
from __future__ import annotations

import codecs
import gzip
import json
import os
import random
import warnings
from collections import Counter
from pathlib import Path

import pytest

from nbkit.corpus import manifest as mf
from nbkit.corpus import prepare_corpus
from nbkit.corpus.readers import Chunk, iter_chunks
from nbkit.corpus.sources import resolve_inputs
from nbkit.corpus.worker import clean_chunk, iter_texts
from nbkit.errors import ConfigError, DataError
from tests.corpus_helpers import docs, load_split, prepare, review_lines, small_tokenizer, write_txt

# Real zhwiki source patterns (infobox with a language conversion inside, <ref> with cite templates, bold,
# links with labels, a file link whose caption holds a link, a comment, a table, headings, a list,
# templates, categories in both languages, an interwiki link).
BEIJING = """{{about|中华人民共和国的首都|其他用法|北京 (消歧义)}}
{{Infobox settlement
|name = 北京市
|native_name = -{zh-hans:北京市;zh-hant:北京市}-
|image_skyline = Beijing montage.png
|population_total = 21893095<ref name="census2020">{{cite web |url=http://www.stats.gov.cn/ |title=北京市第七次全国人口普查公报 |publisher=北京市统计局 |date=2021-05-19}}</ref>
}}
'''北京市'''，简称“'''京'''”，古称'''燕京'''、'''北平'''，是[[中华人民共和国]]的[[首都]]、[[直辖市]]和[[国家中心城市]]，位于[[华北平原]]北部。<ref>{{Cite book|title=北京志|publisher=北京出版社|year=2001}}</ref>北京是中国的[[政治]]、[[文化]]、[[国际交往]]中心。

== 历史 ==
{{main|北京历史}}
[[File:Forbidden City Beijing Shenwumen Gate.JPG|thumb|250px|[[故宫]]神武门]]
北京有着三千余年的建城史，[[金朝]]、[[元朝]]、[[明朝]]、[[清朝]]曾在此定都。<!-- 待补充 -->

=== 地理 ===
北京的[[气候]]为典型的[[温带季风气候|暖温带半湿润大陆性季风气候]]，年平均气温约12&nbsp;°C。

{| class="wikitable" style="text-align:center"
|+ 北京气候数据
|-
! 月份 !! 1月 !! 7月
|-
| 平均气温 || −3.1 || 26.7
|}

== 参见 ==
* [[北京市行政区划]]
* [[北京地铁]]

== 参考文献 ==
{{reflist|2}}

{{中华人民共和国省级行政区}}
[[Category:北京市| ]]
[[分类:中华人民共和国直辖市]]
[[en:Beijing]]"""

BEIJING_TEXT = ("北京市，简称“京”，古称燕京、北平，是中华人民共和国的首都、直辖市和国家中心城市，位于华北平原北部。"
                "北京是中国的政治、文化、国际交往中心。\n\n历史\n\n北京有着三千余年的建城史，金朝、元朝、明朝、清朝曾在此"
                "定都。\n\n地理\n北京的气候为典型的暖温带半湿润大陆性季风气候，年平均气温约12\xa0°C。\n\n参见\n北京市行政区划\n"
                "北京地铁\n\n参考文献")

# An infobox holding a list template, {{lang-de|...}}, nested templates in a <ref>, {{le|...}}, <math>,
# a hidden conversion rule -{H|...}-, ''italic'', a variant conversion, <br />, an external link, <gallery>,
# a magic word.
EINSTEIN = """{{Infobox scientist
| name = 阿尔伯特·爱因斯坦
| birth_date = {{birth date|1879|3|14}}
| awards = {{plainlist|
* [[诺贝尔物理学奖]]（1921年）
}}
}}
'''阿尔伯特·爱因斯坦'''（{{lang-de|Albert Einstein}}，1879年3月14日－1955年4月18日）是一位[[德国]]出生的[[理论物理学家]]<ref name="bio">{{refn|{{cite journal|last=Whittaker|title=Albert Einstein|year=1955}}}}</ref>，由{{le|约翰·惠勒|John Archibald Wheeler}}等人推崇。他创立了[[相对论]]，其质能等价公式<math>E = mc^2</math>被称为“世界上最著名的方程”。-{H|zh-cn:软件;zh-tw:軟體;}-他的''光电效应''研究为-{zh-hans:量子力学;zh-hant:量子力學}-奠基。<br />
更多资料见[https://www.nobelprize.org/ 诺贝尔奖官网]。
<gallery>
File:Einstein1.jpg|1904年
</gallery>
__NOTOC__
[[de:Albert Einstein]]
[[Category:诺贝尔物理学奖获得者]]"""

EINSTEIN_TEXT = ("阿尔伯特·爱因斯坦（Albert Einstein，1879年3月14日－1955年4月18日）是一位德国出生的理论物理学家，由约翰·惠勒"
                 "等人推崇。他创立了相对论，其质能等价公式被称为“世界上最著名的方程”。他的光电效应研究为量子力学奠基。\n\n"
                 "更多资料见诺贝尔奖官网。")

MARKUP = ("[[", "]]", "{{", "}}", "'''", "''", "<ref", "</", "{|", "|}", "-{", "}-", "==", "Category", "分类:", "File:")


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return small_tokenizer(tmp_path_factory.mktemp("tok"))


# ----- the markup cleaner -------------------------------------------------------------------------
def test_markup_cleaner_on_real_zhwiki_patterns():
    from nbkit.corpus.wikimarkup import strip_markup

    assert strip_markup(BEIJING) == BEIJING_TEXT
    assert strip_markup(EINSTEIN) == EINSTEIN_TEXT
    assert strip_markup("[[:en:Beijing|北京的英文条目]]与[[北京市|]]、[[上海]]") == "北京的英文条目与北京市、上海"
    plain = "这家酒店的服务很好，下次还来。A < b，价格[便宜]。"
    assert strip_markup(plain) is plain                              # no markup: the text itself, untouched
    assert strip_markup("{{哈哈 这是评论") == "{{哈哈 这是评论"        # unbalanced: left as written, nothing eaten
    assert strip_markup("#重定向 [[北京市]]") == "重定向 北京市"        # a redirect: the worker drops it (markup_only)


# ----- a wiki_zh dump folder as it ships ------------------------------------------------------------
def _articles(n: int) -> list[dict]:
    rng = random.Random(0)
    lines = review_lines(4 * n, 100, which="pos")
    out = [{"title": "北京市", "text": BEIJING}, {"title": "阿尔伯特·爱因斯坦", "text": EINSTEIN}]
    for i in range(n):
        a, b = lines[4 * i], lines[4 * i + 1]
        k = rng.randrange(2, 6)
        out.append({"title": a[:4], "text": (f"'''{a[:4]}'''是[[{a[:k]}]]{a[k:]}<ref>{{{{cite web|url=http://x.cn/{i}}}}}"
                                             f"</ref>\n\n== 评价 ==\n{b}\n[[分类:评论]]\n[[Category:测试]]")})
    out.append({"title": "北京", "text": "#重定向 [[北京市]]"})                           # a redirect page
    out.append({"title": "北京 (消歧义)", "text": "{{disambig}}\n[[Category:消歧义]]"})    # markup only
    out.append({"title": "Python", "text": "Python is a programming language that lets you work quickly."})
    for i, art in enumerate(out):
        art.update(id=str(i + 10), url=f"https://zh.wikipedia.org/wiki?curid={i + 10}")
    return out


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps({k: r[k] for k in ("id", "url", "title", "text")}, ensure_ascii=False) + "\n"
                   for r in rows).encode("utf-8")


def wiki_folder(tmp_path: Path, files: dict[str, bytes], linked: bytes) -> Path:
    """``tmp_path/wiki_zh`` as wikiextractor ships it: ``files`` at their paths under it (``"AA/wiki_00"``,
    extensionless), and ``AC/wiki_00`` (``linked``) in a folder elsewhere that ``wiki_zh/AC`` links to."""
    root = tmp_path / "wiki_zh"
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (tmp_path / "elsewhere" / "AC").mkdir(parents=True)
    (tmp_path / "elsewhere" / "AC" / "wiki_00").write_bytes(linked)
    os.symlink("../elsewhere/AC", root / "AC")                                       # a folder on another disk
    return root


def test_a_wiki_zh_folder_as_shipped_just_works(tmp_path, capsys):
    arts = _articles(12)
    root = wiki_folder(tmp_path, {"AA/wiki_00": _jsonl(arts[:5]), "AA/wiki_01": _jsonl(arts[5:8]),
                                  "AB/wiki_00": _jsonl(arts[8:11]),
                                  "AB/wiki_01": gzip.compress(_jsonl(arts[11:14]))},  # gzipped, still no extension
                       linked=_jsonl(arts[14:]))
    (root / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1" + bytes(range(256)) * 4)
    from nbkit.text.tokenizer import train_wordpiece

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # a small corpus: the vocabulary is under the request
        train_wordpiece([a["text"] for a in arts], 3000, tmp_path / "tok", model_max_length=128)
    m = prepare_corpus(str(root), tmp_path / "store", tokenizer=str(tmp_path / "tok"), num_workers=1,
                       heldout_share=0.0)
    names = [os.path.relpath(s["path"], tmp_path) for s in m["sources"]]
    assert names == ["wiki_zh/AA/wiki_00", "wiki_zh/AA/wiki_01", "wiki_zh/AB/wiki_00", "wiki_zh/AB/wiki_01",
                     "elsewhere/AC/wiki_00"]
    assert all(s["kind"] == "jsonl" and s["detected"].startswith("content: ") and "JSON lines" in s["detected"]
               and s["wikipedia"] for s in m["sources"])
    assert [s["compression"] for s in m["sources"]] == [None, None, None, "gz", None]
    assert m["inputs"]["skipped"] == [{"path": str(root / ".DS_Store"), "reason": "hidden"}]
    printed = capsys.readouterr().out
    assert "5 (0 by file name, 5 by content)" in printed and ".DS_Store: hidden" in printed
    # the redirect and the markup-only page are dropped, the English page by the Wikipedia CJK share
    assert (m["dropped"]["markup_only"], m["dropped"]["non_cjk"]) == (2, 1)
    assert m["counts"]["n_texts_kept"] == len(arts) - 3
    assert m["repaired"]["markup_stripped"] == len(arts) - 3      # the kept articles (the English one has none)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    stored = docs(tmp_path / "store", tok)
    assert not [d for d in stored if any(x in d for x in MARKUP)]
    assert stored[0] == "".join(BEIJING_TEXT.split()).lower()          # the prose, as the tokenizer sees it
    assert stored[1].startswith("阿尔伯特·爱因斯坦（albert") and "量子力学奠基" in stored[1]


# ----- datasets objects ----------------------------------------------------------------------------
def test_a_datasets_dataset_is_an_input_streamed_in_batches(tmp_path, tok_dir):
    from datasets import Dataset, DatasetDict

    texts = review_lines(120, 200)
    ds = Dataset.from_dict({"text": texts, "n": list(range(len(texts)))})
    m = prepare(ds, tmp_path / "ds", tok_dir, heldout_share=0.0, chunk_items=25)
    ref = prepare(write_txt(tmp_path / "t.txt", texts), tmp_path / "txt", tok_dir, heldout_share=0.0, chunk_items=25)
    assert (load_split(tmp_path / "ds")[0] == load_split(tmp_path / "txt")[0]).all()
    assert m["counts"]["n_texts_kept"] == len(texts)
    assert m["sources"][0]["path"] == f"datasets.Dataset(fingerprint={ds._fingerprint})"
    assert m["sources"][0]["sha256"] == ds._fingerprint and m["sources"][0]["kind"] == "dataset"
    assert prepare(ds, tmp_path / "ds", tok_dir, heldout_share=0.0, chunk_items=25)["timing"] == m["timing"]  # reused
    other = Dataset.from_dict({"text": texts[:-1]})
    with pytest.raises(ConfigError, match="input added: datasets.Dataset.*input removed"):
        prepare(other, tmp_path / "ds", tok_dir, heldout_share=0.0, chunk_items=25)
    # batches of chunk_items rows, never the whole column at once
    chunks = list(iter_chunks(resolve_inputs(ds), "text", chunk_items=25))
    assert [len(c.items) for c in chunks] == [25, 25, 25, 25, 20] and ref["counts"] == m["counts"]
    # a DatasetDict: its train split, named
    dd = DatasetDict({"train": ds, "test": Dataset.from_dict({"text": ["测试集的文本不进来"]})})
    assert resolve_inputs(dd)[0].path.endswith("split train)")
    with pytest.raises(ConfigError, match=r"splits \['a', 'b'\] and no 'train' split: pass the split"):
        resolve_inputs(DatasetDict({"a": ds, "b": ds}))
    with pytest.raises(ConfigError, match=r"no column 'body' \(columns: \['text', 'n'\]\)"):
        resolve_inputs(ds, text_field="body")
    with pytest.raises(ConfigError, match=r"column 'n' of the Dataset is int64 \(Arrow type\), not text"):
        resolve_inputs(ds, text_field="n")
    with pytest.raises(ConfigError, match=r"inputs is a dict: .*datasets.Dataset.from_dict\(d\)"):
        prepare({"text": texts}, tmp_path / "d", tok_dir)
    with pytest.raises(ConfigError, match=r"inputs\[1\] is an int: prepare_corpus takes a path"):
        prepare([str(tmp_path / "t.txt"), 5], tmp_path / "d", tok_dir)


def test_an_iterable_dataset_is_streamed_and_said_not_resumable(tmp_path, tok_dir):
    from datasets import Dataset

    texts = review_lines(60, 400)
    stream = Dataset.from_dict({"text": texts}).to_iterable_dataset()
    with pytest.warns(UserWarning, match="no fingerprint.*cannot be resumed after a stop, nor its store reused"):
        m = prepare(stream, tmp_path / "s", tok_dir, heldout_share=0.0, chunk_items=16)
    assert m["counts"]["n_texts_kept"] == len(texts) and not m["sources"][0]["sha256"]
    with pytest.raises(ConfigError, match="holds a corpus store, and .*IterableDataset has no fingerprint.*overwrite"):
        prepare(stream, tmp_path / "s", tok_dir, heldout_share=0.0, chunk_items=16)
    with pytest.warns(UserWarning, match="cannot be resumed"):
        again = prepare(stream, tmp_path / "s", tok_dir, heldout_share=0.0, chunk_items=16, overwrite=True)
    assert again["counts"] == m["counts"]


# ----- BOM, CRLF, NUL: a whole file needs more than one byte of evidence -------------------------------
def test_bom_crlf_and_nul_bytes_are_handled_line_by_line(tmp_path, tok_dir):
    lines = review_lines(2300, 10)
    d = tmp_path / "in"
    d.mkdir()
    bom = codecs.BOM_UTF8
    (d / "a.jsonl").write_bytes(bom + "".join(json.dumps({"text": t}, ensure_ascii=False) + "\r\n"
                                              for t in lines[:100]).encode())
    (d / "b.txt").write_bytes(bom + "".join(t + "\r\n" for t in lines[100:200]).encode())
    (d / "c.json").write_bytes(bom + ("[\r\n" + ",\r\n".join(json.dumps({"text": t}, ensure_ascii=False)
                                                             for t in lines[200:300]) + "\r\n]").encode())
    raw = [t.encode() for t in lines[300:2300]]
    for k in (2, 499, 1998):                                        # lines 3, 500 and 1999 hold a NUL byte
        raw[k] = raw[k][:6] + b"\x00" + raw[k][6:]
    (d / "d.txt").write_bytes(b"\n".join(raw) + b"\n")
    (d / "e.txt").write_bytes(random.Random(0).randbytes(20000))   # binary: about 10 % control bytes
    (d / "f.txt").write_bytes(codecs.BOM_UTF16_LE + "\n".join(lines[:50]).encode("utf-16-le"))
    (d / "g").write_bytes(random.Random(1).randbytes(5000))        # no extension, binary content: left out
    m = prepare(d, tmp_path / "out", tok_dir, heldout_share=0.0)
    drop = {k: v for k, v in m["dropped"].items() if v}
    assert drop == {"nul_byte": 3, "binary_file": 1, "not_utf8_file": 1}
    assert m["counts"]["n_texts_kept"] == 2300 - 3
    where = {(Path(p["path"]).name, p["line"], p["reason"]) for p in m["problems"]}
    assert {("d.txt", 3, "nul_byte"), ("d.txt", 500, "nul_byte"), ("d.txt", 1999, "nul_byte"),
            ("e.txt", None, "binary_file"), ("f.txt", None, "not_utf8_file")} <= where
    note = next(p["detail"] for p in m["problems"] if p["reason"] == "not_utf8_file")
    assert "UTF-16 (little-endian" in note and "iconv -f UTF-16" in note
    assert m["inputs"]["skipped"][0]["path"].endswith("/g") and "binary" in m["inputs"]["skipped"][0]["reason"]
    texts = list(iter_texts([d / "a.jsonl", d / "b.txt", d / "c.json"]))   # as the worker reads them
    assert texts == lines[:300]                                                # no BOM, no CR, line 1 kept
    with pytest.raises(DataError, match=r"d\.txt, line 3: nul_byte \(a NUL byte at byte 7 of the line\)"):
        prepare(d / "d.txt", tmp_path / "raise", tok_dir, errors="raise")


# ----- a value of the wrong type is named with its type ----------------------------------------------
ODD = [None, 12345, 1.5, True, {"zh": "物流很快"}, ["第一段很好。", "第二段也不错。"], ["好", 1, 2], []]
NAMED = ["text is null", "text is int", "text is float", "text is bool", "text is dict (keys: ['zh'])",
         None, "text is a list of 2 int, 1 str", "text is an empty list"]


def _settings(**kw):
    s = mf.check_settings(kw)
    s.update(unicode_normalization="none", cjk_share_by_source={})
    return s


@pytest.mark.parametrize("kind", ["jsonl", "json", "parquet"])
def test_a_non_string_text_field_is_named_with_its_type(kind):
    if kind == "jsonl":
        items = [json.dumps({"text": v}, ensure_ascii=False).encode() for v in ODD]
    elif kind == "json":
        items = [{"text": v} for v in ODD]
    else:   # a parquet column's values (list<string> for the paragraphs)
        items = [None, ["第一段很好。", "第二段也不错。"], []]
    texts, counts, problems, _, _ = clean_chunk(Chunk(0, kind, 1, items), _settings(), f"x.{kind}")
    assert texts == ["第一段很好。\n第二段也不错。"] and counts["paragraph_lists_joined"] == 1
    found = {p["line"]: (p["reason"], p["detail"]) for p in problems}
    want = NAMED if kind != "parquet" else ["text is null", None, "text is an empty list"]
    if kind != "parquet":   # six not_text values: the first 5 per (file, reason) are located, all counted
        assert (counts["missing"], counts["not_text"]) == (1, 6) and 8 not in found
        want = want[:7]
    for line, detail in enumerate(want, start=1):
        if detail is None:
            assert found[line][0] == "paragraph_lists_joined" and "list of 2 str: joined" in found[line][1]
        else:
            assert found[line] == ("missing" if "null" in detail else "not_text", detail)
    raw = [json.dumps({"text": v}).encode() for v in ("好的很好", 1.5)]
    with pytest.raises(DataError, match=r"x\.jsonl, line 2: not_text \(text is float\)"):
        clean_chunk(Chunk(0, "jsonl", 1, raw), _settings(errors="raise"), "x.jsonl")


def test_errors_raise_stops_at_a_non_string_field(tmp_path, tok_dir):
    rows = [{"text": t} for t in review_lines(20)] + [{"text": ["好", 1]}]
    (tmp_path / "x.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DataError, match=r"x\.jsonl, line 21: not_text \(text is a list of 1 str, 1 int\)"):
        prepare(tmp_path / "x.jsonl", tmp_path / "out", tok_dir, errors="raise")


# ----- parquet text columns of every text-like Arrow type ------------------------------------------
def test_every_text_like_parquet_column_is_read_and_others_named(tmp_path, tok_dir):
    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = review_lines(250, 700)
    d = tmp_path / "in"
    d.mkdir()
    cols = {"a_string": pa.array(lines[:50], pa.string()), "b_large": pa.array(lines[50:100], pa.large_string()),
            "c_dict": pa.array(lines[100:150], pa.string()).dictionary_encode(),
            "d_binary": pa.array([t.encode() for t in lines[150:199]] + [b"\xff\xfe not utf-8"], pa.binary()),
            "e_large_binary": pa.array([t.encode() for t in lines[200:250]], pa.large_binary()),
            "f_int": pa.array(range(10), pa.int64()),
            "g_struct": pa.array([{"zh": t} for t in lines[:10]])}
    for name, arr in cols.items():
        pq.write_table(pa.table({"text": arr}), d / f"{name}.parquet")
    m = prepare(d, tmp_path / "out", tok_dir, heldout_share=0.0)
    assert m["counts"]["n_texts_kept"] == 249
    assert {k: v for k, v in m["dropped"].items() if v} == {"bad_utf8": 1, "not_text": 2}
    where = {(Path(p["path"]).name, p["line"], p["reason"]): p["detail"] for p in m["problems"]}
    assert ("d_binary.parquet", 50, "bad_utf8") in where
    assert where[("f_int.parquet", None, "not_text")].startswith("column 'text' is int64 (Arrow type), not text")
    assert "struct<zh: string> (Arrow type)" in where[("g_struct.parquet", None, "not_text")]


# ----- symlinks: followed, loops detected, a file reached twice read once ------------------------------
def test_symlinked_folders_are_followed_with_loops_detected(tmp_path, tok_dir):
    lines = review_lines(300, 900)
    data, wiki = tmp_path / "data", tmp_path / "elsewhere" / "wiki"
    data.mkdir()
    wiki.mkdir(parents=True)
    write_txt(data / "local.txt", lines[:100])
    write_txt(wiki / "a.txt", lines[100:200])
    write_txt(wiki / "b.txt", lines[200:300])
    os.symlink("../elsewhere/wiki", data / "wiki")
    os.symlink("../wiki", wiki / "again")                 # a loop: wiki/again/again/... is wiki
    os.symlink("../elsewhere/wiki/a.txt", data / "one.txt")   # a file reached twice
    os.link(data / "local.txt", data / "hard.txt")        # a hard link: the same file
    os.symlink("nowhere", data / "broken")
    m = prepare(data, tmp_path / "out", tok_dir, heldout_share=0.0)
    assert sorted(os.path.relpath(s["path"], tmp_path) for s in m["sources"]) == [
        "data/hard.txt", "elsewhere/wiki/a.txt", "elsewhere/wiki/b.txt"]
    assert m["counts"]["n_texts_kept"] == 300
    reasons = Counter(x["reason"].split(" (")[0].split(":")[0] for x in m["inputs"]["skipped"])
    assert reasons == {"a link to a folder already read": 1, "the same file as " + str(wiki / "a.txt"): 1,
                       "the same file as " + str(data / "hard.txt"): 1, "a broken link": 1}


# ----- the trained vocabulary's shortfall warns whatever the corpus size ------------------------------
def test_a_vocabulary_well_under_the_request_warns(tmp_path):
    from nbkit.text.tokenizer import train_wordpiece

    texts = review_lines(300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        full = len(train_wordpiece(texts, 20000, tmp_path / "t0", model_max_length=64))   # what the texts hold
    with pytest.warns(UserWarning, match=f"has {full:,} tokens, far below vocab_size={int(full / 0.7):,}"):
        train_wordpiece(texts, int(full / 0.7), tmp_path / "t1", model_max_length=64)


@pytest.mark.parametrize("sample_mb, why", [(0.03, r"first sample_mb=0.03 MB: a larger sample_mb"),
                                            (16.0, "the sample was the whole corpus")])
def test_the_store_says_why_its_vocabulary_is_short_at_any_size(tmp_path, sample_mb, why):
    raw = write_txt(tmp_path / "c.txt", review_lines(1500))
    kw = dict(num_workers=1, progress=False, heldout_share=0.0, sample_mb=sample_mb)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        full = prepare_corpus(raw, tmp_path / "s0", vocab_size=20000, **kw)["tokenizer"]["vocab_size"]
    asked = int(full / 0.7)
    with pytest.warns(UserWarning, match=rf"tokenizer has {full:,} tokens, 70% of vocab_size={asked:,}: .*{why}"):
        m = prepare_corpus(raw, tmp_path / "s1", vocab_size=asked, **kw)
    assert m["tokenizer"]["vocab_size_asked"] == asked and why.split(":")[0].replace("\\", "") in m["tokenizer"]["note"]


def test_a_vocabulary_above_the_request_says_every_character_is_kept(tmp_path):
    raw = write_txt(tmp_path / "c.txt", review_lines(1500))
    kw = dict(num_workers=1, progress=False, heldout_share=0.0)
    with pytest.warns(UserWarning, match=r"tokenizer has ([\d,]+) tokens, \d+% of vocab_size=300: WordPiece keeps "
                                         r"every distinct character .*Pass vocab_size=\1 or more"):
        m = prepare_corpus(raw, tmp_path / "s", vocab_size=300, **kw)
    assert m["tokenizer"]["vocab_size"] > 300 / 0.9 and "every distinct character" in m["tokenizer"]["note"]


def test_the_pretraining_recipe_takes_a_datasets_object_keyed_by_its_fingerprint(runs_tmp):
    from datasets import Dataset, DatasetDict

    from nbkit import jsonio
    from nbkit.recipes.pretraining import PretrainConfig, store_dir

    ds = Dataset.from_dict({"text": ["北京是中国的首都。", "今天天气很好。"]})
    cfg = PretrainConfig.for_scale("smoke", corpus=ds)
    assert cfg.corpus is ds
    where = store_dir(cfg)
    assert where.parent == runs_tmp / "corpus" and where.name.startswith("dataset-")
    assert store_dir(PretrainConfig.for_scale("smoke", corpus=Dataset.from_dict({"text": ["另一段文本。"]}))) != where
    assert store_dir(PretrainConfig.for_scale("smoke", corpus=ds)) == where            # same fingerprint, same store
    assert cfg.to_dict()["corpus"] == f"datasets.Dataset(fingerprint={ds._fingerprint})"
    # a dict of splits counts by the split read (its train one): the store key and metrics.json say the same
    splits = DatasetDict(train=ds, test=Dataset.from_dict({"text": ["测试。"]}))
    keyed = PretrainConfig.for_scale("smoke", corpus=splits)
    assert keyed.to_dict()["corpus"] == f"datasets.Dataset(fingerprint={ds._fingerprint}, split train)"
    assert store_dir(keyed) != where and store_dir(keyed) == store_dir(PretrainConfig.for_scale("smoke", corpus=splits))
    with pytest.raises(ConfigError, match=r"splits \['a', 'b'\] and no 'train' split"):
        store_dir(PretrainConfig.for_scale("smoke", corpus=DatasetDict(a=ds, b=ds)))
    jsonio.dumps(cfg.to_dict())                                                         # metrics.json can hold it
    with pytest.raises(ConfigError, match="corpus=3: expected a string or a list or a datasets Dataset"):
        PretrainConfig.for_scale("smoke", corpus=3)
