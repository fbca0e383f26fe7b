"""Corpus inputs: a store given as an input, a given tokenizer's irrelevant settings, a touched input."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings

import pytest

from nbkit.corpus import prepare_corpus
from nbkit.errors import ConfigError
from tests.corpus_helpers import review_lines, write_jsonl, write_txt


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    from nbkit.text.tokenizer import train_wordpiece

    d = tmp_path_factory.mktemp("tok")
    train_wordpiece(review_lines(400, which="pos"), 300, d, model_max_length=128)
    return d


@pytest.fixture(scope="module")
def store(tmp_path_factory, tok_dir):
    """A finished store prepared by the writer from 80 positive reviews."""
    base = tmp_path_factory.mktemp("prepared")
    raw = write_txt(base / "reviews.txt", review_lines(80, 100, which="pos"))
    prepare_corpus(raw, base / "store", tokenizer=str(tok_dir), num_workers=1, progress=False)
    return base / "store"


def run(inputs, out, tok_dir, **kw):
    kw.setdefault("num_workers", 1)
    kw.setdefault("progress", False)
    return prepare_corpus(inputs, out, tokenizer=str(tok_dir), **kw)


# ----- 1. a store is never read as text ---------------------------------------------------------
@pytest.mark.parametrize("wrap", [list, tuple])
def test_a_store_alone_in_a_list_is_that_store(store, runs_tmp, wrap):
    from nbkit.corpus.store import corpus_store

    assert corpus_store(wrap([str(store)])) == store
    assert not (runs_tmp / "corpus").exists()          # nothing prepared from the store's own files


def test_other_ranks_wait_for_a_store_given_in_a_list(store, monkeypatch):
    from nbkit.recipes.pretraining import PretrainConfig, _store_rank0_first

    for name, value in (("RANK", "1"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_WORLD_SIZE", "1")):
        monkeypatch.setenv(name, value)
    cfg = PretrainConfig.for_scale("smoke", corpus=[str(store)])
    assert _store_rank0_first(cfg, wait_s=0.5).store == store      # not runs/corpus/<hash of the list>


def test_a_store_listed_with_other_inputs_is_refused(store, tmp_path, runs_tmp):
    from nbkit.corpus.store import corpus_store

    raw = write_txt(tmp_path / "more.txt", review_lines(20, 300))
    with pytest.raises(ConfigError, match="together with.*more.txt.*Pass one store alone"):
        corpus_store([str(store), str(raw)])
    with pytest.raises(ConfigError, match="training reads one store"):
        corpus_store([str(store), str(store)])
    assert not (runs_tmp / "corpus").exists()


def test_prepare_never_reads_a_store_as_text(store, tmp_path, tok_dir):
    with pytest.raises(ConfigError, match=r"is a prepared corpus store .*pass it alone \(corpus=STORE"):
        run(store, tmp_path / "o1", tok_dir)
    with pytest.raises(ConfigError, match="lies in a prepared corpus store"):
        run(store / "tokenizer" / "tokenizer.json", tmp_path / "o2", tok_dir)
    with pytest.raises(ConfigError, match="lies in a prepared corpus store"):
        run(str(store / "*.json"), tmp_path / "o3", tok_dir)
    assert not any((tmp_path / o).exists() for o in ("o1", "o2", "o3"))


def test_a_store_inside_an_input_folder_is_left_out_and_named(store, tmp_path, tok_dir):
    folder = tmp_path / "runs"
    (folder / "corpus").mkdir(parents=True)
    shutil.copytree(store, folder / "corpus" / "wiki")
    write_txt(folder / "notes.txt", review_lines(10, 500))
    m = run(folder, tmp_path / "out", tok_dir)
    assert [os.path.basename(x["path"]) for x in m["sources"]] == ["notes.txt"]   # no manifest.json, vocab.txt
    assert m["inputs"]["skipped"] == [{"path": str(folder / "corpus" / "wiki"),
                                       "reason": "a corpus store (its files are not text to prepare)"}]
    # a folder holding nothing but a store: refused, the store named as what was left out
    with pytest.raises(ConfigError, match=f"holds no corpus file; left out: {folder / 'corpus' / 'wiki'}: a corpus store"):
        run(folder / "corpus", tmp_path / "out1", tok_dir)
    # a store prepared inside its own input folder: the second call reuses it (its files are not inputs)
    raw = tmp_path / "own"
    raw.mkdir()
    write_txt(raw / "a.txt", review_lines(20, 520))
    first = run(raw, raw / "store", tok_dir)
    assert run(raw, raw / "store", tok_dir)["splits"] == first["splits"]
    # a stopped preparation (prepare.json + shards/, no manifest yet) is a store's folder too
    partial = tmp_path / "raw" / "half"
    (partial / "shards").mkdir(parents=True)
    (partial / "prepare.json").write_text("{}")
    write_jsonl(tmp_path / "raw" / "texts.jsonl", review_lines(10, 600))
    m2 = run(tmp_path / "raw", tmp_path / "out2", tok_dir)
    assert m2["inputs"]["skipped"][0]["path"] == str(partial) and m2["counts"]["n_files"] == 1
    with pytest.raises(ConfigError, match="not finished.*finish it with its original command"):
        run(partial, tmp_path / "out2b", tok_dir)
    # a folder with a manifest.json of its own but no shards/ is ordinary input
    (partial / "prepare.json").unlink()
    (partial / "shards").rmdir()
    (tmp_path / "raw" / "half" / "manifest.json").write_text(json.dumps({"text": "这是一条普通的语料文本"}) + "\n")
    m = run(tmp_path / "raw", tmp_path / "out3", tok_dir)
    assert m["counts"]["n_files"] == 2


# ----- 2. a given tokenizer: the trained-tokenizer settings are not the store's ----------------
def test_given_tokenizer_records_trained_only_settings_as_null_and_warns(tmp_path, tok_dir):
    a = write_txt(tmp_path / "a.txt", review_lines(60, 700))
    with pytest.warns(UserWarning, match=r"vocab_size=5000, sample_mb=1\.0 ignored: .*tokenizer=.* is given"):
        m = run(a, tmp_path / "out", tok_dir, vocab_size=5000, sample_mb=1.0)
    assert {k: m["settings"][k] for k in ("vocab_size", "sample_mb", "model_max_length")} == dict.fromkeys(
        ("vocab_size", "sample_mb", "model_max_length"))
    assert m["tokenizer"]["vocab_size"] < 5000           # the given tokenizer's own size
    with pytest.warns(UserWarning, match="vocab_size=7000 ignored"):
        assert run(a, tmp_path / "out", tok_dir, vocab_size=7000) == m    # reused, not refused
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run(a, tmp_path / "out", tok_dir) == m                     # defaults: no warning


def test_store_of_older_nbkit_with_given_tokenizer_stays_reusable(tmp_path, tok_dir):
    a = write_txt(tmp_path / "a.txt", review_lines(40, 800))
    m = run(a, tmp_path / "out", tok_dir)
    mf = tmp_path / "out" / "manifest.json"
    old = json.loads(mf.read_text())
    old["settings"].update(vocab_size=21128, sample_mb=16.0, model_max_length=512)   # what older nbkit recorded
    mf.write_text(json.dumps(old))
    assert run(a, tmp_path / "out", tok_dir)["counts"] == m["counts"]


def test_cli_says_the_tokenizer_settings_are_ignored(tmp_path, tok_dir, capsys):
    from nbkit.cli.main import main

    a = write_txt(tmp_path / "a.txt", review_lines(40, 900))
    rc = main(["prepare-corpus", str(a), "--out", str(tmp_path / "out"), "--tokenizer", str(tok_dir),
               "--vocab-size", "5000", "--num-workers", "1"])
    err = capsys.readouterr().err
    assert rc == 0 and "warning: --vocab-size 5000 ignored" in err and "--tokenizer" in err
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["settings"]["vocab_size"] is None


# ----- 3. a touched input: compared by content --------------------------------------------------
def test_touched_or_recopied_input_is_reused_and_its_new_time_recorded(tmp_path, tok_dir):
    a = write_txt(tmp_path / "a.txt", review_lines(50, 1000))
    m = run(a, tmp_path / "out", tok_dir)
    assert m["sources"][0]["sha256"] == hashlib.sha256(a.read_bytes()).hexdigest()
    later = 1_800_000_000        # whole seconds: the float read back is exact
    os.utime(a, (later, later))                            # touch
    again = run(a, tmp_path / "out", tok_dir)
    assert again["sources"][0]["mtime"] == later and again["splits"] == m["splits"]
    on_disk = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert on_disk["sources"][0]["mtime"] == later        # recorded: the next reuse reads no content
    stamp = (tmp_path / "out" / "manifest.json").stat().st_mtime_ns
    assert run(a, tmp_path / "out", tok_dir) == again
    assert (tmp_path / "out" / "manifest.json").stat().st_mtime_ns == stamp
    a.write_bytes(a.read_bytes())                          # a copy that did not keep the time
    assert run(a, tmp_path / "out", tok_dir)["splits"] == m["splits"]


def test_same_size_but_edited_input_is_refused_by_content(tmp_path, tok_dir):
    a = write_txt(tmp_path / "a.txt", ["今天天气很好我们去公园", "这本书的内容非常精彩"] + review_lines(30, 1100))
    run(a, tmp_path / "out", tok_dir)
    a.write_text(a.read_text(encoding="utf-8").replace("很好", "不好", 1), encoding="utf-8")   # same byte size
    with pytest.raises(ConfigError, match=rf"input changed: {a} content \(sha256 .*same size.*overwrite=True"):
        run(a, tmp_path / "out", tok_dir)


def test_store_without_fingerprints_names_the_time_and_gets_them_on_reuse(tmp_path, tok_dir):
    a = write_txt(tmp_path / "a.txt", review_lines(40, 1200))
    os.utime(a, (1_700_000_000, 1_700_000_000))            # whole seconds: restored exactly below
    run(a, tmp_path / "out", tok_dir)
    mf = tmp_path / "out" / "manifest.json"
    old = json.loads(mf.read_text())
    for src in old["sources"]:
        del src["sha256"]                                  # as nbkit before content checks wrote it
    mf.write_text(json.dumps(old))
    recorded = old["sources"][0]["mtime"]
    assert "sha256" in run(a, tmp_path / "out", tok_dir)["sources"][0]        # unchanged: reused, upgraded
    mf.write_text(json.dumps(old))
    os.utime(a, (recorded + 5, recorded + 5))
    with pytest.raises(ConfigError, match=rf"records no content fingerprint.*touch -d @{recorded}"):
        run(a, tmp_path / "out", tok_dir)
    os.utime(a, (recorded, recorded))                      # the fix the message gives
    assert run(a, tmp_path / "out", tok_dir)["sources"][0]["mtime"] == recorded


def test_a_stopped_preparation_continues_after_its_input_was_touched(tmp_path, tok_dir):
    a = write_txt(tmp_path / "a.txt", review_lines(60, 1300))
    m = run(a, tmp_path / "out", tok_dir, shard_tokens=500)
    (tmp_path / "out" / "manifest.json").unlink()            # stopped before the manifest: prepare.json decides
    os.utime(a, (1_800_000_000, 1_800_000_000))
    again = run(a, tmp_path / "out", tok_dir, shard_tokens=500)
    assert again["splits"] == m["splits"] and again["timing"]["resumed_parts"] > 0   # nothing encoded again
    assert again["sources"][0]["mtime"] == 1_800_000_000 and again["sources"][0]["sha256"] == m["sources"][0]["sha256"]
    assert json.loads((tmp_path / "out" / "prepare.json").read_text())["sources"][0]["mtime"] == 1_800_000_000
