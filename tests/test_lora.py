"""LoRA through peft (nbkit.models.lora): which layers are adapted per architecture, what trains, the errors,
both exports (merged weights, adapter folder) and a peft model in nbkit's Loop (checkpoint, exact resume)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from loop_helpers import VOCAB, cls_collate, cls_data, tiny_classifier, tiny_config  # noqa: E402

torch.set_num_threads(1)


def tiny_tagger(seed: int = 0, num_labels: int = 5):
    from transformers import BertForTokenClassification

    torch.manual_seed(seed)
    return BertForTokenClassification(tiny_config(num_labels=num_labels))


def tiny_causal(preset: str = "gpt2-tiny", seed: int = 0, vocab_size: int = VOCAB):
    from transformers import GPT2LMHeadModel, LlamaForCausalLM

    from nbkit.models.causal import build_causal_config

    torch.manual_seed(seed)
    config = build_causal_config(preset, vocab_size, block_size=32, dropout=0.0)
    return (GPT2LMHeadModel if preset.startswith("gpt2") else LlamaForCausalLM)(config)


def batch(n: int = 4, length: int = 12, seed: int = 1) -> dict:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (n, length), generator=g)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def logits(model, inputs: dict) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(**inputs).logits


def adapted(model) -> set[str]:
    """Dotted names of the layers peft wrapped with LoRA (relative to the transformers model)."""
    from peft.tuners.lora import LoraLayer

    return {n.removeprefix("base_model.model.") for n, m in model.named_modules() if isinstance(m, LoraLayer)}


def perturb_adapters(model, seed: int = 3) -> None:
    """Give every LoRA B a random value (B starts at 0: the adapters would change nothing to compare)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name or "modules_to_save" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)


# ----- which layers, what trains -------------------------------------------------------------------------------
def test_bert_classifier_adapts_every_attention_projection_and_trains_its_head():
    from nbkit.models.lora import apply_lora, trainable_parameters

    model = tiny_classifier()
    before = logits(model, batch())
    full = trainable_parameters(model)
    peft_model = apply_lora(model, r=4, alpha=8)
    assert type(peft_model).__name__ == "PeftModelForSequenceClassification"
    assert peft_model.peft_config["default"].task_type == "SEQ_CLS"
    names = adapted(peft_model)
    assert names == {f"bert.encoder.layer.{i}.attention.{m}" for i in range(2)
                     for m in ("self.query", "self.key", "self.value", "output.dense")}
    torch.testing.assert_close(logits(peft_model, batch()), before, rtol=0, atol=0)   # B = 0: the same outputs
    trainable = {n for n, p in peft_model.named_parameters() if p.requires_grad}
    assert {n for n in trainable if "lora_" not in n} == {
        "base_model.model.classifier.modules_to_save.default.weight",
        "base_model.model.classifier.modules_to_save.default.bias"}
    h, c = 32, 2
    counts = trainable_parameters(peft_model)
    assert counts["trainable"] == 2 * 4 * 4 * (h + h) + (h * c + c)   # layers x projections x r (d_in + d_out) + head
    assert counts["total"] == full["total"] + counts["trainable"]       # base + adapters + the head's copy
    assert full["trainable"] == full["total"] and 0 < counts["share"] < 0.1


def test_token_classifier_keeps_its_per_token_head_trainable():
    from nbkit.models.lora import apply_lora

    peft_model = apply_lora(tiny_tagger(), r=2)
    assert peft_model.peft_config["default"].task_type == "TOKEN_CLS"
    head = peft_model.base_model.model.classifier.modules_to_save["default"]
    assert all(p.requires_grad for p in head.parameters())
    assert logits(peft_model, batch()).shape == (4, 12, 5)


def test_gpt2_adapts_its_attention_conv1d_layers_not_the_mlp():
    from nbkit.models.lora import apply_lora

    model = tiny_causal("gpt2-tiny")
    before = logits(model, batch())
    peft_model = apply_lora(model)
    assert peft_model.peft_config["default"].task_type == "CAUSAL_LM"
    assert peft_model.peft_config["default"].fan_in_fan_out is True      # Conv1D stores W as (in, out)
    assert adapted(peft_model) == {f"transformer.h.{i}.attn.{m}" for i in range(2) for m in ("c_attn", "c_proj")}
    torch.testing.assert_close(logits(peft_model, batch()), before, rtol=0, atol=0)
    perturb_adapters(peft_model)
    assert not torch.allclose(logits(peft_model, batch()), before)     # the adapters act on the (in, out) weights


def test_llama_adapts_q_k_v_o():
    from nbkit.models.lora import apply_lora

    peft_model = apply_lora(tiny_causal("llama-tiny"))
    assert adapted(peft_model) == {f"model.layers.{i}.self_attn.{m}" for i in range(2)
                                   for m in ("q_proj", "k_proj", "v_proj", "o_proj")}
    assert peft_model.peft_config["default"].fan_in_fan_out is False


def test_named_targets_and_the_seed_fix_the_adapters():
    from nbkit.models.lora import apply_lora

    a = apply_lora(tiny_classifier(), target_modules=["query", "value"], seed=5)
    b = apply_lora(tiny_classifier(), target_modules=("query", "value"), seed=5)
    c = apply_lora(tiny_classifier(), target_modules=["query", "value"], seed=6)
    assert adapted(a) == {f"bert.encoder.layer.{i}.attention.self.{m}" for i in range(2) for m in ("query", "value")}
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    key = "base_model.model.bert.encoder.layer.0.attention.self.query.lora_A.default.weight"
    assert torch.equal(sa[key], sb[key]) and not torch.equal(sa[key], sc[key])


# ----- errors ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, words", [
    ({"r": 0}, "positive integer"), ({"r": -2}, "positive integer"), ({"r": 2.5}, "positive integer"),
    ({"alpha": 0}, "alpha=0"), ({"dropout": 1.0}, "[0, 1)"),
])
def test_bad_settings_are_named(kwargs, words):
    from nbkit.errors import ConfigError
    from nbkit.models.lora import apply_lora

    with pytest.raises(ConfigError, match=None) as err:
        apply_lora(tiny_classifier(), **kwargs)
    assert words in str(err.value)


def test_an_unknown_target_names_the_models_linear_layers():
    from nbkit.errors import ConfigError
    from nbkit.models.lora import apply_lora

    with pytest.raises(ConfigError) as err:
        apply_lora(tiny_classifier(), target_modules=["query", "qurey"])
    msg = str(err.value)
    assert "['qurey']" in msg and "classifier, dense, key, query, value" in msg


def test_a_model_type_without_defaults_asks_for_targets():
    from transformers import RobertaConfig, RobertaForSequenceClassification

    from nbkit.errors import ConfigError
    from nbkit.models.lora import apply_lora

    model = RobertaForSequenceClassification(RobertaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1,
                                                           num_attention_heads=2, intermediate_size=64))
    with pytest.raises(ConfigError) as err:
        apply_lora(model)
    assert "'roberta'" in str(err.value) and "target_modules=" in str(err.value) and "query" in str(err.value)
    assert adapted(apply_lora(model, target_modules=["query", "value"]))   # named targets work for it


def test_a_masked_lm_or_an_adapted_model_is_refused():
    from transformers import BertForMaskedLM

    from nbkit.errors import ConfigError
    from nbkit.models.lora import apply_lora, export_adapter

    with pytest.raises(ConfigError, match="sequence classifier, a token classifier or a causal LM"):
        apply_lora(BertForMaskedLM(tiny_config()))
    wrapped = apply_lora(tiny_classifier())
    with pytest.raises(ConfigError, match="already holds peft adapters"):
        apply_lora(wrapped)
    with pytest.raises(ConfigError, match="returned by apply_lora"):
        export_adapter(tiny_classifier(), "unused")
    with pytest.raises(ConfigError, match="inside a peft model"):            # Loop.model of a LoRA run
        export_adapter(wrapped.get_base_model(), "unused")


# ----- exports ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from nbkit import data, text

    labeled = data.load_labeled_files(ROOT / "notebooks" / "data" / "sample_reviews.csv", text_column="review",
                                      label_column="label")
    return text.train_wordpiece(labeled.splits["train"]["text"], vocab_size=300,
                                out_dir=tmp_path_factory.mktemp("tok"), model_max_length=64)


def _classifier(tokenizer, seed: int = 0):
    return tiny_classifier(seed, vocab_size=len(tokenizer), id2label={0: "负面", 1: "正面"},
                           label2id={"负面": 0, "正面": 1})


def _tagger(tokenizer, seed: int = 0):
    from transformers import BertForTokenClassification

    torch.manual_seed(seed)
    labels = ["O", "B-PER", "I-PER"]
    return BertForTokenClassification(tiny_config(vocab_size=len(tokenizer), num_labels=3,
                                                  id2label=dict(enumerate(labels)),
                                                  label2id={v: i for i, v in enumerate(labels)}))


@pytest.mark.parametrize("build, auto", [(_classifier, "AutoModelForSequenceClassification"),
                                         (_tagger, "AutoModelForTokenClassification"),
                                         (lambda tok: tiny_causal("gpt2-tiny", vocab_size=len(tok)),
                                          "AutoModelForCausalLM")])
def test_merged_export_is_a_plain_folder_with_the_peft_models_outputs(tokenizer, tmp_path, build, auto):
    import transformers

    from nbkit.models.lora import apply_lora, export_merged

    peft_model = apply_lora(build(tokenizer), r=4)
    perturb_adapters(peft_model)
    inputs = tokenizer(["这家店的菜很好吃", "服务太慢了"], padding=True, return_tensors="pt")
    inputs.pop("token_type_ids", None)
    want = logits(peft_model, dict(inputs))
    out = export_merged(peft_model, tokenizer, tmp_path / "merged")
    assert not (out / "adapter_config.json").exists() and (out / "config.json").is_file()
    plain = getattr(transformers, auto).from_pretrained(out)
    assert not any("lora" in n for n, _ in plain.named_parameters())
    torch.testing.assert_close(logits(plain, dict(inputs)), want, rtol=1e-5, atol=1e-5)
    assert adapted(peft_model)                                          # the caller's model keeps its adapters
    assert not list(tmp_path.glob("merged.tmp-*"))


def test_adapter_export_reloads_onto_the_same_base_with_identical_logits(tokenizer, tmp_path):
    from peft import PeftModel

    from nbkit.models.lora import apply_lora, export_adapter

    peft_model = apply_lora(_classifier(tokenizer), r=4)
    perturb_adapters(peft_model)
    inputs = batch()
    want = logits(peft_model, inputs)
    out = export_adapter(peft_model, tmp_path / "adapter", tokenizer=tokenizer)
    assert {"adapter_config.json", "adapter_model.safetensors", "tokenizer.json"} <= {p.name for p in out.iterdir()}
    assert not (out / "model.safetensors").exists()                     # the adapters only, not the base weights
    reloaded = PeftModel.from_pretrained(_classifier(tokenizer), out)
    assert torch.equal(logits(reloaded, inputs), want)
    assert not torch.equal(logits(_classifier(tokenizer), inputs), want)   # the base alone differs


def test_an_export_into_a_file_is_refused(tmp_path):
    from nbkit.errors import ConfigError
    from nbkit.models.lora import apply_lora, export_adapter

    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="existing file"):
        export_adapter(apply_lora(tiny_classifier()), tmp_path / "f")


# ----- nbkit's Loop ----------------------------------------------------------------------------------------------
def _train_config(out, **kw):
    from nbkit.train import TrainConfig

    base = dict(max_steps=4, batch_size=8, lr=1e-2, output_dir=out, checkpoint_every=2, keep_last=0,
                progress=False, progress_every_s=None, log_every=2, checkpoint_minutes=None)
    return TrainConfig(**{**base, **kw})


def test_a_peft_classifier_trains_checkpoints_and_resumes_exactly_in_the_loop(tmp_path):
    from nbkit.models.lora import apply_lora
    from nbkit.train import Loop

    model = apply_lora(tiny_classifier(), r=4, seed=0)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    start = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    loop = Loop(model, _train_config(tmp_path / "a"), cls_data(), collate_fn=cls_collate, device="cpu")
    loop.fit()
    done = {k: v.clone() for k, v in model.state_dict().items()}
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)   # base untouched
    assert all(not torch.equal(p, start[n]) for n, p in model.named_parameters() if n in start)  # A, B, head moved
    step4 = tmp_path / "a" / "checkpoints" / "step-000004"
    assert (step4 / "model" / "config.json").is_file()                 # a complete checkpoint, found on resume
    shutil.rmtree(step4)                                               # resume from step 2 instead

    other = apply_lora(tiny_classifier(), r=4, seed=9)                 # other adapters: the checkpoint must win
    again = Loop(other, _train_config(tmp_path / "a"), cls_data(), collate_fn=cls_collate, device="cpu")
    result = again.fit()
    assert result.metrics["steps"] == 4 and again.state.history[0]["step"] == 2
    resumed = other.state_dict()
    assert resumed.keys() == done.keys()
    assert all(torch.equal(resumed[k], done[k]) for k in done)


def test_a_peft_causal_lm_trains_in_the_loop_through_the_fused_loss(tmp_path):
    from nbkit.models.lora import apply_lora
    from nbkit.train import Loop

    model = apply_lora(tiny_causal("gpt2-tiny"), r=4)
    data = [{"input_ids": torch.randint(5, VOCAB, (16,), generator=torch.Generator().manual_seed(i))}
            for i in range(16)]

    def collate(examples):
        ids = torch.stack([e["input_ids"] for e in examples])                          # (B, T)
        return {"input_ids": ids, "labels": torch.cat([ids[:, 1:], torch.full_like(ids[:, :1], -100)], 1)}

    loop = Loop(model, _train_config(None, checkpoint_every=None, max_steps=3), data, collate_fn=collate,
                device="cpu")
    lora_b = model.base_model.model.transformer.h[0].attn.c_attn.lora_B["default"].weight
    assert torch.count_nonzero(lora_b) == 0
    result = loop.fit()
    assert loop._fused_weight is not None and torch.isfinite(torch.tensor(result.metrics["train_loss"]))
    assert torch.count_nonzero(lora_b) > 0


def test_a_peft_token_classifier_is_scored_per_token_in_the_loop():
    from nbkit.models.lora import apply_lora
    from nbkit.train import Loop

    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": torch.randint(5, VOCAB, (10,), generator=g)} for _ in range(16)]

    def collate(examples):
        ids = torch.stack([e["input_ids"] for e in examples])                          # (B, T)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids % 5}

    loop = Loop(apply_lora(tiny_tagger(), r=2), _train_config(None, checkpoint_every=None, max_steps=2), data,
                data[:8], collate_fn=collate, device="cpu")
    loop.fit()
    metrics = loop.evaluate()
    assert metrics["eval_tokens"] == 80 and "eval_macro_f1" in metrics and "eval_perplexity" not in metrics
