import math
import re

import pytest
import torch
from loop_helpers import cls_collate, cls_data, mlm_collate, tiny_classifier, tiny_mlm, token_data

from nbkit.errors import ConfigError, DataError, NonFiniteLossError
from nbkit.train import Loop, TrainConfig
from nbkit.train.optim import param_groups


def _cfg(**kw):
    base = dict(max_steps=4, batch_size=4, log_every=1, progress=False, precision="fp32")
    base.update(kw)
    return TrainConfig(**base)


def _grads_of_one_step(model, window):
    """Run Loop.train_step on `window` and return the gradients the optimizer saw."""
    loop = Loop(model, _cfg(max_grad_norm=None), token_data(8))
    seen = {}

    def capture(opt, args, kwargs):
        seen["grads"] = [p.grad.clone() for p in loop.model.parameters() if p.grad is not None]
    loop.optimizer.register_step_pre_hook(capture)
    loop.model.train()
    out = loop.train_step(window)
    return seen["grads"], out


def _micro(ids, n_labels):
    labels = torch.full_like(ids, -100)
    flat = labels.view(-1)
    flat[:n_labels] = ids.view(-1)[:n_labels]
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


def test_accumulation_matches_one_big_batch_with_uneven_label_counts():
    torch.manual_seed(1)
    ids = [torch.randint(5, 60, (2, 16)) for _ in range(3)]
    micro = [_micro(x, n) for x, n in zip(ids, (2, 11, 30))]   # very different label counts
    big = {k: torch.cat([m[k] for m in micro]) for k in micro[0]}
    kw = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    g_acc, out_acc = _grads_of_one_step(tiny_mlm(**kw), micro)
    g_big, out_big = _grads_of_one_step(tiny_mlm(**kw), [big])
    for a, b in zip(g_acc, g_big):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert out_acc["n_label"] == out_big["n_label"] == 43
    assert out_acc["loss_sum"] / out_acc["n_label"] == pytest.approx(out_big["loss_sum"] / out_big["n_label"], rel=1e-5)
    # the common mistake (mean per micro-batch / k) gives a different gradient: the test can fail
    model = tiny_mlm(**kw)
    for m in micro:
        logits = model(input_ids=m["input_ids"]).logits
        (torch.nn.functional.cross_entropy(logits.view(-1, 60), m["labels"].view(-1)) / 3).backward()
    naive = [p.grad for p in model.parameters() if p.grad is not None]
    assert max((a - b).abs().max().item() for a, b in zip(naive, g_big)) > 1e-3


def test_fit_mlm_logs_every_step_and_schedule_warms_up_then_decays():
    res = Loop(tiny_mlm(), _cfg(max_steps=8, warmup_ratio=0.25, lr=1e-3), token_data(),
               eval_data=token_data(8, seed=1), collate_fn=mlm_collate).fit()
    logs = [h for h in res.history if "loss" in h]
    assert [h["step"] for h in logs] == list(range(1, 9))
    lrs = [h["lr"] for h in logs]
    # transformers' linear warmup: lr(step s) = lr * s / warmup for s < warmup (step 1 uses s = 0)
    assert lrs[:3] == pytest.approx([0.0, 5e-4, 1e-3])
    assert all(a > b for a, b in zip(lrs[2:], lrs[3:]))                       # linear decay
    assert all(h["tokens_per_s"] > 0 and h["samples_per_s"] > 0 and h["mfu"] is None for h in logs)
    assert res.metrics["eval_perplexity"] == pytest.approx(math.exp(res.metrics["eval_loss"]))
    assert res.metrics["train_tokens"] == 8 * 4 * 16 and res.metrics["skipped_steps"] == 0
    # elapsed_s is time since fit() began (a time axis for telemetry), window_s the log window's share
    elapsed = [h["elapsed_s"] for h in logs]
    assert all(b >= a for a, b in zip(elapsed, elapsed[1:]))
    assert sum(h["window_s"] for h in logs) <= elapsed[-1] + 1e-6


def test_classification_eval_reports_accuracy():
    loop = Loop(tiny_classifier(), _cfg(max_steps=3), cls_data(), eval_data=cls_data(16, seed=2),
                collate_fn=cls_collate)
    res = loop.fit()
    assert 0.0 <= res.metrics["eval_accuracy"] <= 1.0
    assert res.metrics["eval_examples"] == res.metrics["eval_tokens"] == 16
    assert "eval_perplexity" not in res.metrics


def test_evaluate_leaves_training_rng_untouched_and_is_repeatable():
    loop = Loop(tiny_mlm(), _cfg(), token_data(), eval_data=token_data(8, seed=1), collate_fn=mlm_collate)
    loop.setup()                         # seeds the training RNG (fit() and evaluate() call it on first use)
    before = torch.get_rng_state()
    first = loop.evaluate()
    assert torch.equal(before, torch.get_rng_state())
    assert loop.evaluate() == first


def test_building_a_loop_changes_nothing_outside_it_and_setup_does_it_once(monkeypatch):
    """Loop() leaves the global RNG, the model's device and the process alone; setup() (first fit/evaluate)
    seeds, moves and starts the launcher watch, once."""
    import nbkit.train.loop as loop_module

    watched = []
    monkeypatch.setattr(loop_module, "watch_launcher", lambda: watched.append(1))
    model = tiny_mlm()
    torch.manual_seed(5)
    rng = torch.get_rng_state()
    loop = Loop(model, _cfg(seed=3), token_data(), collate_fn=mlm_collate, device="meta")
    assert torch.equal(torch.get_rng_state(), rng), "building a Loop reseeded the global RNG"
    assert next(model.parameters()).device.type == "cpu" and not watched
    loop.setup()
    seeded = torch.get_rng_state()
    loop.setup()
    assert next(model.parameters()).device.type == "meta" and watched == [1]
    torch.manual_seed(3)
    assert torch.equal(seeded, torch.get_rng_state()), "setup() seeds from config.seed"


def test_no_weight_decay_on_bias_and_layernorm():
    model = tiny_mlm()
    decay, no_decay = param_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(n.endswith("bias") or "LayerNorm" in n for n in map(names.get, map(id, no_decay["params"])))
    assert all(not n.endswith("bias") and "LayerNorm" not in n for n in map(names.get, map(id, decay["params"])))
    assert no_decay["weight_decay"] == 0.0 and decay["weight_decay"] == 0.01


class _NaNGrad(torch.autograd.Function):
    """Identity forward (the loss stays finite); NaN gradient backward: a fp16 overflow in the backward pass."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")


class NaNAt(torch.nn.Module):
    """Wraps a model; forward calls whose index is in `bad` return NaN logits (``grads=True``: finite logits
    whose gradients are NaN)."""

    def __init__(self, model, bad, grads: bool = False):
        super().__init__()
        self.inner, self.bad, self.calls, self.grads = model, set(bad), 0, grads

    def save_pretrained(self, *args, **kwargs):   # checkpoints save the wrapped model
        return self.inner.save_pretrained(*args, **kwargs)

    def forward(self, **batch):
        out = self.inner(**batch)
        self.calls += 1
        if self.calls in self.bad or "all" in self.bad:
            out.logits = _NaNGrad.apply(out.logits) if self.grads else out.logits * float("nan")
        return out


def test_nonfinite_gradient_steps_are_skipped_counted_and_leave_weights_unchanged():
    model = NaNAt(tiny_mlm(), bad={3}, grads=True)  # 3rd forward = step 3 with grad_accum 1
    snapshots = []

    class Snap:
        def on_step_end(self, loop):
            snapshots.append(loop.model.inner.bert.embeddings.word_embeddings.weight.detach().clone())
    res = Loop(model, _cfg(max_steps=5), token_data(), collate_fn=mlm_collate, callbacks=[Snap()]).fit()
    assert res.metrics["skipped_steps"] == 1
    assert torch.equal(snapshots[1], snapshots[2])          # step 3 did not update
    assert not torch.equal(snapshots[2], snapshots[3])      # step 4 did
    assert math.isnan(res.history[2]["loss"]) and math.isfinite(res.history[3]["loss"])


def test_consecutive_nonfinite_gradients_abort_with_advice():
    loop = Loop(NaNAt(tiny_mlm(), bad={"all"}, grads=True), _cfg(max_steps=10), token_data(), collate_fn=mlm_collate)
    with pytest.raises(NonFiniteLossError, match="Lower lr"):
        loop.fit()
    assert loop.state.step == 5 and loop.state.skipped_steps == 5   # MAX_CONSECUTIVE_NONFINITE


def test_a_nonfinite_loss_stops_the_run_naming_the_step_and_saves_nothing(tmp_path):
    """Issue 39.1: a NaN loss used to be skipped, and a run whose weights were NaN "finished" and saved them."""
    out = tmp_path / "run"
    loop = Loop(NaNAt(tiny_mlm(), bad={3}), _cfg(max_steps=5, output_dir=out, checkpoint_every=1), token_data(),
                collate_fn=mlm_collate)
    with pytest.raises(NonFiniteLossError, match=r"loss is nan at step 3 of 5, so the run stops") as err:
        loop.fit()
    assert "the weights are finite" in str(err.value) and "step-000002" in str(err.value)   # the last checkpoint
    assert loop.state.step == 3 and sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-000001",
                                                                                                 "step-000002"]
    # weights gone NaN in an update (fp16 parameters under AdamW): the next loss is NaN, the message says why
    model = tiny_mlm().half()
    loop = Loop(model, _cfg(max_steps=5, output_dir=tmp_path / "fp16"), token_data(), collate_fn=mlm_collate)

    class Poison:
        def on_step_end(self, loop):
            if loop.state.step == 1:
                with torch.no_grad():
                    loop.model.bert.embeddings.word_embeddings.weight.fill_(float("nan"))
    loop.callbacks.append(Poison())
    with pytest.raises(NonFiniteLossError, match=r"at step 2 of 5.*weights already hold NaN.*parameters are float16"):
        loop.fit()
    assert not (tmp_path / "fp16" / "checkpoints").exists()


def test_no_save_path_writes_nonfinite_weights(tmp_path):
    from loop_helpers import tiny_classifier as clf

    from nbkit.errors import NonFiniteWeightsError
    from nbkit.models.bert import nonfinite_weights
    from nbkit.models.export import export_classifier
    from nbkit.train import checkpoint

    model = tiny_mlm()
    assert nonfinite_weights(model) == []
    with torch.no_grad():
        model.bert.encoder.layer[1].output.dense.bias[3] = float("inf")
    assert nonfinite_weights(model) == ["bert.encoder.layer.1.output.dense.bias"]
    with pytest.raises(NonFiniteWeightsError, match=r"not saving the checkpoint at step 1: 1 weight tensors .*"
                                                    r"layer\.1\.output\.dense\.bias"):
        checkpoint.save_checkpoint(tmp_path / "ck", 1, model, {"step": 1})
    assert not list((tmp_path / "ck").rglob("*.safetensors"))
    loop = Loop(model, _cfg(output_dir=tmp_path / "loop"), token_data(), collate_fn=mlm_collate)
    with pytest.raises(NonFiniteWeightsError):
        loop.save()
    c = clf()
    with torch.no_grad():
        c.classifier.weight[0, 0] = float("nan")
    from transformers import BertTokenizerFast

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"{t}\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghij"]))
    with pytest.raises(NonFiniteWeightsError, match="not saving the export"):
        export_classifier(c, BertTokenizerFast(vocab_file=str(vocab)), tmp_path / "export", {0: "a", 1: "b"},
                          max_length=16)
    assert not (tmp_path / "export").exists()


def test_bad_config_and_data_errors_name_the_fix():
    with pytest.raises(ConfigError, match="output_dir"):
        TrainConfig(max_steps=2, batch_size=2, checkpoint_every=1)
    with pytest.raises(ConfigError, match="grad_accum_steps"):
        TrainConfig(max_steps=2, batch_size=2, grad_accum_steps=0)
    loop = Loop(tiny_mlm(), _cfg(batch_size=8, compile="eager"), token_data(4), collate_fn=mlm_collate)
    with pytest.raises(DataError, match="batch_size"):
        loop.fit()


def test_compile_pads_to_static_shapes_without_recompiling():
    import random

    def ragged(examples):  # a different sequence length every batch
        n = random.randint(8, 16)
        return mlm_collate([{"input_ids": e["input_ids"][:n]} for e in examples])
    loop = Loop(tiny_mlm(), _cfg(max_steps=4, compile="eager", pad_to_multiple_of=16), token_data(),
                collate_fn=ragged)
    res = loop.fit()
    assert res.metrics["recompilations"] == 0


def test_grad_scaler_path_skips_overflow_and_backs_off(tmp_path):
    """The fp16 code path (unscale, clip, scaler.step/update) on CPU: bf16 autocast + a CPU GradScaler."""
    from nbkit.train.precision import Precision

    loop = Loop(NaNAt(tiny_mlm(), bad={2}, grads=True), _cfg(max_steps=4), token_data(), collate_fn=mlm_collate)
    loop.precision = Precision("bf16", "cpu", use_scaler=True, reason="test: scaler on CPU")
    loop.scaler = loop.precision.make_scaler()
    scales = []

    class Scale:
        def on_step_end(self, loop):
            scales.append(loop.scaler.get_scale())
    loop.callbacks.append(Scale())
    res = loop.fit()
    assert res.metrics["skipped_steps"] == 1
    assert scales[1] == scales[0] / 2          # the overflowing step halved the loss scale
    assert all(math.isfinite(h["loss"]) for h in res.history)   # the loss itself stayed finite


@pytest.mark.gpu
def test_cuda_run_uses_auto_precision_and_reports_mfu_when_peak_known():
    from nbkit.models.flops import peak_tflops
    from nbkit.train.precision import matmul_precision_name

    loop = Loop(tiny_mlm(), _cfg(max_steps=3, precision="auto"), token_data(), collate_fn=mlm_collate, device="cuda")
    expected = "bf16" if torch.cuda.get_device_capability() >= (8, 0) else "fp16"
    assert loop.precision.name == expected and (loop.scaler is not None) == (expected == "fp16")
    res = loop.fit()
    assert all(math.isfinite(h["loss"]) for h in res.history)
    known = peak_tflops(torch.cuda.get_device_name(), matmul_precision_name(loop.precision)) is not None
    assert (res.metrics["mfu"] is not None) == known
    assert res.metrics["mfu"] is None or 0 < res.metrics["mfu"] < 1


# ----- mistakes caught before any work (nbkit.train.preflight) --------------------------------------

def test_empty_eval_data_is_rejected_at_construction_and_zero_labels_never_score_perfectly():
    with pytest.raises(DataError, match="eval_data is empty.*eval_data=None"):
        Loop(tiny_mlm(), _cfg(eval_every=1), token_data(), eval_data=[], collate_fn=mlm_collate)

    def no_labels(examples):  # every eval label ignored: nothing to score
        b = mlm_collate(examples)
        return {**b, "labels": torch.full_like(b["labels"], -100)}
    loop = Loop(tiny_mlm(), _cfg(), token_data(), eval_data=token_data(8, seed=1), collate_fn=no_labels)
    with pytest.warns(UserWarning, match="0 labels"):
        m = loop.evaluate()
    assert m["eval_tokens"] == 0 and math.isnan(m["eval_loss"]) and math.isnan(m["eval_perplexity"])
    loop.eval_data = []   # emptied after construction: an error, not loss 0 / perplexity 1
    with pytest.raises(DataError, match="no batch"):
        loop.evaluate()


def test_batches_without_labels_fail_before_the_first_step():
    loop = Loop(tiny_mlm(), _cfg(), token_data())        # no collate_fn: batches have input_ids only
    with pytest.raises(DataError, match=r"no 'labels'.*-100.*MLMCollator\(tokenizer\)"):
        loop.fit()
    assert loop.state.step == 0
    before = torch.get_rng_state()
    loop = Loop(tiny_mlm(), _cfg(), token_data(), eval_data=token_data(4), collate_fn=mlm_collate)
    loop.collate_fn = lambda ex: {"input_ids": mlm_collate(ex)["input_ids"]}
    with pytest.raises(DataError, match="batches of train_data have no 'labels'"):
        loop.fit()
    assert torch.equal(before, torch.get_rng_state())     # the check collates under isolated_rng


def test_cuda_device_without_cuda_is_a_config_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"device='cuda'.*device='cpu'.*nbkit doctor"):
        Loop(tiny_mlm(), _cfg(), token_data(), collate_fn=mlm_collate, device="cuda")


def test_unusable_output_dir_fails_at_construction(tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("x")
    for bad in (tmp_path / "afile", tmp_path / "afile" / "run"):
        with pytest.raises(ConfigError, match="afile is a file"):
            Loop(tiny_mlm(), _cfg(output_dir=bad), token_data(), collate_fn=mlm_collate)
    import nbkit.train.preflight as lc
    monkeypatch.setattr(lc.os, "access", lambda path, mode: False)   # tests run as root: fake a read-only dir
    with pytest.raises(ConfigError, match="not writable.*Choose a directory"):
        Loop(tiny_mlm(), _cfg(output_dir=tmp_path / "new" / "run"), token_data(), collate_fn=mlm_collate)


def test_a_non_finite_loss_names_the_batchs_examples_and_skip_examples_gets_a_resume_past_them(tmp_path):
    """One example gives a NaN loss (here: its token 3's embedding output is NaN, the weights stay finite). The stop
    names its index in the dataset and the setting that leaves it out; a resume with it trains to the end and
    metrics count what was left out. Before, every resume stopped at the same step, naming no example."""
    bad = 5
    data = token_data(24)
    data[bad] = {"input_ids": torch.full_like(data[bad]["input_ids"], 3)}        # 3: never drawn by token_data

    def fit(**kw):
        model = tiny_mlm()
        model.bert.embeddings.word_embeddings.register_forward_hook(
            lambda mod, inp, out: out.masked_fill((inp[0] == 3).unsqueeze(-1), float("nan")))
        cfg = TrainConfig(max_steps=8, batch_size=4, checkpoint_every=1, output_dir=tmp_path, progress=False,
                          progress_every_s=None, precision="fp32", **kw)
        return Loop(model, cfg, data, collate_fn=mlm_collate, device="cpu").fit()

    with pytest.raises(NonFiniteLossError) as err:
        fit()
    msg = str(err.value)
    assert "held these examples of train_data (index in the dataset): " in msg and f" {bad}" in msg, msg
    assert "TrainConfig(skip_examples=[" in msg and "as skipped_examples" in msg
    named = [int(i) for i in re.search(r"index in the dataset\): ([\d, ]+)\.", msg).group(1).split(", ")]
    assert bad in named and len(named) == 4                                        # the whole batch of 4
    with pytest.raises(NonFiniteLossError):
        fit()                                                                      # the resume stops there again
    result = fit(skip_examples=[bad])
    assert result.metrics["steps"] == 8 and result.metrics["skip_examples"] == [bad]
    assert result.metrics["skipped_examples"] >= 1                                 # left out at least once
