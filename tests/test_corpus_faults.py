"""nbkit.corpus under faults: bad input (counted and located), resume after a crash or a kill, disk full, CLI."""
from __future__ import annotations

import errno
import gzip
import json
import os
import random
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
import zstandard

from nbkit.corpus import shards
from nbkit.errors import CheckpointError, DataError
from tests.corpus_helpers import prepare, review_lines, small_tokenizer, store_files, write_jsonl, write_txt

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return small_tokenizer(tmp_path_factory.mktemp("tok"))


run = prepare


def bad_folder(root: Path) -> tuple[Path, int]:
    """A folder with every kind of bad input beside good lines; returns it and the number of good texts."""
    good = review_lines(60)
    d = root / "in"
    d.mkdir()
    lines = [t.encode() for t in good[:10]]
    lines.insert(2, b"\xe4\xb8\xad\xff\xfe broken")  # line 3: broken UTF-8
    (d / "a.txt").write_bytes(b"\n".join(lines) + b"\n")
    rows = [json.dumps({"text": t}, ensure_ascii=False) for t in good[10:20]]
    rows.insert(1, "{not json")                      # line 2: not JSON
    rows.insert(3, json.dumps({"body": good[20]}, ensure_ascii=False))  # line 4: no text field
    rows.insert(5, '"just a string"')                # line 6: not an object
    (d / "b.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (d / "c.txt").write_bytes(b"")                    # empty file
    (d / "d.txt").write_bytes(b"\x00\x01\x02binary\x00" * 100)  # binary file
    full = gzip.compress("".join(t + "\n" for t in good[21:41]).encode())
    (d / "e.txt.gz").write_bytes(full[: len(full) * 2 // 3])   # truncated gzip
    gz_lines = zlib.decompressobj(31).decompress(full[: len(full) * 2 // 3]).count(b"\n")  # complete lines in it
    z = zstandard.ZstdCompressor().compress("".join(t + "\n" for t in good[41:51]).encode())
    (d / "f.txt.zst").write_bytes(z[: len(z) // 2])           # truncated zstd
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": good[:3]}), d / "h.parquet")  # no "text" column
    (d / "i.parquet").write_bytes(b"PAR1 not really parquet PAR1")  # unreadable
    giant = "中" * 1_000_000 + "。" + "文" * 30_000          # a 3 MB single line: cut into pieces
    write_txt(d / "g.txt", good[51:60] + [giant])
    return d, 10 + 10 + gz_lines + 9


def test_every_bad_input_is_counted_and_located_and_nothing_else_lost(tmp_path, tok_dir):
    d, n_good = bad_folder(tmp_path)
    m = run(d, tmp_path / "out", tok_dir, heldout_share=0.0)
    drop = m["dropped"]
    assert (drop["bad_utf8"], drop["bad_json"], drop["no_text_field"]) == (1, 2, 2)
    assert (drop["empty_file"], drop["binary_file"], drop["truncated_file"], drop["unreadable_file"]) == (1, 1, 2, 1)
    where = {(Path(p["path"]).name, p["line"], p["reason"]) for p in m["problems"]}
    assert {("a.txt", 3, "bad_utf8"), ("b.jsonl", 2, "bad_json"), ("b.jsonl", 4, "no_text_field"),
            ("b.jsonl", 6, "bad_json"), ("c.txt", None, "empty_file"), ("d.txt", None, "binary_file"),
            ("h.parquet", None, "no_text_field"), ("i.parquet", None, "unreadable_file")} <= where
    assert any(n == "e.txt.gz" and r == "truncated_file" and line > 1 for n, line, r in where)
    assert any(n == "f.txt.zst" and r == "truncated_file" for n, line, r in where)
    # the giant line: cut at the sentence end, then hard at 20,000 characters; each piece a text
    assert m["repaired"]["long_texts_cut"] == 1
    assert m["repaired"]["long_text_pieces"] == 1_000_001 // 20_000 + 1 + 2
    # 50 identical pieces of 中 (one kept), 中。 (too short), two pieces of 文
    assert (m["dropped"]["duplicate"], m["dropped"]["too_short"]) == (49, 1)
    # every good line is kept, those of the truncated gzip before its end too
    assert m["counts"]["n_texts_kept"] == n_good + 53 - 49 - 1
    assert sum(m["dropped"].values()) == 1 + 2 + 2 + 1 + 1 + 2 + 1 + 49 + 1


@pytest.mark.parametrize("make, match", [
    (lambda d: (d / "x.txt").write_bytes(b"ok line here\n\xff\xfe\n"), r"x\.txt, line 2: bad_utf8"),
    (lambda d: (d / "x.jsonl").write_text('{"text": "好的很好"}\n{"t": 1}\n'), r"x\.jsonl, line 2: no_text_field"),
    (lambda d: (d / "x.txt").write_bytes(b"\x00" * 64), r"x\.txt: binary_file"),
])
def test_errors_raise_names_file_and_line(tmp_path, tok_dir, make, match):
    (tmp_path / "in").mkdir()
    make(tmp_path / "in")
    with pytest.raises(DataError, match=match):
        run(tmp_path / "in", tmp_path / "out", tok_dir, errors="raise")


def test_errors_raise_from_a_worker_process(tmp_path, tok_dir):
    (tmp_path / "x.jsonl").write_text('{"text": "好的很好很好"}\n{"t": 1}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"x\.jsonl, line 2: no_text_field"):
        run(tmp_path / "x.jsonl", tmp_path / "out", tok_dir, errors="raise", num_workers=2)
    assert not (tmp_path / "out" / "manifest.json").exists()


def corpus(tmp_path: Path) -> list[Path]:
    lines = review_lines(700)
    return [write_txt(tmp_path / "a.txt", lines[:400]), write_jsonl(tmp_path / "b.jsonl", lines[350:])]


KW = dict(chunk_items=50, shard_tokens=2500, heldout_share=0.05)


def test_rerun_after_a_crash_continues_from_the_last_complete_part(tmp_path, tok_dir):
    src = corpus(tmp_path)
    ref = tmp_path / "ref"
    run(src, ref, tok_dir, **KW)
    out = tmp_path / "out"
    run(src, out, tok_dir, **KW)
    n_parts = len(list((out / "shards").glob("part-*.done.json")))
    assert n_parts > 4
    # as if killed while writing part 3: its marker gone, a temp file and a renamed shard left behind
    (out / "manifest.json").unlink()
    for k in range(3, n_parts):
        (out / "shards" / f"part-{k:05d}.done.json").unlink()
    (out / "shards" / ".train-00004.ids.tmp").write_bytes(b"partial")
    (out / "shards" / "train-00003.wst").write_bytes(b"torn")
    m = run(src, out, tok_dir, **KW)
    assert m["timing"]["resumed_parts"] == 3
    assert store_files(out) == store_files(ref)
    # the rate is over what this run read: the 3 kept parts' bytes are not counted as read again
    kept = json.loads((out / "shards" / "part-00002.done.json").read_text())["next_bytes"]
    total = sum(p.stat().st_size for p in src)
    assert 0 < kept < total
    assert m["timing"]["input_mb_this_run"] == round((total - kept) / 1e6, 3)


def test_disk_full_is_named_and_leaves_no_trusted_partial_shard(tmp_path, tok_dir, monkeypatch):
    src = corpus(tmp_path)
    calls = {"n": 0}
    real = shards._write

    def full(fh, data):
        calls["n"] += 1
        if calls["n"] > 12:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fh, data)

    monkeypatch.setattr(shards, "_write", full)
    out = tmp_path / "out"
    with pytest.raises(CheckpointError, match=r"disk full .* in .*shards .* MB free, about .* MB still needed"):
        run(src, out, tok_dir, **KW)
    left = sorted(p.name for p in (out / "shards").iterdir())
    assert not [n for n in left if n.endswith(".tmp")], left
    done = {n.split(".")[0] for n in left if n.endswith(".done.json")}
    assert all(n.startswith("part-") or n.split(".")[0].replace("train", "part").replace("validation", "part")
               in done for n in left), left  # every shard file left belongs to a complete part
    assert not (out / "manifest.json").exists()
    monkeypatch.setattr(shards, "_write", real)
    run(src, out, tok_dir, **KW)
    ref = tmp_path / "ref"
    run(src, ref, tok_dir, **KW)
    assert store_files(out) == store_files(ref)


SCRIPT = """
import sys
from nbkit.corpus import prepare_corpus
prepare_corpus(sys.argv[1:3], sys.argv[3], num_workers=2, progress=False, vocab_size=300,
               chunk_items=40, shard_tokens=1500, heldout_share=0.05, sample_mb=0.05)
"""


@pytest.mark.slow
def test_killed_at_random_moments_then_rerun_gives_a_byte_identical_store(tmp_path):
    src = [str(p) for p in corpus(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}

    def start(out):
        return subprocess.Popen([sys.executable, "-c", SCRIPT, *src, str(out)], env=env, cwd=ROOT,
                                start_new_session=True)

    t0 = time.monotonic()
    assert start(tmp_path / "ref").wait(timeout=300) == 0
    full = time.monotonic() - t0
    rng = random.Random(21)
    out = tmp_path / "out"
    markers = (lambda: len(list((out / "shards").glob("part-*.done.json"))))  # noqa: E731
    kills, parts_seen = 0, []
    for attempt in range(4):
        proc = start(out)
        if attempt == 0:  # anywhere in the run: start-up, tokenizer training or the shards
            deadline = time.monotonic() + rng.uniform(0.2, 0.9) * full
        else:  # just after the next part completes, at a random point of the one after it; however long
            # the machine takes to get there (a busy one can take several times the reference run)
            before, deadline = markers(), time.monotonic() + 300
            while proc.poll() is None and markers() == before and time.monotonic() < deadline:
                time.sleep(0.01)
            deadline = time.monotonic() + rng.uniform(0.0, 0.05)
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole group: the main process and its workers
            proc.wait()
            kills += 1
            parts_seen.append(markers())
    assert kills >= 2 and max(parts_seen) > 0, parts_seen  # at least one kill fell amid the shards
    assert start(out).wait(timeout=300) == 0
    assert store_files(out) == store_files(tmp_path / "ref")


def test_cli_prepares_and_reports_errors_in_one_line(tmp_path, tok_dir, capsys):
    from nbkit.cli.main import main

    a = write_txt(tmp_path / "a.txt", review_lines(30))
    assert main(["prepare-corpus", str(a), "--out", str(tmp_path / "o"), "--tokenizer", str(tok_dir),
                 "--num-workers", "1", "--min-chars", "3", "--heldout-share", "0"]) == 0
    assert "30 texts, train" in capsys.readouterr().out
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert m["settings"]["min_chars"] == 3 and m["settings"]["text_field"] == "text"
    assert main(["prepare-corpus", str(a), "--out", str(tmp_path / "o"), "--tokenizer", str(tok_dir),
                 "--num-workers", "1"]) == 2
    assert "setting min_chars: 3 -> 5" in capsys.readouterr().err


def test_cli_excludes_evaluation_files_and_cuts_at_max_chars(tmp_path, tok_dir, capsys):
    """--exclude keeps an evaluation file's texts (another format and field; one in full width) out of
    the store, as exclude_texts does; --max-chars cuts a long row; both are settings of the store."""
    from nbkit.cli.main import main

    lines = review_lines(40)
    long_row = "。".join(lines[30:40] * 3) + "。"
    cut = str(max(map(len, lines)) + 1)   # only the long row is over it
    a = write_txt(tmp_path / "a.txt", lines[:30] + [long_row])
    held = [lines[3], lines[7]]
    wide = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in lines[11])  # full-width ASCII
    ev = write_jsonl(tmp_path / "eval.jsonl", held + [wide], field="review")
    out = tmp_path / "o"
    assert main(["prepare-corpus", str(a), "--out", str(out), "--tokenizer", str(tok_dir), "--num-workers", "1",
                 "--min-chars", "3", "--heldout-share", "0", "--exclude", str(ev), "--exclude-text-field", "review",
                 "--max-chars", cut]) == 0, capsys.readouterr().err
    m = json.loads((out / "manifest.json").read_text())
    assert m["dropped"]["excluded"] == 3
    assert m["settings"]["exclude_texts"]["n_hashes"] == 3 and m["settings"]["max_chars"] == int(cut)
    assert m["repaired"]["long_texts_cut"] == 1
    # the same command again reuses the store; without --exclude it is a changed setting, named
    assert main(["prepare-corpus", str(a), "--out", str(out), "--tokenizer", str(tok_dir), "--num-workers", "1",
                 "--min-chars", "3", "--heldout-share", "0", "--max-chars", cut]) == 2
    assert "exclude_texts" in capsys.readouterr().err


@pytest.mark.slow
def test_ctrl_c_says_how_to_resume_without_worker_tracebacks(tmp_path):
    lines = review_lines(6000) + review_lines(6000, which="pos")
    src = write_txt(tmp_path / "big.txt", lines * 4)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "nbkit.cli.main", "prepare-corpus", str(src), "--out", str(out),
                             "--num-workers", "2", "--vocab-size", "300", "--sample-mb", "0.05",
                             "--shard-tokens", "20000"], env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    while proc.poll() is None and not list((out / "shards").glob("*.done.json")) and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGINT)              # what Ctrl-C in a terminal sends: the whole process group
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted;" in err and "Run the same command again" in err
    assert "Traceback" not in err, err[-2000:]


# ----- a damaged store, the command line's words, a job's own store ---------------------------------------
@pytest.mark.parametrize("name, content", [("manifest.json", "{"), ("prepare.json", "")])
def test_a_damaged_store_is_a_data_error_and_overwrite_prepares_it_again(tmp_path, tok_dir, capsys, name, content):
    from nbkit.cli.main import main
    from nbkit.corpus.store import given_store

    a = write_txt(tmp_path / "a.txt", review_lines(30, 2000))
    out = tmp_path / "o"
    ref = prepare(a, out, tok_dir)
    if name == "prepare.json":   # an unfinished store
        (out / "manifest.json").unlink()
    (out / name).write_text(content)
    with pytest.raises(DataError, match=rf"{name} is not valid JSON .*: the store in .* is damaged. Pass "
                                        "overwrite=True to delete nbkit's files there"):
        prepare(a, out, tok_dir)
    cli = ["prepare-corpus", str(a), "--out", str(out), "--tokenizer", str(tok_dir), "--num-workers", "1"]
    assert main(cli) == 2
    err = capsys.readouterr().err
    assert "error: " in err and "is damaged. Pass --overwrite to delete" in err and "Traceback" not in err
    if name == "manifest.json":   # a job given the store alone: the damage named, not "pass it alone"
        with pytest.raises(DataError, match="manifest.json is not valid JSON"):
            given_store(str(out))
    assert main([*cli, "--overwrite"]) == 0
    assert "is damaged; overwriting it" in capsys.readouterr().err
    assert json.loads((out / "manifest.json").read_text())["counts"] == ref["counts"]


def test_cli_errors_name_the_flags_not_the_python_spellings(tmp_path, tok_dir, capsys):
    from nbkit.cli.main import main

    bad = tmp_path / "bad.txt"
    bad.write_bytes("\n".join(review_lines(20, 2100)).encode() + b"\n\xff\xfe broken\n")
    cli = ["prepare-corpus", str(bad), "--out", str(tmp_path / "o"), "--tokenizer", str(tok_dir), "--num-workers", "1"]
    assert main([*cli, "--errors", "raise"]) == 2
    err = capsys.readouterr().err
    assert "pass --errors skip to drop such lines" in err and "errors='skip'" not in err
    assert main([*cli, "--errors", "skip"]) == 2
    err = capsys.readouterr().err
    assert "Pass a new --out, or --overwrite to delete it" in err and "out_dir" not in err and "=True" not in err


def test_a_swallowed_input_list_names_where_exclude_goes(tmp_path, capsys):
    from nbkit.cli.main import main

    with pytest.raises(SystemExit):
        main(["prepare-corpus", "--exclude", "eval.jsonl", "docs.jsonl", "--out", str(tmp_path / "s")])
    assert "put it after the inputs" in capsys.readouterr().err


def test_a_store_passed_as_the_tokenizer_names_its_tokenizer_folder(tmp_path, tok_dir, capsys):
    from nbkit.cli.main import main

    a = write_txt(tmp_path / "a.txt", review_lines(30, 2200))
    prepare(a, tmp_path / "st", tok_dir)
    assert main(["prepare-corpus", str(a), "--out", str(tmp_path / "o"), "--tokenizer", str(tmp_path / "st")]) == 2
    assert f"pass --tokenizer {tmp_path / 'st' / 'tokenizer'}" in capsys.readouterr().err


def test_the_pretraining_data_stage_prepares_its_own_store_again_after_an_edit(tmp_path, runs_tmp, capsys):
    """A job or notebook 02 given raw files owns runs/corpus/<name>-<hash>: an edited file is prepared again
    (said in a warning), not refused with a new out_dir / overwrite=True that a job has no flag for."""
    from nbkit.recipes import pretraining as pt

    a = write_txt(tmp_path / "a.txt", review_lines(60, 2300))
    cfg = pt.PretrainConfig.for_scale("smoke", corpus=str(a))
    first = pt.data(cfg)
    write_txt(a, review_lines(70, 2300))
    with pytest.warns(UserWarning, match="held a complete store of other input or settings .*input changed.*"
                                         "overwriting it"):
        again = pt.data(cfg)
    assert again.store == first.store and again.report["n_docs_train"] + again.report["n_docs_validation"] == 70
    assert "70 texts, train" in capsys.readouterr().out


def test_the_jobs_resume_flag_is_spelled_as_the_docs_spell_it():
    from nbkit.jobs import pretrain

    assert "--resume auto|none" in pretrain.parser().format_help()


@pytest.mark.parametrize("kind", ["txt", "jsonl"])
def test_old_mac_line_ends_read_as_lines_like_lf_and_crlf(tmp_path, tok_dir, kind):
    from tests.corpus_helpers import load_split

    texts = review_lines(40)
    lf = (write_txt if kind == "txt" else write_jsonl)(tmp_path / f"lf.{kind}", texts)
    ends = {"cr": b"\r", "crlf": b"\r\n"}
    stores = {"lf": run(lf, tmp_path / "s-lf", tok_dir, heldout_share=0.0)}
    for name, end in ends.items():
        other = tmp_path / f"{name}.{kind}"
        other.write_bytes(lf.read_bytes().replace(b"\n", end))
        stores[name] = run(other, tmp_path / f"s-{name}", tok_dir, heldout_share=0.0)
    for name in ends:   # a CR-only file was one line: one text (txt) or one bad JSON line (jsonl)
        assert stores[name]["counts"]["n_texts_kept"] == len(texts) == stores["lf"]["counts"]["n_texts_kept"]
        assert (load_split(tmp_path / f"s-{name}")[0] == load_split(tmp_path / "s-lf")[0]).all()
