"""The masked-positions-only MLM head: same loss and gradients, fewer FLOPs, same checkpoints."""
import pytest
import torch
from loop_helpers import mlm_collate, tiny_config, token_data
from transformers import BertForMaskedLM

from nbkit.models.flops import bert_flops_per_token, mlm_head_flops
from nbkit.models.mlm_head import SparseHeadBertForMaskedLM, forward_logits, uses_sparse_head
from nbkit.train import Loop, TrainConfig, token_loss_sum

NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _sparse(seed=0):
    torch.manual_seed(seed)
    return SparseHeadBertForMaskedLM(tiny_config(**NO_DROPOUT))


def _batch(seed=0):
    torch.manual_seed(seed)
    batch = mlm_collate(token_data(6))
    return batch, batch.pop("labels")


def _loss_and_grads(model, sparse):
    batch, labels = _batch()
    model.zero_grad()
    logits, scored = forward_logits(model, batch, labels, sparse)
    loss = token_loss_sum(logits, scored)
    loss.backward()
    return loss.detach(), logits.shape, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_sparse_head_gives_the_full_head_loss_and_gradients_on_fewer_rows():
    model = _sparse()
    loss_full, shape_full, g_full = _loss_and_grads(model, sparse=False)
    loss_sparse, shape_sparse, g_sparse = _loss_and_grads(model, sparse=True)
    _, labels = _batch()
    n_label = int((labels != -100).sum())
    assert shape_full == (6, 16, 60) and shape_sparse == (n_label, 60) and n_label < 6 * 16
    torch.testing.assert_close(loss_sparse, loss_full, rtol=1e-5, atol=1e-5)
    assert g_full.keys() == g_sparse.keys()
    for name in g_full:
        torch.testing.assert_close(g_sparse[name], g_full[name], rtol=1e-4, atol=1e-6, msg=name)


def test_without_predict_mask_it_is_bert_for_masked_lm_and_checkpoints_move_both_ways(tmp_path):
    sparse = _sparse().eval()
    batch, _ = _batch()
    sparse.save_pretrained(tmp_path / "a")
    plain = BertForMaskedLM.from_pretrained(tmp_path / "a").eval()
    with torch.no_grad():
        torch.testing.assert_close(sparse(**batch).logits, plain(**batch).logits)
    plain.save_pretrained(tmp_path / "b")
    back = SparseHeadBertForMaskedLM.from_pretrained(tmp_path / "b").eval()
    with torch.no_grad():
        torch.testing.assert_close(back(**batch).logits, plain(**batch).logits)


def test_loop_uses_the_sparse_head_in_eager_mode_only_and_counts_its_flops():
    assert uses_sparse_head(_sparse(), False) and not uses_sparse_head(_sparse(), "eager")
    assert not uses_sparse_head(BertForMaskedLM(tiny_config()), False)
    cfg = dict(max_steps=2, batch_size=4, log_every=1, progress=False, precision="fp32", max_grad_norm=None)
    loop = Loop(_sparse(), TrainConfig(**cfg), token_data(8), collate_fn=mlm_collate)
    assert loop.sparse_head
    window = [_micro_with_labels()]
    out = loop.train_step(window)
    ids, labels = window[0]["input_ids"], window[0]["labels"]
    n_label, config = int((labels != -100).sum()), loop.model.config
    encoder = ids.numel() * bert_flops_per_token(config, ids.shape[1], mlm_head=False)
    assert out["flops"] == pytest.approx(encoder + n_label * mlm_head_flops(config))
    full = ids.numel() * bert_flops_per_token(config, ids.shape[1])
    assert out["flops"] < full


def _micro_with_labels():
    batch, labels = _batch(seed=3)
    return {**batch, "labels": labels}


def test_sparse_and_full_head_runs_train_the_same_weights():
    cfg = dict(max_steps=3, batch_size=4, log_every=1, progress=False, precision="fp32", lr=1e-3)
    runs = []
    for sparse in (True, False):
        loop = Loop(_sparse(seed=1), TrainConfig(**cfg), token_data(16), token_data(8, seed=1),
                    collate_fn=mlm_collate)
        loop.sparse_head = sparse
        res = loop.fit()
        runs.append((res, loop.model.state_dict(), loop.evaluate()))
    (r_s, w_s, e_s), (r_f, w_f, e_f) = runs
    assert [h["loss"] for h in r_s.history if "loss" in h] == pytest.approx(
        [h["loss"] for h in r_f.history if "loss" in h], rel=1e-4)
    for name in w_s:
        torch.testing.assert_close(w_s[name], w_f[name], rtol=1e-4, atol=1e-5, msg=name)
    assert e_s["eval_loss"] == pytest.approx(e_f["eval_loss"], rel=1e-4)
    assert "eval_perplexity" in e_s and e_s["eval_tokens"] == e_f["eval_tokens"]


def test_head_flops_plus_encoder_equal_the_full_mlm_count():
    config = tiny_config()
    for T in (16, 64):
        assert bert_flops_per_token(config, T, mlm_head=False) + mlm_head_flops(config) == pytest.approx(
            bert_flops_per_token(config, T))
    assert mlm_head_flops(config, training=False) * 3 == pytest.approx(mlm_head_flops(config))
