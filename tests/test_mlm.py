"""MLM blocks, masking invariants over many batches, whole-word masking, classification encoding."""
from __future__ import annotations

import pytest
import torch
from datasets import Dataset

from nbkit.errors import ConfigError, DataError
from nbkit.text.mlm import MLMCollator, classification_collator, encode_classification, make_blocks, pad_rows
from tests._corpus import char_tokenizer, peoples_daily


@pytest.fixture(scope="module")
def tok():
    return char_tokenizer(n_lines=300, model_max_length=128)


@pytest.fixture(scope="module")
def corpus():
    rows = peoples_daily(300)
    return Dataset.from_dict({"text": [t for t, _ in rows], "words": [list(w) for _, w in rows]})


def test_blocks_are_cls_chunk_sep_and_never_too_long(tok, corpus):
    blocks = make_blocks(corpus, tok, block_size=64)
    sep = tok.sep_token_id   # after every document, as the store's stream has it
    stream = [t for row in tok(list(corpus["text"]), add_special_tokens=False)["input_ids"] if row for t in (*row, sep)]
    assert len(blocks) == len(stream) // 62  # one map batch: only the final short chunk is dropped
    for ids in blocks["input_ids"]:
        assert len(ids) == 64 and ids[0] == tok.cls_token_id and ids[-1] == sep
        assert tok.cls_token_id not in ids[1:-1] and tok.pad_token_id not in ids
    # the chunks are the token stream in order, documents separated
    assert [t for ids in blocks["input_ids"] for t in ids[1:-1]] == stream[:len(blocks) * 62]
    assert sum(ids[1:-1].count(sep) for ids in blocks["input_ids"]) > 5


def test_block_size_limits(tok, corpus):
    with pytest.raises(ConfigError, match="model_max_length=128"):
        make_blocks(corpus, tok, block_size=129)
    with pytest.raises(ConfigError, match="max_position_embeddings=64"):
        make_blocks(corpus, tok, block_size=128, max_position_embeddings=64)
    with pytest.raises(DataError, match="smaller block_size"):
        make_blocks(corpus.select(range(1)), tok, block_size=128)
    with pytest.raises(DataError, match="text_column"):
        make_blocks(corpus, tok, block_size=64, text_column="body")


def _batches(collator, blocks, n_batches, batch_size=16):
    rows = list(blocks)
    for b in range(n_batches):
        chunk = [rows[(b * batch_size + i) % len(rows)] for i in range(batch_size)]
        # ragged rows so padding is exercised
        chunk = [{k: v[: len(v) - (i % 5) * 7] for k, v in ex.items()} for i, ex in enumerate(chunk)]
        yield chunk, collator(chunk)


def test_masking_invariants_over_many_batches(tok, corpus):
    blocks = make_blocks(corpus, tok, block_size=64)
    collator = MLMCollator(tok, seed=0, pad_to_multiple_of=8, whole_word=False)
    special = torch.tensor(tok.all_special_ids)
    n_real = n_target = n_mask = n_random = n_keep = 0
    for raw, batch in _batches(collator, blocks, 60):
        ids, att, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
        assert ids.shape == att.shape == labels.shape and ids.shape[1] % 8 == 0
        orig = pad_rows([ex["input_ids"] for ex in raw], tok.pad_token_id, collator.pad_to_multiple_of)
        real = att.bool() & ~torch.isin(orig, special)
        target = labels != -100
        assert not (target & ~real).any()  # padding / [CLS] / [SEP] never targets
        assert torch.equal(labels[target], orig[target])  # labels are the original tokens
        assert torch.equal(ids[~target], orig[~target])  # nothing changes outside targets
        assert (target.sum(1) >= 1).all()  # every row has a label
        assert not torch.isin(ids[target & (ids != tok.mask_token_id)], special).any()  # no special as random
        n_real += int(real.sum())
        n_target += int(target.sum())
        n_mask += int((target & (ids == tok.mask_token_id)).sum())
        kept = target & (ids == orig)
        n_keep += int(kept.sum())
        n_random += int((target & (ids != tok.mask_token_id) & (ids != orig)).sum())
    assert n_target > 5000
    assert abs(n_target / n_real - 0.15) < 0.01
    # random replacement can hit the original token (1/|V|): counts as kept
    assert abs(n_mask / n_target - 0.8) < 0.02
    assert abs(n_random / n_target - 0.1) < 0.015
    assert abs(n_keep / n_target - 0.1) < 0.015


def test_rows_with_no_draw_still_get_one_target(tok):
    collator = MLMCollator(tok, mlm_probability=0.001, seed=1)
    rows = [{"input_ids": [tok.cls_token_id, 10 + i, 11 + i, tok.sep_token_id]} for i in range(50)]
    labels = collator(rows)["labels"]
    assert ((labels != -100).sum(1) >= 1).all()
    assert (labels[:, 0] == -100).all() and (labels[:, -1] == -100).all()


def test_seed_makes_masks_reproducible(tok):
    rows = [{"input_ids": [2] + list(range(10, 70)) + [3]}] * 4
    a = MLMCollator(tok, seed=3)(rows)
    b = MLMCollator(tok, seed=3)(rows)
    c = MLMCollator(tok, seed=4)(rows)
    assert torch.equal(a["labels"], b["labels"]) and torch.equal(a["input_ids"], b["input_ids"])
    assert not torch.equal(a["labels"], c["labels"])


def test_whole_word_masking_masks_whole_words(tok, corpus):
    blocks = make_blocks(corpus, tok, block_size=64, words_column="words")
    assert set(blocks.column_names) == {"input_ids", "word_ids"}
    plain = make_blocks(corpus, tok, block_size=64)
    assert blocks["input_ids"][:5] == plain["input_ids"][:5]  # same tokens either way here
    first = blocks[0]
    assert first["word_ids"][0] == first["word_ids"][-1] == -1 and first["word_ids"][1] == 0
    collator = MLMCollator(tok, seed=0)
    n_real = n_target = 0
    for raw, batch in _batches(collator, blocks, 30):
        target = batch["labels"] != -100
        att = batch["attention_mask"].bool()
        wids = pad_rows([ex["word_ids"] for ex in raw], -1)
        orig = pad_rows([ex["input_ids"] for ex in raw], tok.pad_token_id)
        real = att & ~torch.isin(orig, torch.tensor(tok.all_special_ids))  # [UNK] is special: never a target
        for i in range(len(raw)):
            for w in wids[i][target[i]].unique():
                assert target[i][(wids[i] == w) & real[i]].all()  # every real piece of a chosen word
        n_real += int(real.sum())
        n_target += int(target.sum())
    assert abs(n_target / n_real - 0.15) < 0.03
    # multi-character words exist, so word-level choice differs from token-level
    assert any(len(w) > 1 for _, ws in peoples_daily(20) for w in ws)


def test_collator_rejects_bad_settings(tok):
    with pytest.raises(ConfigError):
        MLMCollator(tok, mlm_probability=0.0)
    with pytest.raises(ConfigError):
        MLMCollator(tok, mask_replace_prob=0.9, random_replace_prob=0.2)


def test_encode_classification_reports_truncation(tok):
    texts = ["好" * n for n in (5, 10, 20, 40, 100)]
    ds = Dataset.from_dict({"review": texts, "y": [0, 1, 0, 1, 1]})
    enc, report = encode_classification(ds, tok, max_length=32, text_column="review", label_column="y")
    assert report["n"] == 5 and report["n_truncated"] == 2
    assert report["truncated_fraction"] == pytest.approx(0.4)
    assert report["length_p50"] == 22 and report["length_max"] == 102  # tokens incl. [CLS]/[SEP]
    assert [len(x) for x in enc["input_ids"]] == [7, 12, 22, 32, 32]
    assert enc[4]["input_ids"][-1] == tok.sep_token_id and enc["labels"] == [0, 1, 0, 1, 1]
    batch = classification_collator(tok)([enc[0], enc[3]])
    assert batch["input_ids"].shape == (2, 32) and batch["labels"].tolist() == [0, 1]
    assert batch["attention_mask"][0].sum() == 7
    with pytest.raises(ConfigError, match="model_max_length"):
        encode_classification(ds, tok, max_length=512, text_column="review", label_column="y")
    with pytest.raises(DataError, match="label_column"):
        encode_classification(ds, tok, max_length=32, text_column="review")
    named = Dataset.from_dict({"text": ["好"], "label": ["positive"]})
    with pytest.raises(DataError, match="label2id"):
        encode_classification(named, tok, max_length=32)


def test_blocks_and_collator_feed_the_tiny_model(tok, corpus):
    import math

    from nbkit.models.bert import build_mlm_model

    torch.manual_seed(0)
    model = build_mlm_model("tiny", tok, block_size=64)
    blocks = make_blocks(corpus.select(range(60)), tok, block_size=64,
                         max_position_embeddings=model.config.max_position_embeddings)
    batch = MLMCollator(tok, seed=0)([blocks[i] for i in range(8)])
    out = model(**batch)  # transformers' MLM loss: mean cross-entropy over label tokens
    logits = out.logits  # (B, T, V)
    mine = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)
    assert torch.allclose(out.loss, mine)
    # an untrained model is close to uniform: loss ~ ln(V)
    assert abs(out.loss.item() - math.log(len(tok))) < 0.5
    out.loss.backward()
    assert model.bert.embeddings.word_embeddings.weight.grad.abs().sum() > 0
