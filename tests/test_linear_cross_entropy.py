"""The fused output layer + cross-entropy (nbkit.train.loss.linear_cross_entropy_sum) against the unfused
loss and its gradients: fp32 to float tolerance, bf16 autocast to bf16 tolerance, any chunk size."""
import pytest
import torch
import torch.nn.functional as F

from nbkit.errors import ConfigError
from nbkit.train.loss import linear_cross_entropy_sum, token_loss_sum


def _case(n=37, d=16, v=101, seed=0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, d, generator=g, requires_grad=True)
    weight = (torch.randn(v, d, generator=g) * 0.5).requires_grad_()
    labels = torch.randint(0, v, (n,), generator=g)
    return hidden, weight, labels


def _grads(loss, *xs):
    return torch.autograd.grad(loss, xs)


@pytest.mark.parametrize("chunk_rows", [1, 5, 37, 1000])
def test_fp32_loss_and_gradients_equal_the_unfused(chunk_rows):
    hidden, weight, labels = _case()
    ref = token_loss_sum(hidden @ weight.T, labels)
    got = linear_cross_entropy_sum(hidden, weight, labels, chunk_rows=chunk_rows)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-4)
    for a, b in zip(_grads(got * 0.3, hidden, weight), _grads(ref * 0.3, hidden, weight)):  # scaled upstream grad
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_tied_weight_gets_both_gradients():
    """GPT-2 ties the output layer to the embeddings: the weight's gradient is the sum of both uses."""
    hidden, weight, labels = _case()
    ids = torch.randint(0, weight.shape[0], (hidden.shape[0],))

    def total(fused):
        h = hidden + F.embedding(ids, weight)
        return (linear_cross_entropy_sum(h, weight, labels, 8) if fused else token_loss_sum(h @ weight.T, labels))

    torch.testing.assert_close(_grads(total(True), weight)[0], _grads(total(False), weight)[0], rtol=1e-5, atol=1e-5)


def test_bf16_autocast_matches_the_unfused_autocast_loss():
    hidden, weight, labels = _case(n=64, d=32, v=257)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = token_loss_sum(F.linear(hidden, weight), labels)
        got = linear_cross_entropy_sum(hidden, weight, labels, chunk_rows=16)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, ref.float(), rtol=2e-2, atol=0.5)
    ref_grads, got_grads = _grads(ref, hidden, weight), _grads(got, hidden, weight)
    for a, b in zip(got_grads, ref_grads):
        assert a.dtype == torch.float32
        assert (a - b).norm() / b.norm() < 2e-2


def test_bad_shapes_are_named():
    hidden, weight, labels = _case()
    with pytest.raises(ConfigError, match="labels"):
        linear_cross_entropy_sum(hidden, weight, labels[:-1])
    with pytest.raises(ConfigError, match="chunk_rows"):
        linear_cross_entropy_sum(hidden, weight, labels, chunk_rows=0)
