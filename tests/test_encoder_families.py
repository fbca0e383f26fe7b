"""Fine-tuning encoders that are not BERT (issue 52, item 15): ELECTRA, ERNIE and ALBERT checkpoints, built from
config at tiny sizes and saved locally with a BERT-vocabulary tokenizer (the layout of hfl/chinese-electra-*,
nghuyong/ernie-3.0-*, the Chinese ALBERTs), load for sentence and token classification with their own heads and
train one step. Nothing is downloaded."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nbkit.errors import ConfigError

SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=64)


def _standin(folder: Path, family: str) -> Path:
    """A published-layout checkpoint of ``family`` with random weights and ``bert-base-chinese``'s vocabulary."""
    import transformers as tf

    from nbkit.models.standin import build_standin

    bert = build_standin(folder.parent / "vocab-source")        # its tokenizer files: the 21,128-token vocabulary
    tok = tf.AutoTokenizer.from_pretrained(str(bert))
    vocab = dict(vocab_size=len(tok), pad_token_id=tok.pad_token_id)
    config, model_cls = {
        "electra": (lambda: tf.ElectraConfig(embedding_size=16, **SIZES, **vocab), tf.ElectraForPreTraining),
        "ernie": (lambda: tf.ErnieConfig(**SIZES, **vocab), tf.ErnieForMaskedLM),
        "albert": (lambda: tf.AlbertConfig(embedding_size=16, **SIZES, **vocab), tf.AlbertForMaskedLM),
    }[family]
    torch.manual_seed(0)
    model_cls(config()).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("family", ["electra", "ernie", "albert"])
@pytest.mark.parametrize("head", ["sequence", "token"])
def test_an_encoder_of_another_family_builds_its_own_head_and_trains_a_step(tmp_path, family, head):
    from transformers import AutoTokenizer

    from nbkit.models.bert import build_classifier

    folder = _standin(tmp_path / family, family)
    tok = AutoTokenizer.from_pretrained(str(folder))
    labels = dict(enumerate(["O", "B-PER", "I-PER"] if head == "token" else ["neg", "pos"]))
    model, how = build_classifier(folder, len(labels), labels, tokenizer=tok, head=head, seed=0)
    assert model.config.model_type == family and type(model).__name__.lower().startswith(family)
    assert type(model).__name__.endswith("ForTokenClassification" if head == "token" else "ForSequenceClassification")
    assert "classifier" in how and "loaded encoder" in how
    enc = tok(["张三在北京", "李四"], padding=True, return_tensors="pt")
    if head == "token":
        target = torch.zeros_like(enc["input_ids"])                                # (B, T)
        target[0, 1] = 1
    else:
        target = torch.tensor([0, 1])                                              # (B,)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    out = model(**enc, labels=target)
    assert out.logits.shape[-1] == len(labels) and torch.isfinite(out.loss)
    out.loss.backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    moved = [k for k, v in model.named_parameters() if not torch.equal(before[k], v)]
    assert any(k.startswith(f"{family}.") for k in moved), "the encoder's own weights train too"
    # the loaded encoder is the saved one (not random): its embeddings equal the file's
    from safetensors.torch import load_file

    saved = load_file(str(folder / "model.safetensors"))
    key = f"{family}.embeddings.word_embeddings.weight"
    assert torch.equal(saved[key], before[key])


def test_the_recipe_fine_tunes_an_electra_encoder_for_ner(tmp_path):
    from _ner_items import fake_ner

    from nbkit.recipes import finetuning as ft

    folder = _standin(tmp_path / "electra", "electra")
    cfg = ft.FinetuneConfig.for_scale("smoke", task="ner", init=str(folder), max_length=16, stride=4, batch_size=8,
                                      max_steps=2, eval_every=0, checkpoint_every=0, progress=False, report_to="none")
    labeled = fake_ner(n_train=16, n_eval=4)
    tok = ft.tokenizer(cfg)
    model, how = ft.model(cfg, tok, labeled)
    assert type(model).__name__ == "ElectraForTokenClassification"
    encoded, _ = ft.encode(cfg, tok, labeled)
    loop, result = ft.train(cfg, model, tok, encoded)
    assert result.metrics["steps"] == 2


def test_mean_pooling_stays_nbkits_for_bert_and_is_refused_for_other_families(tmp_path):
    from transformers import AutoTokenizer

    from nbkit.models.bert import build_classifier
    from nbkit.models.pooling import MeanPoolBertForSequenceClassification
    from nbkit.models.standin import build_standin

    bert = build_standin(tmp_path / "bert", layout="ckiplab")                     # no pooler: mean pooling
    model, how = build_classifier(bert, 2, {0: "a", 1: "b"}, tokenizer=AutoTokenizer.from_pretrained(str(bert)))
    assert isinstance(model, MeanPoolBertForSequenceClassification) and "mean pooling" in how
    folder = _standin(tmp_path / "albert", "albert")
    with pytest.raises(ConfigError, match="pooling='mean' is nbkit's mean-pooling head for BERT encoders.*'albert'"):
        build_classifier(folder, 2, {0: "a", 1: "b"}, pooling="mean")


def test_a_layout_without_such_a_head_is_named(tmp_path):
    from nbkit.models.bert import build_classifier

    folder = tmp_path / "marian"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "marian", "architectures": ["MarianMTModel"]}))
    (folder / "model.safetensors").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"'marian' model, and transformers has no sequence classification head "
                                          r"for the 'marian' layout"):
        build_classifier(folder, 2, {0: "a", 1: "b"})
