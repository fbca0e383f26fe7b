"""Masks as a function of the batch, not of the call count: a seeded MLMCollator under the loop.

Issue 20 item 3: ``MLMCollator(seed=...)`` kept a private generator that the loop's RNG
isolation could not reset, so two evaluations of one checkpoint scored different masks and a
resumed run drew other masks than a straight one.
"""
from __future__ import annotations

import pytest
import torch
from datasets import Dataset

from nbkit.rng import seed_scope
from nbkit.switches import isolated_rng
from nbkit.text.mlm import MLMCollator, make_blocks
from nbkit.train import Loop, TrainConfig
from tests._corpus import char_tokenizer, peoples_daily

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tok():
    return char_tokenizer(n_lines=120, model_max_length=64)


@pytest.fixture(scope="module")
def blocks(tok):
    rows = peoples_daily(120)
    ds = Dataset.from_dict({"text": [t for t, _ in rows], "words": [list(w) for _, w in rows]})
    out = make_blocks(ds, tok, block_size=24, words_column="words")
    return out.select(range(40)), out.select(range(40, 56))


def _model(tok, seed=0):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    return BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, intermediate_size=48,
                                      max_position_embeddings=32, pad_token_id=tok.pad_token_id))


def _config(out=None, **kw):
    base = dict(max_steps=6, batch_size=4, lr=1e-3, log_every=1, progress=False, seed=11, output_dir=out)
    return TrainConfig(**{**base, **kw})


def _rows(n=3):
    return [{"input_ids": [2, *range(10, 50), 3]} for _ in range(n)]


def test_scope_entry_restarts_a_seeded_collator(tok):
    col = MLMCollator(tok, seed=7)
    with seed_scope(5):
        a = col(_rows())
    col(_rows())                                            # an unscoped call moves the private stream
    with seed_scope(5):
        b = col(_rows())
    with seed_scope(6):
        c = col(_rows())
    assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["labels"], b["labels"])
    assert not torch.equal(a["labels"], c["labels"])
    with seed_scope(5):                                     # the collator's own seed still counts
        d = MLMCollator(tok, seed=8)(_rows())
    assert not torch.equal(a["labels"], d["labels"])


def test_isolated_rng_reaches_the_private_generator_and_keeps_the_unscoped_stream(tok):
    ref = MLMCollator(tok, seed=3)
    first, second = ref(_rows()), ref(_rows())
    col = MLMCollator(tok, seed=3)
    assert torch.equal(col(_rows())["labels"], first["labels"])
    with isolated_rng(99):
        col(_rows())                                        # a scoped call does not move the stream
    assert torch.equal(col(_rows())["labels"], second["labels"])


@pytest.mark.parametrize("seed", [None, 4])
def test_evaluating_twice_scores_the_same_masks(tok, blocks, seed):
    train, held = blocks
    loop = Loop(_model(tok), _config(), train, held, collate_fn=MLMCollator(tok, seed=seed), device="cpu")
    a, b = loop.evaluate(), loop.evaluate()
    assert a == b
    loop.collate_fn(list(held.select(range(4))))            # using the collator between evals changes nothing
    assert loop.evaluate() == a


@pytest.mark.filterwarnings("ignore:checkpoint at step")
def test_a_reloaded_checkpoint_evaluates_to_the_same_loss(tok, blocks, tmp_path):
    train, held = blocks
    loop = Loop(_model(tok), _config(tmp_path, max_steps=3), train, held,
                collate_fn=MLMCollator(tok, seed=4), device="cpu")
    loop.fit()
    before = loop.evaluate()
    fresh = Loop(_model(tok, seed=1), _config(tmp_path, max_steps=3), train, held,
                 collate_fn=MLMCollator(tok, seed=4), device="cpu")
    fresh._resume()
    assert fresh.evaluate() == before


class _Record:
    """Every training batch's input_ids and labels, in order (a collate wrapper)."""

    def __init__(self, collate):
        self.collate, self.seen = collate, []

    def __call__(self, examples):
        out = self.collate(examples)
        self.seen.append((out["input_ids"].clone(), out["labels"].clone()))
        return out


def _train_losses(loop):
    return [h["loss"] for h in loop.fit().history if "loss" in h]


class _StopAt:
    def __init__(self, step):
        self.step = step

    def on_step_end(self, loop):
        loop.stop_training = loop.state.step >= self.step   # as a kill after step 3 would, then fit() saves


def test_resume_draws_the_masks_and_losses_of_a_straight_run(tok, blocks, tmp_path):
    train, _ = blocks
    straight = _Record(MLMCollator(tok, seed=4))
    full = _train_losses(Loop(_model(tok), _config(tmp_path / "a"), train, collate_fn=straight, device="cpu"))
    first_half = _Record(MLMCollator(tok, seed=4))
    Loop(_model(tok), _config(tmp_path / "b"), train, collate_fn=first_half, callbacks=[_StopAt(3)],
         device="cpu").fit()
    second_half = _Record(MLMCollator(tok, seed=4))    # a new process: a new collator
    resumed_losses = _train_losses(Loop(_model(tok, seed=1), _config(tmp_path / "b"), train,
                                        collate_fn=second_half, device="cpu"))
    drop = lambda seen: seen[1:]                          # noqa: E731 (the pre-flight check's batch)
    resumed = drop(first_half.seen) + drop(second_half.seen)
    assert len(resumed) == len(drop(straight.seen)) == 6
    for (ids_a, lab_a), (ids_b, lab_b) in zip(drop(straight.seen), resumed):
        assert torch.equal(ids_a, ids_b) and torch.equal(lab_a, lab_b)
    assert resumed_losses == pytest.approx(full, abs=1e-6)


def test_a_seeded_collator_draws_the_same_masks_in_workers_as_in_the_main_process(tok, blocks):
    train, _ = blocks
    runs = [_train_losses(Loop(_model(tok), _config(max_steps=4, num_workers=w), train,
                               collate_fn=MLMCollator(tok, seed=4), device="cpu")) for w in (0, 2)]
    assert runs[0] == pytest.approx(runs[1], abs=1e-6)
