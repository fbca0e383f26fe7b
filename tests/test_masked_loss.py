"""Held-out MLM loss split by what the collator did to each target, and the plateau verdict on it (D14).

A loss over all targets mixes the unchanged ones, which a model can copy from its input; on
notebook 02's cpu model that put "uses context" on a model whose [MASK] targets sat at the
unigram entropy.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from nbkit import evaluate
from nbkit.evaluate.probes import unigram_entropy
from nbkit.text.mlm import MLMCollator
from nbkit.train import Loop, TrainConfig
from nbkit.train.loop import target_kinds
from tests._corpus import char_tokenizer

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tok():
    return char_tokenizer(n_lines=60, model_max_length=64)


def _rows(tok, n=24, length=30, seed=0):
    g = torch.Generator().manual_seed(seed)
    lo = max(tok.all_special_ids) + 1
    return [{"input_ids": [tok.cls_token_id, *torch.randint(lo, lo + 40, (length,), generator=g).tolist(),
                           tok.sep_token_id]} for _ in range(n)]


class CopyModel(torch.nn.Module):
    """No context at all: copies its input token, and at ``[MASK]`` predicts the unigram distribution
    of :func:`_rows` (uniform over its 40 tokens)."""

    def __init__(self, tok):
        super().__init__()
        self.vocab, self.mask_id, self.lo = len(tok), tok.mask_token_id, max(tok.all_special_ids) + 1
        self.bias = torch.nn.Parameter(torch.zeros(self.vocab))

    def forward(self, input_ids, attention_mask=None, **_):
        unigram = torch.full((self.vocab,), -30.0)
        unigram[self.lo:self.lo + 40] = 0.0                                               # (V,)
        copy = F.one_hot(input_ids, self.vocab).float() * 30.0                            # (B, T, V)
        at_mask = (input_ids == self.mask_id).unsqueeze(-1)                               # (B, T, 1)
        return SimpleNamespace(logits=torch.where(at_mask, unigram, copy + unigram) + self.bias)


def _cfg():
    return TrainConfig(max_steps=1, batch_size=6, progress=False, seed=3)


def test_target_kinds_tell_mask_random_and_kept_apart():
    ids = torch.tensor([[2, 4, 9, 7, 4, 3]])            # (1, 6); 4 is [MASK]
    labels = torch.tensor([[-100, 8, 9, 5, 6, -100]])
    kinds = target_kinds(ids, labels, mask_id=4)
    assert kinds[labels != -100].tolist() == [0, 2, 1, 0]   # mask, kept, random, mask


def test_the_split_adds_up_to_eval_loss_and_follows_the_collators_shares(tok):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=48, max_position_embeddings=40))
    m = Loop(model, _cfg(), _rows(tok), _rows(tok, 60, seed=1), collate_fn=MLMCollator(tok, whole_word=False),
             device="cpu").evaluate()
    parts = [(m[f"eval_{k}_loss"], m[f"eval_{k}_tokens"]) for k in ("mask", "random", "kept")]
    assert sum(n for _, n in parts) == m["eval_tokens"]
    assert sum(loss * n for loss, n in parts) / m["eval_tokens"] == pytest.approx(m["eval_loss"], rel=1e-5)
    shares = [n / m["eval_tokens"] for _, n in parts]
    assert shares[0] == pytest.approx(0.8, abs=0.08) and shares[1] == pytest.approx(0.1, abs=0.06)


def test_a_model_that_copies_its_input_is_not_said_to_use_context(tok):
    held = _rows(tok, 60, seed=2)
    loop = Loop(CopyModel(tok), _cfg(), _rows(tok), held, device="cpu",
                collate_fn=MLMCollator(tok, whole_word=False, mask_replace_prob=0.5, random_replace_prob=0.0))
    m = loop.evaluate()
    blocks = [r["input_ids"] for r in _rows(tok, 200, seed=5)]
    entropy = unigram_entropy(blocks, tok.all_special_ids)
    assert m["eval_kept_loss"] < 0.01 and m["eval_mask_loss"] == pytest.approx(math.log(40), abs=1e-4)
    assert m["eval_mask_loss"] == pytest.approx(entropy, abs=0.05)   # frequencies only, at [MASK]
    assert m["eval_loss"] < entropy - 0.3                            # yet the mix looks far below the plateau
    mixed = evaluate.plateau_check(m["eval_loss"], blocks, tok)
    assert "uses context" in mixed.text() and "metrics dict" in mixed.text()   # the float path says what it mixes
    verdict = evaluate.plateau_check(m, blocks, tok)
    assert verdict.scored == "[MASK]" and verdict.eval_loss == m["eval_mask_loss"]
    assert verdict.all_loss == m["eval_loss"] and verdict.kept_loss == m["eval_kept_loss"]
    assert verdict.stuck and "STUCK" in verdict.text() and "[MASK] targets" in verdict.text()


def test_without_a_mask_id_the_metrics_stay_as_before_and_the_check_uses_eval_loss(tok):
    collate = MLMCollator(tok, whole_word=False)
    m = Loop(CopyModel(tok), _cfg(), _rows(tok), _rows(tok, 12, seed=1), device="cpu",
             collate_fn=lambda ex: collate(ex)).evaluate()             # a wrapper hides mask_id
    assert "eval_mask_loss" not in m and math.isfinite(m["eval_loss"])
    check = evaluate.plateau_check(m, [r["input_ids"] for r in _rows(tok)], tok)
    assert check.scored == "all" and check.eval_loss == m["eval_loss"]
