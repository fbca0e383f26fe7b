"""The loop on classification: class-weighted loss (C02), macro-F1 in evaluation, the
position-limit check before the first step (C03) and seeded model construction (C13)."""
import pytest
import torch
import torch.nn.functional as F

from nbkit.errors import ConfigError
from nbkit.evaluate.metrics import macro_f1
from nbkit.train import Loop, TrainConfig
from nbkit.train.loss import class_weights
from tests.loop_helpers import VOCAB, cls_collate, cls_data, tiny_classifier


def imbalanced(n_major=30, n_minor=6, length=12):
    g = torch.Generator().manual_seed(1)
    return [{"input_ids": torch.randint(5, VOCAB, (length,), generator=g), "label": int(i < n_minor)}
            for i in range(n_major + n_minor)]


def test_balanced_weights_are_inverse_frequency_with_mean_one():
    data = imbalanced(30, 6)
    w = class_weights("balanced", data, 2)                  # n / (K n_c): 36/60, 36/12
    assert w.tolist() == pytest.approx([0.6, 3.0])
    assert (30 * w[0] + 6 * w[1]) / 36 == pytest.approx(1.0)   # mean weight over training examples
    assert class_weights(None, data, 2) is None
    with pytest.raises(ConfigError, match="3 entries but the model has 2 labels"):
        class_weights([1, 2, 3], data, 2)
    with pytest.raises(ConfigError, match="'balanced'"):
        class_weights("inverse", data, 2)


def test_weighted_loss_with_accumulation_equals_one_weighted_batch():
    """Weighted sum / sum of target weights over the whole window == CrossEntropyLoss(weight) on one
    batch of both micro-batches: same loss, same gradient (micro-batches with different class mixes)."""
    data = imbalanced(10, 6)                                   # the first 6 are the minority class
    nodrop = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    loop = Loop(tiny_classifier(seed=0, **nodrop),
                TrainConfig(max_steps=1, batch_size=8, grad_accum_steps=2, class_weights="balanced",
                            max_grad_norm=None, progress=False), data, collate_fn=cls_collate, device="cpu")
    grads = {}
    loop.optimizer.step = lambda *a, **k: grads.update(g=loop.model.classifier.weight.grad.clone())
    out = loop.train_step([cls_collate(data[0:8]), cls_collate(data[8:16])])

    ref_model = tiny_classifier(seed=0, **nodrop)
    full = cls_collate(data[:16])
    w = class_weights("balanced", data, 2)
    logits = ref_model(input_ids=full["input_ids"], attention_mask=full["attention_mask"]).logits
    ref = F.cross_entropy(logits, full["labels"], weight=w)     # torch's weighted mean
    ref.backward()
    assert out["loss_sum"] / out["n_label"] == pytest.approx(ref.item(), rel=1e-5)
    assert torch.allclose(grads["g"], ref_model.classifier.weight.grad, rtol=1e-4, atol=1e-7)


def test_evaluation_logs_macro_f1_beside_accuracy():
    data = imbalanced(30, 6)
    loop = Loop(tiny_classifier(seed=0), TrainConfig(max_steps=1, batch_size=8, progress=False), data, data,
                collate_fn=cls_collate, device="cpu")
    m = loop.evaluate()
    assert 0.0 <= m["eval_macro_f1"] <= 1.0 and "eval_accuracy" in m
    cm = torch.tensor([[4.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 0.0]])   # class 2: no example, no prediction
    assert macro_f1(cm) == 1.0
    assert macro_f1(torch.tensor([[30.0, 0.0], [6.0, 0.0]])) == pytest.approx((60 / 66) / 2)  # minority never hit


def test_sequences_longer_than_the_position_table_fail_before_the_first_step():
    data = cls_data(n=8, length=100)                        # tiny_config: max_position_embeddings=64
    loop = Loop(tiny_classifier(), TrainConfig(max_steps=1, batch_size=4, progress=False), data,
                collate_fn=cls_collate, device="cpu")
    with pytest.raises(ConfigError, match=r"up to 100 tokens.*max_position_embeddings is 64"):
        loop.fit()
    assert loop.state.step == 0
    too_long_eval = Loop(tiny_classifier(), TrainConfig(max_steps=1, batch_size=4, progress=False),
                         cls_data(n=8), cls_data(n=8, length=100), collate_fn=cls_collate, device="cpu")
    with pytest.raises(ConfigError, match="eval_data has sequences of up to 100 tokens"):
        too_long_eval.evaluate()                            # before fit(), as notebook 02 does
    padded = Loop(tiny_classifier(), TrainConfig(max_steps=1, batch_size=4, progress=False, pad_to_multiple_of=48),
                  cls_data(n=8, length=50), collate_fn=cls_collate, device="cpu")
    with pytest.raises(ConfigError, match="padded to a multiple of 48: 96"):
        padded.fit()


def test_models_built_with_the_same_seed_train_to_the_same_losses():
    from nbkit.models.bert import build_classifier, build_mlm_model
    from tests._corpus import char_tokenizer

    tok = char_tokenizer()
    a, b = (build_mlm_model("tiny", tok, 32, seed=3) for _ in range(2))
    assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))
    torch.manual_seed(123)                                  # the global RNG does not matter, nor moves
    state = torch.random.get_rng_state()
    c, _ = build_classifier(None, 2, {0: "n", 1: "p"}, tokenizer=tok, preset="tiny", seed=3)
    assert torch.equal(state, torch.random.get_rng_state())
    torch.manual_seed(7)
    d, _ = build_classifier(None, 2, {0: "n", 1: "p"}, tokenizer=tok, preset="tiny", seed=3)
    assert all(torch.equal(p, q) for p, q in zip(c.state_dict().values(), d.state_dict().values()))
    e, _ = build_classifier(None, 2, {0: "n", 1: "p"}, tokenizer=tok, preset="tiny", seed=4)
    assert not torch.equal(c.classifier.weight, e.classifier.weight)

    data = [{"input_ids": x["input_ids"] % len(tok), "label": x["label"]} for x in cls_data(n=16)]
    losses = []
    for _ in range(2):
        model, _ = build_classifier(None, 2, {0: "n", 1: "p"}, tokenizer=tok, preset="tiny", seed=0)
        result = Loop(model, TrainConfig(max_steps=3, batch_size=4, log_every=1, progress=False), data,
                      collate_fn=cls_collate, device="cpu").fit()
        losses.append([h["loss"] for h in result.history if "loss" in h])
    assert losses[0] == losses[1]
