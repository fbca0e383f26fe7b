"""Issue 52 item 4: a non-finite loss names the batch's examples where they come from, for the two sources the
labelled-file origins do not cover: a corpus store's blocks (shard, token range, documents of that shard) and NER
windows (sentence index, its id: a user file's file:line, and which window of a long sentence)."""
from __future__ import annotations

import pickle
import re

import numpy as np
import pytest
import torch
from _ner_items import LABELS

from nbkit.errors import NonFiniteLossError
from tests.corpus_helpers import docs, load_split, prepare, review_lines, small_tokenizer, write_txt
from tests.loop_helpers import mlm_collate, tiny_mlm


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("names")
    tok_dir = small_tokenizer(root / "tok")
    out = root / "store"
    prepare([str(write_txt(root / "c.txt", review_lines(60, start=600)))], out, tok_dir, heldout_share=0.0)
    return out, tok_dir


def test_a_store_block_names_its_shard_token_range_and_documents(store):
    """Before: StoreMLMDataset had no describe_example, so the stop named bare block numbers."""
    from transformers import AutoTokenizer

    from nbkit.corpus.dataset import StoreCausalDataset, StoreMLMDataset

    out, tok_dir = store
    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    ids, _ = load_split(out)
    sep = int(tok.sep_token_id)
    texts = docs(out, tok)
    for ds, chunk in ((StoreMLMDataset(out, 32, "train"), 30), (StoreCausalDataset(out, 32, "train"), 32)):
        for i in (0, 7, len(ds) - 1):
            lo, hi = i * chunk, (i + 1) * chunk - 1
            first, last = int((ids[:lo] == sep).sum()), int((ids[:hi] == sep).sum())   # documents before each end
            docs_ = f"document {first}" if first == last else f"documents {first}-{last}"
            assert ds.describe_example(i) == f"block {i} of 'train': train-00000.ids tokens {lo}-{hi}, {docs_} of that shard"
            pieces = [p for p in tok.decode(ids[lo:hi + 1].tolist()).replace(" ", "").split("[SEP]") if p]
            assert pieces[0] in texts[first] and pieces[-1] in texts[last]           # the named documents hold it
    with pytest.raises(IndexError):
        ds.describe_example(len(ds))


def test_a_non_finite_loss_on_store_blocks_names_the_bad_block_in_the_store(store, tmp_path):
    from nbkit.corpus.dataset import StoreMLMDataset
    from nbkit.train import Loop, TrainConfig

    out, _ = store
    ds = StoreMLMDataset(out, 32, "train")
    blocks = [set(ds[i]["input_ids"][1:-1].tolist()) for i in range(len(ds))]
    bad, token = next((i, t) for i, b in enumerate(blocks) for t in sorted(b)
                      if t > 5 and sum(t in other for other in blocks) == 1)             # a token only block `bad` has
    model = tiny_mlm(vocab_size=ds.token_id_range[1] + 1, max_position_embeddings=64)
    model.bert.embeddings.word_embeddings.register_forward_hook(
        lambda mod, inp, out_: out_.masked_fill((inp[0] == token).any(-1)[:, None, None], float("nan")))

    def collate(examples):     # the loop helpers' masking, but the token stays visible to the hook
        batch = mlm_collate(examples)
        batch["input_ids"] = torch.stack([e["input_ids"] for e in examples])
        return batch

    cfg = TrainConfig(max_steps=len(ds), batch_size=4, output_dir=tmp_path, progress=False, progress_every_s=None,
                      precision="fp32")
    with pytest.raises(NonFiniteLossError) as err:
        Loop(model, cfg, ds, collate_fn=collate, device="cpu").fit()
    msg = str(err.value)
    assert f"{bad} (block {bad} of 'train': train-00000.ids tokens {bad * 30}-{bad * 30 + 29}, document" in msg, msg
    named = re.search(r"index in the dataset\): (.*)\. Fix", msg).group(1)
    assert named.count("(block ") == 4                                                 # the batch's 4 blocks


def test_ner_windows_name_the_sentence_its_id_and_the_window(tmp_path):
    """Before: the windows' dataset had no describe_example, so the stop named window numbers, which are not the
    sentences' (a long sentence has several windows)."""
    from transformers import AutoTokenizer

    from nbkit.models.standin import build_standin
    from nbkit.text.token_classification import encode_token_classification

    tok = AutoTokenizer.from_pretrained(str(build_standin(tmp_path / "bert")))
    items = [{"id": "train.conll:1", "tokens": list("我在北京"), "tags": ["O"] * 4},
             {"id": "train.conll:7", "tokens": list("上海" * 20), "tags": ["O"] * 40},
             {"tokens": list("张三"), "tags": ["O", "O"]}]
    enc = encode_token_classification(items, tok, {name: i for i, name in enumerate(LABELS)}, max_length=18, stride=4)
    describe = enc.dataset.describe_example
    names = [describe(i) for i in range(len(enc.dataset))]
    n = len(enc.windows) - 2                                                           # windows of sentence 1
    assert [k for k, _ in enc.windows] == [0, *[1] * n, 2] and n == 3
    assert names[0] == "sentence 0 (id 'train.conll:1')" and names[-1] == "sentence 2"
    assert names[1:-1] == [f"sentence 1 (id 'train.conll:7'), window {w + 1} of 3 (sub-tokens {s}-{s + 15})"
                           for w, s in enumerate(s for k, s in enc.windows if k == 1)]
    assert pickle.loads(pickle.dumps(describe))(2) == names[2]                         # a DataLoader worker's copy
    assert np.array_equal(enc.dataset[2]["input_ids"][1:-1], tok(items[1]["tokens"], is_split_into_words=True,
                          add_special_tokens=False)["input_ids"][enc.windows[2][1]:enc.windows[2][1] + 16])

