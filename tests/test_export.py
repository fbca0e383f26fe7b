"""Notebook 05's glue: pretraining text, exported classifiers and MLM checkpoints in plain transformers."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "notebooks" / "data"


@pytest.fixture(scope="module")
def labeled():
    from nbkit import data

    return data.load_labeled_files(SAMPLE / "sample_reviews.csv", text_column="review", label_column="label")


@pytest.fixture(scope="module")
def tokenizer(labeled, tmp_path_factory):
    from nbkit import text

    return text.train_wordpiece(labeled.splits["train"]["text"], vocab_size=600,
                                out_dir=tmp_path_factory.mktemp("tok"), model_max_length=128)


def strict_json(path: Path) -> dict:
    def refuse(constant):
        raise AssertionError(f"{path} holds {constant}")
    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def test_sample_data_is_small_text_and_loads(labeled):
    sizes = {p.name: p.stat().st_size for p in SAMPLE.iterdir() if p.is_file()}
    assert set(sizes) >= {"sample_reviews.csv", "sample_corpus.txt"}
    assert sum(sizes.values()) < 200_000
    assert labeled.num_labels == 2 and labeled.report["n_train"] >= 300
    assert labeled.report["n_duplicates_dropped"] == labeled.report["n_conflicts_dropped"] == 0


def test_pretraining_corpus_keeps_evaluation_texts_out(labeled):
    import datasets

    from nbkit.errors import DataError
    from nbkit.recipes.pretraining import pretraining_corpus

    test_text = labeled.splits["test"]["text"][0]
    corpus = datasets.Dataset.from_dict({"text": [f"一段没有标签的评论{i}。" for i in range(30)]
                                        + ["一段没有标签的评论0。", test_text, f"  {test_text} "]})
    mix = (("own", 1.0), ("reviews", 1.0))
    splits, mixed = pretraining_corpus(mix, labeled=labeled, texts=corpus, eval_fraction=0.1, words=False)
    lines = list(splits["train"]["text"]) + list(splits["validation"]["text"])
    own, reviews = mixed.report["own"], mixed.report["reviews"]
    assert own["n_in"] == 33 and own["n_excluded"] == 2 and own["n_duplicates"] == 1 and own["n_kept"] == 30
    assert reviews["n_kept"] == len(labeled.splits["train"])
    assert len(lines) == 30 + len(labeled.splits["train"])
    assert test_text not in lines
    assert set(labeled.splits["validation"]["text"]).isdisjoint(lines)

    tiny = SimpleNamespace(splits={"train": {"text": [f"好{i}" for i in range(5)]}, "test": {"text": []}})
    with pytest.raises(DataError, match="only 5 texts"):
        pretraining_corpus(labeled=tiny, words=False)


def test_the_tokenizer_stage_measures_heldout_text(labeled, tmp_path):
    from nbkit.recipes import tokenizer as tk

    tok, stats = tk.train(tk.TokenizerConfig.for_scale("smoke"), labeled.splits["train"]["text"],
                          labeled.splits["validation"]["text"], tmp_path / "tok")
    assert stats["n_texts"] == len(labeled.splits["validation"]) and 0 <= stats["unk_rate"] < 0.1
    assert strict_json(tmp_path / "tok" / "stats.json")["vocab_size"] == len(tok)
    assert tok.model_max_length == 128                # the tiny preset's position limit


def sharp_classifier(tokenizer, id2label, texts, pooling="cls"):
    """A tiny random classifier that splits ``texts`` about half and half, with logits far apart
    (weights x 200, bias at the median margin), so padding noise cannot flip a label."""
    import torch

    from nbkit import models

    torch.manual_seed(0)
    model, _ = models.build_classifier(None, len(id2label), id2label, tokenizer=tokenizer, preset="tiny",
                                       pooling=pooling)
    model.eval()
    with torch.no_grad():
        model.classifier.weight.mul_(200.0)
        enc = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
        logits = model(**enc).logits                                   # (N, 2)
        margin = logits[:, 1] - logits[:, 0]                           # (N,)
        model.classifier.bias[1] -= margin.quantile(0.5)                  # even N: between two texts
    return model


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_exported_classifier_loads_in_transformers_and_agrees_with_predict(labeled, tokenizer, tmp_path, pooling):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers import pipeline as hf_pipeline

    from nbkit import evaluate, models

    texts = list(labeled.splits["test"]["text"])
    model = sharp_classifier(tokenizer, labeled.id2label, texts, pooling)
    out = models.export_classifier(model, tokenizer, tmp_path / "export", labeled.id2label)
    config = strict_json(out / "config.json")
    cls = {"cls": "BertForSequenceClassification", "mean": "MeanPoolBertForSequenceClassification"}[pooling]
    assert config["architectures"] == [cls]
    remote = {"trust_remote_code": True} if pooling == "mean" else {}   # mean pooling ships its code
    assert (out / "pooling.py").is_file() == (pooling == "mean")
    assert config["id2label"] == {str(k): v for k, v in labeled.id2label.items()}
    assert config["label2id"] == labeled.label2id

    ours = [labeled.id2label[i] for i in evaluate.predict(model, tokenizer, texts, max_length=128)["label"]]
    assert len(set(ours)) == 2, "both classes predicted, or the comparison below proves little"

    classify = hf_pipeline("text-classification", model=str(out), device="cpu", **remote)
    assert [r["label"] for r in classify(texts, truncation=True)] == ours

    loaded = AutoModelForSequenceClassification.from_pretrained(out, **remote)
    assert type(loaded).__name__ == cls
    again = evaluate.predict(loaded, AutoTokenizer.from_pretrained(out), texts, max_length=128)["label"]
    assert [loaded.config.id2label[i] for i in again] == ours


def test_export_errors_name_the_fix(labeled, tokenizer, tmp_path):
    from nbkit import models
    from nbkit.errors import ConfigError

    model = sharp_classifier(tokenizer, labeled.id2label, ["好", "差"])
    with pytest.raises(ConfigError, match=r"ids \[0, 1, 2\] but the model has 2 classes"):
        models.export_classifier(model, tokenizer, tmp_path / "x", {0: "a", 1: "b", 2: "c"})
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="is an existing file"):
        models.export_classifier(model, tokenizer, tmp_path / "file")


def _tiny_model(kind: str, vocab_size: int):
    """A two-class or causal model of each export's kind, small enough to build in milliseconds."""
    import torch
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        BertForTokenClassification,
        GPT2Config,
        GPT2LMHeadModel,
    )

    from nbkit.models.pooling import MeanPoolBertConfig, MeanPoolBertForSequenceClassification

    torch.manual_seed(0)
    if kind == "causal":
        return GPT2LMHeadModel(GPT2Config(vocab_size=vocab_size, n_positions=32, n_embd=16, n_layer=1, n_head=2))
    bert = dict(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                intermediate_size=32, max_position_embeddings=32, num_labels=2, id2label={0: "a", 1: "b"})
    return {"classifier": lambda: BertForSequenceClassification(BertConfig(**bert)),
            "mean": lambda: MeanPoolBertForSequenceClassification(MeanPoolBertConfig(**bert)),
            "token": lambda: BertForTokenClassification(BertConfig(**bert))}[kind]()


EXPORTS = {"classifier": "export_classifier", "mean": "export_classifier", "causal": "export_causal_lm",
           "token": "export_token_classifier"}


@pytest.mark.parametrize("kind", list(EXPORTS))
def test_every_export_refuses_nonfinite_weights_and_leaves_no_half_written_folder(tokenizer, tmp_path, kind,
                                                                                    monkeypatch):
    import torch

    from nbkit.errors import NonFiniteWeightsError
    from nbkit.models import export
    from nbkit.text import tokenizer_files

    save = getattr(export, EXPORTS[kind])
    model = _tiny_model(kind, len(tokenizer))
    weight = next(p for n, p in model.named_parameters() if n.endswith("layer.0.output.dense.weight")
                  or n.endswith("h.0.mlp.c_proj.weight"))
    with torch.no_grad():
        weight[0, 0] = float("nan")
    with pytest.raises(NonFiniteWeightsError, match=r"not saving the export to .*nan.*1 weight tensors"):
        save(model, tokenizer, tmp_path / "nan")
    with torch.no_grad():
        weight[0, 0] = 0.0

    def disk_gives_out(*args, **kwargs):                 # the weights are written, the tokenizer is not
        raise RuntimeError("the disk gave out")
    monkeypatch.setattr(tokenizer_files, "save_tokenizer", disk_gives_out)
    with pytest.raises(RuntimeError, match="the disk gave out"):
        save(model, tokenizer, tmp_path / "half")
    assert sorted(p.name for p in tmp_path.iterdir()) == []      # neither folder, nor a temp folder beside them
    monkeypatch.undo()
    out = save(model, tokenizer, tmp_path / "whole")
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in out.iterdir()}
    assert strict_json(out / "config.json")["architectures"] == [type(model).__name__]


def test_pretraining_checkpoint_works_with_fill_mask(tokenizer, tmp_path):
    """Notebook 02's model directory, saved by the recipe's save stage, is a plain BertForMaskedLM for transformers."""
    import torch
    from transformers import AutoModelForMaskedLM
    from transformers import pipeline as hf_pipeline

    from nbkit import models
    from nbkit.recipes import pretraining as pt

    torch.manual_seed(0)
    model = models.build_mlm_model("tiny", tokenizer, 64)
    assert type(model).__name__ == "SparseHeadBertForMaskedLM"
    loop = SimpleNamespace(model=model, config=SimpleNamespace(batch_size=2, grad_accum_steps=1, lr=1e-3),
                           dist=SimpleNamespace(world_size=1))
    result = SimpleNamespace(history=[{"step": 1, "eval_loss": 5.0, "eval_perplexity": 148.4}], metrics={"steps": 1})
    pt.save(pt.PretrainConfig.for_scale("smoke"), tmp_path, loop, result, tokenizer)
    model_dir = tmp_path / "model"
    assert strict_json(model_dir / "config.json")["architectures"] == ["BertForMaskedLM"]
    assert strict_json(tmp_path / "metrics.json")["eval_loss"] == 5.0
    assert type(AutoModelForMaskedLM.from_pretrained(model_dir)).__name__ == "BertForMaskedLM"

    fill = hf_pipeline("fill-mask", model=str(model_dir), device="cpu")
    assert type(fill.model).__name__ == "BertForMaskedLM"
    sentence = "质量很[MASK]，物流也快"
    got = fill(sentence, top_k=3)
    enc = tokenizer(sentence, return_tensors="pt")
    with torch.no_grad():
        logits = model.eval()(**enc).logits[0, (enc["input_ids"][0] == tokenizer.mask_token_id).nonzero()[0, 0]]
    assert [r["token"] for r in got] == logits.topk(3).indices.tolist()
