"""Token ids the model's embedding cannot look up are a DataError before the first step (not IndexError)."""
from __future__ import annotations

import datasets
import pytest
import torch
from loop_helpers import VOCAB, cls_collate, cls_data, tiny_classifier

from nbkit.errors import DataError
from nbkit.train import Loop, TrainConfig
from nbkit.train.preflight import check_token_ids


def _loop(train, eval_data=None, **kw):
    cfg = TrainConfig(max_steps=2, batch_size=4, progress=False, precision="fp32", **kw)
    return Loop(tiny_classifier(), cfg, train, eval_data, collate_fn=cls_collate)


def _forwards(loop):
    calls = []
    loop.model.register_forward_pre_hook(lambda m, a: calls.append(1))
    return calls


def test_id_at_vocab_size_stops_fit_before_any_step_naming_max_id_vocab_and_fix():
    data = cls_data(n=20, seed=3)
    data[13]["input_ids"] = data[13]["input_ids"].clone()
    data[13]["input_ids"][5] = VOCAB + 7                         # what a bigger tokenizer gives
    loop = _loop(data)
    calls = _forwards(loop)
    with pytest.raises(DataError) as err:
        loop.fit()
    msg = str(err.value)
    assert f"token id of {VOCAB + 7}" in msg and f"vocab_size is {VOCAB}" in msg
    assert "vocab_size=len(tokenizer)" in msg and "train_data" in msg
    assert calls == [] and loop.state.step == 0


def test_ids_below_vocab_size_pass_and_the_last_valid_id_is_fine():
    data = cls_data(n=12, seed=5)
    data[0]["input_ids"][1] = VOCAB - 1
    check_token_ids(tiny_classifier(), data, "train_data")      # no error
    assert _loop(data).fit().metrics["steps"] == 2


def test_datasets_column_and_negative_ids_and_eval_data_before_fit():
    rows = [{"input_ids": [2, 9, 11, 3], "label": 0}, {"input_ids": [2, 9, 3], "label": 1}]
    ok = datasets.Dataset.from_list(rows)
    bad = datasets.Dataset.from_list(rows + [{"input_ids": [2, VOCAB, 3], "label": 0}])
    model = tiny_classifier()
    check_token_ids(model, ok, "train_data")
    with pytest.raises(DataError, match=f"token id of {VOCAB} but the model's vocab_size is {VOCAB}"):
        check_token_ids(model, bad, "eval_data")
    check_token_ids(model, bad.select([0, 1]), "train_data")   # the bad row not selected: no false alarm
    check_token_ids(model, bad.shuffle(seed=0).select(range(2)).filter(lambda r: VOCAB not in r["input_ids"]),
                    "train_data")
    with pytest.raises(DataError, match=f"token id of {VOCAB}"):
        check_token_ids(model, bad.select([2]), "train_data")
    neg = cls_data(n=8)
    neg[2]["input_ids"] = torch.tensor([2, -1, 3])
    with pytest.raises(DataError, match=r"negative token id \(-1\)"):
        check_token_ids(model, neg, "train_data")
    big = cls_data(n=8, seed=9)
    big[4]["input_ids"] = big[4]["input_ids"].clone()
    big[4]["input_ids"][0] = VOCAB * 3
    loop = _loop(cls_data(n=8), eval_data=big)
    with pytest.raises(DataError, match=f"eval_data has a token id of {VOCAB * 3}"):
        loop.evaluate()                                           # before fit(): checked once here too


def test_embedding_resized_past_config_counts_as_the_table_size():
    model = tiny_classifier()
    model.resize_token_embeddings(VOCAB + 10)
    data = [{"input_ids": torch.tensor([2, VOCAB + 9, 3])}]
    check_token_ids(model, data, "train_data")                   # VOCAB + 9 < VOCAB + 10: fine


def test_declared_token_id_range_is_used_without_reading_the_data():
    class Declared(list):               # a corpus store declares its tokenizer's bound (StoreMLMDataset)
        token_id_range = (0, VOCAB)

        def __getitem__(self, i):
            raise AssertionError("read an example: the declared range should have been used")

    with pytest.raises(DataError, match=f"token id of {VOCAB}"):
        check_token_ids(tiny_classifier(), Declared([None]), "train_data")
    Declared.token_id_range = (0, VOCAB - 1)
    check_token_ids(tiny_classifier(), Declared([None]), "train_data")
