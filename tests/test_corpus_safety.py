"""nbkit.corpus when processes meet: two preparations of one store, a killed worker, a shard changed under a
reader, a tokenizer replaced at the same path in one process (each kind with real processes where it matters)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from nbkit.errors import ConfigError, DataError
from tests.corpus_helpers import load_split, prepare, review_lines, small_tokenizer, store_files, write_txt
from tests.waiting import GENEROUS_S, wait_until

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
KW = dict(shard_tokens=20_000)


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return small_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """About 4 MB, 48,000 distinct lines (the reviews, each four times, numbered): ~10 s, ~80 parts."""
    lines = review_lines(6000) + review_lines(6000, which="pos")
    d = tmp_path_factory.mktemp("big")
    return write_txt(d / "big.txt", [f"{t}（{k}）" for k in range(4) for t in lines])


@pytest.fixture(scope="module")
def ref(tmp_path_factory, tok_dir, big):
    """``big`` prepared alone, in this process with one worker (1 and 2 workers give the same store)."""
    out = tmp_path_factory.mktemp("ref") / "store"
    prepare(big, out, tok_dir, **KW)
    return store_files(out)


def _done(out: Path) -> int:
    return len(list((out / "shards").glob("part-*.done.json"))) if (out / "shards").is_dir() else 0


def _wait_for(cond, timeout: float, what: str) -> None:
    wait_until(cond, max(timeout, GENEROUS_S), what, poll=0.01)


def _prep_process(src: Path, out: Path, tok_dir: Path, workers: int = 1) -> subprocess.Popen:
    """``nbkit prepare-corpus`` in its own process group (its workers too), stderr captured."""
    cmd = [sys.executable, "-m", "nbkit.cli.main", "prepare-corpus", str(src), "--out", str(out), "--tokenizer",
           str(tok_dir), "--num-workers", str(workers), "--shard-tokens", str(KW["shard_tokens"])]
    return subprocess.Popen(cmd, env=ENV, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# --- one store, one writer ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_second_preparation_of_one_store_waits_for_the_first_then_reuses_its_store(tmp_path, tok_dir, big, ref):
    out = tmp_path / "shared"
    a = _prep_process(big, out, tok_dir)
    try:
        _wait_for(lambda: (out / "prepare.json").is_file() or a.poll() is not None, 120, "A to start writing")
        assert a.poll() is None, a.communicate()[1][-2000:]
        b = _prep_process(big, out, tok_dir)
        try:
            err_b = b.communicate(timeout=300)[1]
        finally:
            _end(b)
        err_a = a.communicate(timeout=300)[1]
    finally:
        _end(a)
    assert a.returncode == 0, err_a[-2000:]
    assert b.returncode == 0, err_b[-2000:]
    assert f"is being prepared by another process: pid {a.pid} on host" in err_b, err_b[-2000:]
    assert "Traceback" not in err_a + err_b
    assert store_files(out) == ref                       # one writer: as if prepared alone


@pytest.mark.slow
def test_when_the_first_preparation_is_killed_the_waiting_one_continues_its_parts(tmp_path, tok_dir, big, ref):
    out = tmp_path / "shared"
    a = _prep_process(big, out, tok_dir)
    try:
        _wait_for(lambda: _done(out) >= 1 or a.poll() is not None, 120, "A's first part")
        assert a.poll() is None, a.communicate()[1][-2000:]
        b = _prep_process(big, out, tok_dir)
        try:
            assert "is being prepared by another process" in b.stderr.readline()   # it waits, naming A
            os.killpg(a.pid, signal.SIGKILL)                                        # the lock dies with A
            a.wait()
            err_b = b.communicate(timeout=300)[1]
        finally:
            _end(b)
    finally:
        _end(a)
    assert b.returncode == 0, err_b[-2000:]
    m = json.loads((out / "manifest.json").read_text())
    assert m["timing"]["resumed_parts"] >= 1
    assert store_files(out) == ref


def test_a_second_preparation_in_the_same_process_is_refused_naming_it(tmp_path, tok_dir):
    from nbkit.corpus.prepare import StoreLock

    src = write_txt(tmp_path / "a.txt", review_lines(50))
    with StoreLock(tmp_path / "out"):
        with pytest.raises(ConfigError, match=rf"being prepared by this process already \(pid {os.getpid()} "):
            prepare(src, tmp_path / "out", tok_dir)
    assert prepare(src, tmp_path / "out", tok_dir)["counts"]["n_texts_kept"] == 50   # released: it prepares


def test_a_finished_store_in_a_folder_that_cannot_take_the_lock_is_still_reused(tmp_path, tok_dir, monkeypatch):
    from nbkit.corpus.prepare import StoreLock

    src = write_txt(tmp_path / "a.txt", review_lines(50))
    m = prepare(src, tmp_path / "out", tok_dir)

    def read_only(self):
        raise PermissionError(13, "Read-only file system", str(self.folder / StoreLock.LOCK_NAME))

    monkeypatch.setattr(StoreLock, "acquire", read_only)
    assert prepare(src, tmp_path / "out", tok_dir) == m
    with pytest.raises(PermissionError):            # anything to write there still needs the lock
        prepare(src, tmp_path / "new", tok_dir)


# --- a parent never waits for ever on a child -----------------------------------------------------------------
@pytest.mark.slow
def test_a_killed_worker_stops_the_preparation_at_once_naming_it_and_a_rerun_completes(tmp_path, tok_dir, big, ref):
    out = tmp_path / "out"
    proc = _prep_process(big, out, tok_dir, workers=2)
    try:
        _wait_for(lambda: _done(out) >= 1 or proc.poll() is not None, 120, "the first part")
        workers = [c for c in psutil.Process(proc.pid).children() if "spawn_main" in " ".join(c.cmdline())]
        assert len(workers) == 2 and proc.poll() is None
        victim = workers[0].pid
        os.kill(victim, signal.SIGKILL)                    # what the out-of-memory killer sends
        t_kill = time.monotonic()
        err = proc.communicate(timeout=60)[1]              # the old Pool waited here for ever
        took = time.monotonic() - t_kill
    finally:
        _end(proc)
    print(f"killed worker: the preparation ended {took:.2f} s after the kill")
    assert proc.returncode == 2, err[-2000:]               # the CLI's one-line error
    assert took < 45                                       # at once: not the old wait for ever (a busy machine is slower)
    line = err.strip().splitlines()[-1]
    assert f"(pid {victim}) was killed by signal 9 (SIGKILL)" in line, line
    assert "out-of-memory" in line and "(--num-workers 1; now 2" in line and "continues after them" in line  # CLI words
    assert not (out / "manifest.json").exists() and _done(out) >= 1     # complete parts kept
    assert not psutil.wait_procs(workers, timeout=GENEROUS_S)[1]        # the other worker ended too
    rerun = _prep_process(big, out, tok_dir, workers=2)
    try:
        assert rerun.wait(timeout=300) == 0, rerun.communicate()[1][-2000:]
    finally:
        _end(rerun)
    assert json.loads((out / "manifest.json").read_text())["timing"]["resumed_parts"] >= 1
    assert store_files(out) == ref


# --- data changed under a reader ------------------------------------------------------------------------------
READER = textwrap.dedent("""
    import sys
    from nbkit.corpus import StoreMLMDataset
    ds = StoreMLMDataset(sys.argv[1], 64)
    ds[0]
    print("READY", flush=True)
    sys.stdin.readline()
    try:
        ds[len(ds) - 1]
        print("READ OK")
    except Exception as exc:
        print("RAISED", type(exc).__name__, exc)
""")


@pytest.mark.parametrize("ext", ["ids", "wst"])
def test_a_shard_truncated_under_an_open_reader_is_a_data_error_naming_it_not_a_signal(tmp_path, tok_dir, ext):
    m = prepare(write_txt(tmp_path / "a.txt", review_lines(1500)), tmp_path / "store", tok_dir)
    shard = m["splits"]["train"]["shards"][0]
    f = tmp_path / "store" / "shards" / f"{shard['name']}.{ext}"
    width = {"ids": 2, "wst": 1}[ext]
    assert f.stat().st_size == shard["n_tokens"] * width > 3 * 4096
    p = subprocess.Popen([sys.executable, "-c", READER, str(tmp_path / "store")], env=ENV, cwd=ROOT,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "READY", p.stderr.read()[-2000:]
        os.truncate(f, 4096)                               # a copy cut short, a full disk, a new preparation
        out, err = p.communicate("go\n", timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    how = signal.Signals(-p.returncode).name if p.returncode < 0 else p.returncode
    assert p.returncode == 0, f"reader ended by {how}"          # SIGBUS through a memory map
    assert out.startswith("RAISED DataError " + str(f)), out + err[-2000:]
    assert f"expected {shard['n_tokens'] * width:,} bytes ({shard['n_tokens']:,} tokens), found 4,096" in out
    assert "nbkit prepare-corpus" in out


# --- caches keyed by content ------------------------------------------------------------------------------------
def test_re_preparing_in_one_process_with_another_tokenizer_stores_the_new_tokenizers_ids(tmp_path, tok_dir):
    from transformers import AutoTokenizer

    from nbkit.text.tokenizer import train_wordpiece

    t2 = tmp_path / "t2"
    train_wordpiece(review_lines(800, which="pos"), 250, t2, model_max_length=128)
    lines = review_lines(300, start=1000)
    src = write_txt(tmp_path / "a.txt", lines)
    out = tmp_path / "store"
    prepare(src, out, tok_dir, heldout_share=0)
    m = prepare(src, out, t2, heldout_share=0, overwrite=True)      # same process, same tokenizer.json path
    tok = AutoTokenizer.from_pretrained(out / "tokenizer")
    assert m["tokenizer"]["vocab_size"] == len(tok) != len(AutoTokenizer.from_pretrained(tok_dir))
    ids, _ = load_split(out)
    want = np.concatenate([tok(t, add_special_tokens=False)["input_ids"] + [m["sep_id"]] for t in lines])
    assert np.array_equal(ids, want)


def test_a_store_whose_ids_exceed_its_vocabulary_is_never_marked_complete(tmp_path, tok_dir, monkeypatch):
    from nbkit.corpus import fastpath

    src = write_txt(tmp_path / "a.txt", review_lines(400))
    ref = tmp_path / "ref"
    prepare(src, ref, tok_dir, **KW)
    real, size = fastpath.encode_texts, json.loads((ref / "manifest.json").read_text())["tokenizer"]["vocab_size"]

    def other_ids(*a, **k):       # as if the worker held another, larger tokenizer
        ids, wst, per_text = real(*a, **k)
        return ids + size, wst, per_text

    monkeypatch.setattr(fastpath, "encode_texts", other_ids)
    out = tmp_path / "out"
    with pytest.raises(DataError, match=rf"train-00000\.ids holds token id [\d,]+, but the store's tokenizer .* "
                                        rf"has {size:,} tokens.*overwrite=True"):
        prepare(src, out, tok_dir, **KW)
    assert not (out / "manifest.json").exists() and _done(out) == 0   # the bad part got no marker
    monkeypatch.setattr(fastpath, "encode_texts", real)
    prepare(src, out, tok_dir, **KW)
    assert store_files(out) == store_files(ref)
