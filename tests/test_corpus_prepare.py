"""nbkit.corpus.prepare_corpus: formats, the store's contract, dedup, held-out rule, workers, reuse, changes."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from nbkit.corpus import prepare_corpus
from nbkit.corpus.prepare import CorpusProgress, HashSet
from nbkit.corpus.vocab import heldout_cut
from nbkit.errors import ConfigError
from tests.corpus_helpers import docs, load_split, review_lines, store_files, write_jsonl, write_txt


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    from nbkit.text.tokenizer import train_wordpiece

    d = tmp_path_factory.mktemp("tok")
    # every character of the test texts is in the vocabulary, so decoding gives the normalised text back
    train_wordpiece(review_lines(500) + review_lines(300, which="pos") + ["ＡＢＣ１２３ＧＤＰ增长７．８％"], 400, d,
                    model_max_length=128)
    return d


@pytest.fixture(scope="module")
def tok(tok_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tok_dir))


def norm(text: str) -> str:
    """What decoding a stored document gives: lowercase, no spaces (the default tokenizer has no NFKC)."""
    return text.lower().replace(" ", "")


def run(inputs, out, tok_dir=None, **kw):
    kw.setdefault("num_workers", 1)
    kw.setdefault("progress", False)
    if tok_dir is not None:
        kw.setdefault("tokenizer", str(tok_dir))
    return prepare_corpus(inputs, out, **kw)


def test_formats_give_the_same_store(tmp_path, tok_dir):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    lines = review_lines(120)
    jl = write_jsonl(tmp_path / "c.jsonl", lines)
    variants = {"txt": write_txt(tmp_path / "c.txt", lines), "jsonl": jl}
    variants["gz"] = tmp_path / "c.jsonl.gz"
    variants["gz"].write_bytes(gzip.compress(jl.read_bytes()))
    variants["zst"] = tmp_path / "c.txt.zst"
    variants["zst"].write_bytes(zstandard.ZstdCompressor().compress(variants["txt"].read_bytes()))
    variants["json_array"] = tmp_path / "c.json"
    variants["json_array"].write_text(json.dumps([{"text": t} for t in lines], ensure_ascii=False, indent=1))
    variants["parquet"] = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": lines, "n": list(range(len(lines)))}), variants["parquet"], row_group_size=50)
    variants["parquet_zst"] = tmp_path / "p.parquet.zst"
    variants["parquet_zst"].write_bytes(zstandard.ZstdCompressor().compress(variants["parquet"].read_bytes()))
    stores = {}
    for name, path in variants.items():
        m = run(path, tmp_path / f"out-{name}", tok_dir, heldout_share=0.1, chunk_items=32)
        assert m["counts"]["n_texts_kept"] == len(lines), (name, m["dropped"], m["problems"])
        stores[name] = (load_split(tmp_path / f"out-{name}"), load_split(tmp_path / f"out-{name}", "validation"))
    ref = stores["txt"]
    for name, got in stores.items():
        for a, b in zip(got, ref):
            assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), name


def test_store_contract_and_word_starts(tmp_path, tok_dir, tok):
    texts = ["我爱北京天安门。", "今天天气很好，我们去公园散步吧", "ＧＤＰ增长７．８％左右"]
    m = run(write_txt(tmp_path / "a.txt", texts), tmp_path / "out", tok_dir, heldout_share=0.0, segmenter="jieba")
    assert m["format"] == "nbkit-corpus/1" and m["complete"] is True and m["dtype"] == "uint16"
    assert m["sep_id"] == tok.sep_token_id and m["cls_id"] == tok.cls_token_id
    ids, wst = load_split(tmp_path / "out")
    assert len(ids) == len(wst) == m["splits"]["train"]["n_tokens"] == m["counts"]["n_tokens"]
    sep_at = np.flatnonzero(ids == m["sep_id"])
    assert len(sep_at) == 3 and sep_at[-1] == len(ids) - 1 and wst[sep_at].all()
    # 我|爱|北京|天安门|。 : word starts at the first token of each jieba word
    assert wst[: sep_at[0]].tolist() == [1, 1, 1, 0, 1, 0, 0, 1]
    # no NFKC, as the tokenizer: full-width GDP/digits stay full-width, with the tokenizer's own ids
    assert docs(tmp_path / "out", tok)[2] == "ｇｄｐ增长７．８％左右"
    assert ids[sep_at[1] + 1:sep_at[2]].tolist() == tok(texts[2], add_special_tokens=False)["input_ids"]
    assert m["splits"]["validation"] == {"shards": [], "n_tokens": 0, "n_docs": 0}
    src = m["sources"][0]
    assert src["kind"] == "txt" and src["compression"] is None and src["size_bytes"] > 0


def test_dedup_is_global_first_kept_and_nfkc_aware(tmp_path, tok_dir, tok):
    lines = review_lines(30)
    a = write_txt(tmp_path / "a.txt", lines[:20])
    # repeats across files, within a file, and a full-width copy equal after NFKC (the dedup key is NFKC
    # whatever the tokenizer): the first form seen is kept, as written
    b = write_jsonl(tmp_path / "b.jsonl", [lines[3], lines[25], lines[25], "ＡＢＣ１２３是数字", "ABC123是数字"])
    m = run([a, b], tmp_path / "out", tok_dir, heldout_share=0.0)
    assert m["dropped"]["duplicate"] == 3
    assert m["counts"]["n_texts_kept"] == 22
    got = docs(tmp_path / "out", tok)
    assert got[:20] == [norm(t) for t in lines[:20]]
    assert got[20:] == [norm(lines[25]), "ａｂｃ１２３是数字"]


def test_heldout_by_hash_is_stable_and_follows_the_rule(tmp_path, tok_dir, tok):
    import hashlib
    import unicodedata

    def blake2b_64(text):   # the manifest's rule, written out: blake2b, 8 bytes, little-endian, of the NFKC form
        digest = hashlib.blake2b(unicodedata.normalize("NFKC", text).encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "little")

    lines = review_lines(400)
    small = run(write_txt(tmp_path / "s.txt", lines[:200]), tmp_path / "o1", tok_dir, heldout_share=0.2)
    big = run(write_txt(tmp_path / "b.txt", lines[200:] + lines[:200][::-1]), tmp_path / "o2", tok_dir,
              heldout_share=0.2)
    assert 0 < small["splits"]["validation"]["n_docs"] < 200
    v_small = set(docs(tmp_path / "o1", tok, "validation"))
    v_big = set(docs(tmp_path / "o2", tok, "validation"))
    expected = {norm(t) for t in lines[:200] if blake2b_64(t) < heldout_cut(0.2)}
    assert v_small == expected
    assert v_small <= v_big  # the same texts stay held out in a larger corpus, in another order
    assert "h < share * 2**64" in big["heldout"]["rule"]


def test_one_and_two_workers_give_byte_identical_stores(tmp_path):
    lines = review_lines(900)
    src = [write_txt(tmp_path / "a.txt", lines[:500]), write_jsonl(tmp_path / "b.jsonl", lines[400:])]
    kw = dict(vocab_size=300, heldout_share=0.05, chunk_items=64, shard_tokens=3000)  # tokenizer trained too
    m1 = run(src, tmp_path / "w1", num_workers=1, **kw)
    m2 = run(src, tmp_path / "w2", num_workers=2, **kw)
    assert len(m1["splits"]["train"]["shards"]) > 3
    assert store_files(tmp_path / "w1") == store_files(tmp_path / "w2")
    assert m2["timing"]["num_workers"] == 2 and "trained_on" in m2["tokenizer"]
    assert "the first" in m1["tokenizer"]["trained_on"]


def test_finished_store_is_reused_and_changes_are_named(tmp_path, tok_dir):
    a = write_txt(tmp_path / "a.txt", review_lines(50))
    m = run(a, tmp_path / "out", tok_dir)
    stamp = (tmp_path / "out" / "manifest.json").stat().st_mtime_ns
    again = run(a, tmp_path / "out", tok_dir, num_workers=2)  # num_workers is not a setting of the store
    assert again == m and (tmp_path / "out" / "manifest.json").stat().st_mtime_ns == stamp
    with pytest.raises(ConfigError, match="setting min_chars: 5 -> 9.*overwrite=True"):
        run(a, tmp_path / "out", tok_dir, min_chars=9)
    with a.open("a", encoding="utf-8") as fh:
        fh.write("新加的一行评论内容\n")
    with pytest.raises(ConfigError, match=f"input changed: {a} size_bytes"):
        run(a, tmp_path / "out", tok_dir)
    m3 = run(a, tmp_path / "out", tok_dir, overwrite=True)
    assert m3["counts"]["n_texts_kept"] == 51
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.md").write_text("mine")
    with pytest.raises(ConfigError, match="not empty and holds no corpus store"):
        run(a, tmp_path / "other", tok_dir)


def test_inputs_folders_and_globs(tmp_path, tok_dir):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    write_txt(tmp_path / "d" / "x.txt", review_lines(10))
    write_txt(tmp_path / "d" / "sub" / "y.txt", review_lines(10, 10))
    (tmp_path / "d" / "README.md").write_text("not a corpus file")
    m = run(tmp_path / "d", tmp_path / "o1", tok_dir)
    assert [s["path"].rsplit("/", 2)[-2:] for s in m["sources"]] == [["sub", "y.txt"], ["d", "x.txt"]]
    m2 = run(str(tmp_path / "d" / "**" / "*.txt"), tmp_path / "o2", tok_dir)
    assert m2["counts"]["n_texts_kept"] == 20
    with pytest.raises(ConfigError, match="matches no corpus file"):
        run(str(tmp_path / "nothing*.txt"), tmp_path / "o3", tok_dir)


def test_hashset_keeps_first_occurrence_across_merges():
    s = HashSet(merge_every=3)
    a = s.filter_new(np.array([5, 7, 5, 9], np.uint64))
    b = s.filter_new(np.array([9, 11, 2**64 - 1, 7, 12], np.uint64))
    s.merge()
    c = s.filter_new(np.array([12, 13], np.uint64))
    assert a.tolist() == [True, True, False, True]
    assert b.tolist() == [False, True, True, False, True]
    assert c.tolist() == [False, True] and len(s) == 7


def test_segmenter_none_stores_the_tokenizers_own_word_starts(tmp_path, tok_dir, tok):
    """segmenter="none": the same ids; a word start at every token but a ``##`` piece (and at [SEP])."""
    texts = ["我爱北京天安门。", "他用iPhone拍照，playing games", "ＧＤＰ增长７．８％左右"]
    src = write_txt(tmp_path / "a.txt", texts)
    m = run(src, tmp_path / "none", tok_dir, heldout_share=0.0, segmenter="none")
    words = run(src, tmp_path / "words", tok_dir, heldout_share=0.0, segmenter="jieba")
    assert m["settings"]["segmenter"] == "none" and m["settings"]["segmenter_version"] == "none"
    ids, wst = load_split(tmp_path / "none")
    assert np.array_equal(ids, load_split(tmp_path / "words")[0]) and words["counts"] == m["counts"]
    tokens = tok.convert_ids_to_tokens(ids.tolist())
    assert wst.tolist() == [0 if t.startswith("##") else 1 for t in tokens] and 0 in wst.tolist()


def test_progress_plain_lines_show_rates_and_eta():
    import io

    buf = io.StringIO()
    p = CorpusProgress(10_000_000, stream=buf, tty=False, every_s=0.0)
    p.begin("tokenize")
    p.t0 -= 2.0  # two seconds in
    p.update(4_000_000, 500)
    out = buf.getvalue()
    assert "tokenize: 10.0 MB of input in all" in out
    assert "40.0% (4.0 MB), 2.00 MB/s, 250 texts/s, ETA 3 s" in out


def test_progress_estimates_the_stage_once_after_its_first_chunks():
    """The estimate line (time, MB/s, input) comes once, when enough is measured, before the long part; none for
    the tokenizer's sample, which stops early."""
    import io

    buf = io.StringIO()
    p = CorpusProgress(1_000_000_000, stream=buf, tty=False, every_s=1e9, estimate_after_s=5.0, estimate_after_mb=4.0)
    p.begin("tokenizer sample", estimate=False)
    p.t0 -= 10.0
    p.update(20_000_000, 100)
    assert "about" not in buf.getvalue()
    p.begin("tokenize")
    p.t0 -= 2.0
    p.update(2_600_000, 10)          # too early: 2 s and 2.6 MB measured
    assert "about" not in buf.getvalue()
    p.t0 -= 4.0                       # 6 s in, 13 MB: 2.17 MB/s, 987 MB left
    p.update(13_000_000, 10)
    p.update(14_000_000, 10)
    lines = [x for x in buf.getvalue().splitlines() if "about" in x]
    assert len(lines) == 1, lines
    import re

    assert re.match(r"\[prepare-corpus\] tokenize: about 7 min 3\d s at 2\.1\d MB/s for 1,000\.0 MB of input", lines[0])
    assert lines[0].endswith("(measured on the first 13.0 MB)") and p.estimated in lines[0]


class _EarlyProgress:
    """CorpusProgress with the estimate due after the first chunk (0 s, 0 MB measured): the line's position in
    the output is then what is tested, on a corpus small enough for a unit test."""

    def __new__(cls, total, **kw):
        return CorpusProgress(total, tty=False, estimate_after_s=0.0, estimate_after_mb=0.0, **kw)


@pytest.mark.parametrize("kind", ["file", "tree", "dataset"])
def test_the_eta_line_comes_before_the_long_part_for_every_input_kind(tmp_path, monkeypatch, capsys, kind):
    import re

    from nbkit.corpus import prepare as prep

    line = "今天天气很好，我们去公园散步。ＧＤＰ增长７．８％，市场很活跃。" * 3
    texts = [f"{i} {line}" for i in range(3000)]
    if kind == "file":
        path = tmp_path / "corpus.txt"
        path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        inputs = str(path)
    elif kind == "tree":                             # wiki_zh's layout: extension-less JSON lines in folders
        for k in range(6):
            f = tmp_path / "wiki" / f"A{'AB'[k // 3]}" / f"wiki_{k % 3:02d}"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text("".join(json.dumps({"id": str(j), "url": f"https://zh.wikipedia.org/wiki?curid={j}",
                                             "title": "t", "text": texts[j]}, ensure_ascii=False) + "\n"
                                 for j in range(k * 500, (k + 1) * 500)), encoding="utf-8")
        inputs = str(tmp_path / "wiki")
    else:
        datasets = pytest.importorskip("datasets")
        inputs = datasets.Dataset.from_dict({"text": texts})
    monkeypatch.setattr(prep, "CorpusProgress", _EarlyProgress)
    prep.prepare_corpus(inputs, tmp_path / "store", num_workers=1, chunk_items=100, sample_mb=0.2, vocab_size=300,
                        segmenter="none")
    out = capsys.readouterr().out.splitlines()
    eta = [i for i, x in enumerate(out) if x.startswith("[prepare-corpus] tokenize: about ")]
    done = [i for i, x in enumerate(out) if x.startswith("[prepare-corpus] tokenize done in ")]
    assert len(eta) == 1 and len(done) == 1 and eta[0] < done[0], out
    m = re.search(r"at ([\d.]+) MB/s for ([\d,.]+) MB of input \(measured on the first ([\d,.]+) MB\)", out[eta[0]])
    assert m, out[eta[0]]
    assert float(m.group(3)) < float(m.group(2).replace(",", "")) / 2   # before the long part: under half read


def test_shard_size_never_changes_the_split_streams(tmp_path, tok_dir):
    src = write_txt(tmp_path / "a.txt", review_lines(300))
    one = run(src, tmp_path / "big", tok_dir, heldout_share=0.1)
    many = run(src, tmp_path / "small", tok_dir, heldout_share=0.1, shard_tokens=1000, chunk_items=16)
    assert len(one["splits"]["train"]["shards"]) == 1 and len(many["splits"]["train"]["shards"]) > 5
    for split in ("train", "validation"):
        a, b = load_split(tmp_path / "big", split), load_split(tmp_path / "small", split)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
        assert one["splits"][split]["n_tokens"] == many["splits"][split]["n_tokens"] == len(a[0])


def test_excluded_texts_never_reach_either_split(tmp_path, tok_dir, tok):
    lines = review_lines(200)
    # evaluation texts given in another form: full width (equal after NFKC), and one repeated in the corpus
    evaluation = [lines[5], lines[60], lines[61], "ＡＢＣ１２３是评测文本", "不在语料里的一条评测文本"]
    corpus = write_txt(tmp_path / "c.txt", lines + [lines[60], "ABC123是评测文本"])
    m = run(corpus, tmp_path / "out", tok_dir, heldout_share=0.3, exclude_texts=evaluation)
    assert m["dropped"]["excluded"] == 5 and m["dropped"]["duplicate"] == 0
    assert m["counts"]["n_texts_kept"] == 197
    stored = set(docs(tmp_path / "out", tok)) | set(docs(tmp_path / "out", tok, "validation"))
    assert len(stored) == 197 and not stored & {norm(t) for t in evaluation}
    assert set(m["settings"]["exclude_texts"]) == {"n_hashes", "sha256"}
    assert m["settings"]["exclude_texts"]["n_hashes"] == 5   # hashes only, never the texts
    assert lines[5] not in json.dumps(m, ensure_ascii=False)


def test_changed_exclusion_is_named_and_order_does_not_matter(tmp_path, tok_dir):
    lines = review_lines(60)
    a = write_txt(tmp_path / "a.txt", lines)
    m = run(a, tmp_path / "out", tok_dir, exclude_texts=[lines[1], lines[2]])
    assert run(a, tmp_path / "out", tok_dir, exclude_texts=[lines[2], lines[1], lines[1]]) == m
    with pytest.raises(ConfigError, match="setting exclude_texts: .*n_hashes.: 2.* -> .*n_hashes.: 3"):
        run(a, tmp_path / "out", tok_dir, exclude_texts=lines[1:4])
    with pytest.raises(ConfigError, match="setting exclude_texts"):
        run(a, tmp_path / "out", tok_dir)
    with pytest.raises(ConfigError, match="one string"):
        run(a, tmp_path / "out2", tok_dir, exclude_texts=lines[1])


def test_exclusion_is_the_same_with_one_and_two_workers(tmp_path):
    lines = review_lines(600)
    src = write_txt(tmp_path / "a.txt", lines)
    kw = dict(vocab_size=300, heldout_share=0.05, chunk_items=64, shard_tokens=3000, exclude_texts=lines[::7])
    m1 = run(src, tmp_path / "w1", num_workers=1, **kw)
    m2 = run(src, tmp_path / "w2", num_workers=2, **kw)
    assert m1["dropped"]["excluded"] == m2["dropped"]["excluded"] == len(set(lines[::7])) > 0
    assert store_files(tmp_path / "w1") == store_files(tmp_path / "w2")
