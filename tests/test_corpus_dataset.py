"""StoreMLMDataset: blocks of a prepared store (nbkit-corpus/1) read back exactly, whole words, errors, workers."""
from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import peoples_daily  # noqa: E402
from _store import stream, write_store  # noqa: E402

from nbkit.corpus.dataset import StoreMLMDataset  # noqa: E402
from nbkit.errors import ConfigError, DataError  # noqa: E402


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    docs = [list(words) for _, words in peoples_daily(120)]        # gold word boundaries
    return write_store(tmp_path_factory.mktemp("store"), docs, shard_tokens=397)


def test_blocks_are_the_stream_cut_and_wrapped_across_shards(store_dir):
    ids, wst = stream(store_dir)
    manifest = json.loads((store_dir / "manifest.json").read_text())
    assert len(manifest["splits"]["train"]["shards"]) > 3                   # reads cross shard boundaries
    for B in (16, 64):
        ds = StoreMLMDataset(store_dir, B)
        assert len(ds) == len(ids) // (B - 2)
        for i in (0, 1, 5, len(ds) // 2, len(ds) - 1, -1):
            j = i % len(ds)
            block = ds[i]
            want = ids[j * (B - 2):(j + 1) * (B - 2)]
            assert block["input_ids"].shape == (B,) and block["input_ids"].dtype == torch.int64
            assert block["input_ids"][0] == manifest["cls_id"] and block["input_ids"][-1] == manifest["sep_id"]
            assert block["input_ids"][1:-1].tolist() == want.tolist()
            w = np.maximum(np.cumsum(wst[j * (B - 2):(j + 1) * (B - 2)].astype(np.int64)) - 1, 0)
            assert block["word_ids"].tolist() == [-1, *w.tolist(), -1]
    with pytest.raises(IndexError):
        ds[len(ds)]


def test_every_block_boundary_crossing_a_shard_reads_both_shards(store_dir):
    ids, _ = stream(store_dir)
    B = 50
    ds = StoreMLMDataset(store_dir, B)
    got = torch.cat([ds[i]["input_ids"][1:-1] for i in range(len(ds))]).numpy()
    assert got.tolist() == ids[:len(ds) * (B - 2)].tolist()                  # nothing skipped or repeated


def test_block_starting_mid_word_numbers_that_word_zero(tmp_path):
    docs = [["中华人民共和国", "成立", "了"]] * 30
    d = write_store(tmp_path / "s", docs, shard_tokens=1000, heldout_every=1000)
    _, wst = stream(d)
    ds = StoreMLMDataset(d, 6)                                              # 4 tokens per block
    mid = next(i for i in range(len(ds)) if wst[i * 4] == 0)
    wid = ds[mid]["word_ids"].tolist()
    assert wid[0] == -1 and wid[1] == 0 and wid[-1] == -1 and min(wid[1:-1]) == 0


def test_whole_word_masking_with_the_collator(store_dir):
    from transformers import AutoTokenizer

    from nbkit.text.mlm import MLMCollator

    tok = AutoTokenizer.from_pretrained(store_dir / "tokenizer")
    ds = StoreMLMDataset(store_dir, 64)
    rows = [ds[i] for i in range(32)]
    batch = MLMCollator(tok, mlm_probability=0.3, seed=0, whole_word=True)(rows)
    special = set(tok.all_special_ids)
    n_words_checked = 0
    for r, row in enumerate(rows):
        target = (batch["labels"][r] != -100).tolist()
        for w in set(row["word_ids"].tolist()) - {-1}:
            pos = [p for p, x in enumerate(row["word_ids"].tolist())
                   if x == w and int(row["input_ids"][p]) not in special]
            if len(pos) > 1:
                n_words_checked += 1
                assert len({target[p] for p in pos}) == 1, f"word {w} of row {r} partly masked"
    assert n_words_checked > 50
    assert 0.1 < (batch["labels"] != -100).float().mean() < 0.5


def test_uint32_store_reads_the_same_blocks(store_dir, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(store_dir / "tokenizer")
    docs = [list(words) for _, words in peoples_daily(120)]
    d32 = write_store(tmp_path / "s32", docs, tokenizer=tok, shard_tokens=397, dtype="uint32")
    a, b = StoreMLMDataset(store_dir, 32), StoreMLMDataset(d32, 32)
    assert len(a) == len(b)
    assert all(torch.equal(a[i]["input_ids"], b[i]["input_ids"]) for i in range(0, len(a), 7))


def test_validation_split_and_unknown_split(store_dir):
    val = StoreMLMDataset(store_dir, 32, split="validation")
    assert 0 < len(val) < len(StoreMLMDataset(store_dir, 32))
    with pytest.raises(DataError, match="no split 'test'"):
        StoreMLMDataset(store_dir, 32, split="test")


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize("damage, message", [
    (lambda d: (d / "manifest.json").unlink(), "has no manifest.json"),
    (lambda d: (d / "manifest.json").write_text("{not json"), "not valid JSON"),
    (lambda d: _edit(d, complete=False), "not complete"),
    (lambda d: _edit(d, format="nbkit-corpus/0"), "format 'nbkit-corpus/0'"),
    (lambda d: _edit(d, dtype="int8"), "dtype 'int8'"),
    (lambda d: (d / "shards" / "train-00001.ids").write_bytes(b"\0" * 10), "expected .* bytes"),
    (lambda d: (d / "shards" / "train-00000.wst").unlink(), "missing"),
])
def test_damaged_store_is_a_data_error_naming_dir_and_fix(store_dir, tmp_path, damage, message):
    d = _copy(store_dir, tmp_path / "bad")
    damage(d)
    with pytest.raises(DataError, match=message) as err:
        StoreMLMDataset(d, 32)
    assert str(d) in str(err.value) and "nbkit prepare-corpus" in str(err.value)


def _edit(d: Path, **changes):
    m = json.loads((d / "manifest.json").read_text())
    m.update(changes)
    (d / "manifest.json").write_text(json.dumps(m))


def test_missing_directory_and_tiny_split(tmp_path, store_dir):
    with pytest.raises(DataError, match="no prepared corpus at"):
        StoreMLMDataset(tmp_path / "nowhere", 32)
    with pytest.raises(DataError, match="fewer than one block"):
        StoreMLMDataset(store_dir, 5000, split="validation")
    with pytest.raises(ConfigError):
        StoreMLMDataset(store_dir, 2)


def test_shards_open_lazily_and_never_travel_in_a_pickle(store_dir):
    ds = StoreMLMDataset(store_dir, 32)
    assert ds._files == {}                                  # nothing opened by construction
    ds[0]
    assert list(ds._files) == [0]                           # only the shard that block 0 lives in
    clone = pickle.loads(pickle.dumps(ds))
    assert clone._files == {} and torch.equal(clone[3]["input_ids"], ds[3]["input_ids"])


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dataloader_workers_read_the_same_blocks(store_dir, context):
    ds = StoreMLMDataset(store_dir, 32)
    ds[len(ds) - 1]                                         # parent holds open maps before the fork
    loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=2, multiprocessing_context=context)
    got = torch.cat([b["input_ids"] for b in loader])
    assert torch.equal(got, torch.stack([ds[i]["input_ids"] for i in range(len(ds))]))


def test_loop_trains_on_the_store_without_reading_every_block_first(store_dir, monkeypatch):
    """fit()'s length check takes the store's fixed block size instead of reading all blocks."""
    from transformers import AutoTokenizer

    from nbkit.models.bert import build_mlm_model
    from nbkit.text.mlm import MLMCollator
    from nbkit.train import Loop, TrainConfig

    tok = AutoTokenizer.from_pretrained(store_dir / "tokenizer")
    train, val = StoreMLMDataset(store_dir, 32), StoreMLMDataset(store_dir, 32, "validation")
    reads = []
    orig = StoreMLMDataset.__getitem__
    monkeypatch.setattr(StoreMLMDataset, "__getitem__", lambda self, i: reads.append(i) or orig(self, i))
    cfg = TrainConfig(max_steps=2, batch_size=4, lr=1e-3, progress=False, precision="fp32", log_every=1)
    result = Loop(build_mlm_model("tiny", tok, 32), cfg, train, val, collate_fn=MLMCollator(tok), device="cpu").fit()
    assert result.metrics["steps"] == 2
    assert len(reads) < len(train) / 2, f"{len(reads)} block reads for a 2-step run over {len(train)} blocks"
