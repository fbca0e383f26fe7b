"""Exported artifacts every standard loader reads the same way (issue 22: D03, D04, D05, D08, D16, D17)."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBES = ["ＧＰＵ显存２４ＧＢ，很快！", "Café crème 的味道", "犇骉麤 生僻字", "iPhone15 屏幕OLED很清晰", "ｈｅｌｌｏ 世界"]
TRAIN = PROBES * 4 + ["屏幕很清晰，物流很快", "味道一般，价格偏高", "生僻字也能识别"] * 6


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    from nbkit import text

    out = tmp_path_factory.mktemp("tok")
    with pytest.warns(UserWarning, match="far below"):
        text.train_wordpiece(TRAIN, 400, out, 48)
    return out


def test_tokenizer_file_set_is_complete_and_explicit(tok_dir):
    config = json.loads((tok_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"       # 4.x and 5.x both resolve it
    assert {k: config[k] for k in ("do_lower_case", "strip_accents", "tokenize_chinese_chars")} == {
        "do_lower_case": True, "strip_accents": False, "tokenize_chinese_chars": True}
    assert config["unicode_normalization"] is None and "normalization_note" not in config  # BERT's normalizer only
    vocab = json.loads((tok_dir / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    lines = (tok_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert lines == sorted(vocab, key=vocab.get) and lines[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_every_standard_loader_gives_the_same_ids(tok_dir):
    import transformers as tf

    ref = tf.PreTrainedTokenizerFast.from_pretrained(tok_dir)
    want = [ref(p)["input_ids"] for p in PROBES]
    assert ref.tokenize("ＧＰＵ")[:1] == ["ｇｐｕ"] and ref.unk_token_id not in sum(want, [])   # no NFKC: width kept
    names = [n for n in ("AutoTokenizer", "PreTrainedTokenizerFast", "BertTokenizer", "BertTokenizerFast",
                         "BertTokenizerLegacy") if hasattr(tf, n)]
    for name in names:      # tokenizer.json as saved, or BERT's normalizer rebuilt from the flags: the same
        loaded = getattr(tf, name).from_pretrained(tok_dir)
        assert [loaded(p)["input_ids"] for p in PROBES] == want, name
        assert loaded("Café crème 的味道")["input_ids"] == want[1], name       # accents kept: explicit flag


def test_a_reloaded_tokenizer_saves_the_complete_set_again(tok_dir, tmp_path):
    import pickle

    from transformers import AutoTokenizer

    from nbkit.text.tokenizer_files import save_tokenizer

    again = save_tokenizer(AutoTokenizer.from_pretrained(tok_dir), tmp_path / "again", model_max_length=32)
    config = json.loads((again / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast" and config["model_max_length"] == 32
    assert (again / "vocab.txt").read_text() == (tok_dir / "vocab.txt").read_text()
    fresh = pickle.loads(pickle.dumps(AutoTokenizer.from_pretrained(tok_dir)))
    assert fresh(PROBES[0])["input_ids"] == AutoTokenizer.from_pretrained(again)(PROBES[0])["input_ids"]


def _classifier(tok, names, pooling, positions=48):
    import torch

    from nbkit import models

    model, _ = models.build_classifier(None, len(names), names, tokenizer=tok, preset="tiny", pooling=pooling,
                                       max_position_embeddings=positions)
    with torch.no_grad():
        model.classifier.weight.mul_(50.0)
        model.classifier.bias.copy_(torch.linspace(-1.0, 1.0, len(names)))
    return model.eval()


def test_saved_label_order_and_pooling_win(tok_dir, tmp_path):
    from transformers import AutoTokenizer

    from nbkit import evaluate, models
    from nbkit.errors import ConfigError

    tok = AutoTokenizer.from_pretrained(tok_dir)
    names = {0: "neg", 1: "mid", 2: "pos"}
    model = _classifier(tok, names, "mean")
    model.save_pretrained(tmp_path / "clf")
    tok.save_pretrained(tmp_path / "clf")
    texts = ["屏幕很清晰", "味道一般", "生僻字"]
    want = [names[i] for i in evaluate.predict(model, tok, texts, 48)["label"]]
    shuffled = {0: "pos", 1: "neg", 2: "mid"}
    again, how = models.build_classifier(tmp_path / "clf", 3, shuffled, tok)     # no pooling=: the saved one
    assert type(again).__name__ == "MeanPoolBertForSequenceClassification" and "reordered" in how
    assert [shuffled[i] for i in evaluate.predict(again.eval(), tok, texts, 48)["label"]] == want
    with pytest.raises(ConfigError, match="pooling='mean'.*pooling='cls'"):
        models.build_classifier(tmp_path / "clf", 3, names, tok, pooling="cls")


def test_export_works_on_a_copy_and_reorders_by_name(tok_dir, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from nbkit import models

    tok = AutoTokenizer.from_pretrained(tok_dir)
    names = {0: "neg", 1: "pos"}
    model = _classifier(tok, names, "cls")
    before = (model.config.to_dict(), model.classifier.weight.clone())
    out = models.export_classifier(model, tok, tmp_path / "x", id2label={0: "pos", 1: "neg"}, max_length=20)
    assert model.config.to_dict() == before[0] and model.classifier.weight.equal(before[1])
    loaded = AutoModelForSequenceClassification.from_pretrained(out)
    assert loaded.classifier.weight[0].equal(before[1][1]) and loaded.config.id2label == {0: "pos", 1: "neg"}
    assert json.loads((out / "tokenizer_config.json").read_text())["model_max_length"] == 20


def readme_call(export_dir, hf_pipeline):
    """Run the README's `classify = pipeline(...)` line as written, with its model path pointed at ``export_dir``."""
    import re

    shown = set()
    for readme in ("README.md", "README.zh-CN.md"):
        text = (Path(__file__).resolve().parents[1] / readme).read_text(encoding="utf-8")
        calls = re.findall(r'^classify = (pipeline\("text-classification".*\))\s*$', text, flags=re.M)
        assert len(calls) == 1, f"{readme} should show one classify = pipeline(...) call, found {calls}"
        shown.add(calls[0])
    assert len(shown) == 1, f"the two READMEs show different calls: {shown}"
    call = shown.pop()
    assert 'model="runs/mine/export"' in call
    return eval(call.replace('"runs/mine/export"', repr(str(export_dir))), {"pipeline": hf_pipeline})  # noqa: S307


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_documented_pipeline_call_reproduces_predict(tok_dir, tmp_path, pooling):
    import torch
    from transformers import AutoTokenizer
    from transformers import pipeline as hf_pipeline
    from transformers.utils import logging as hf_logging

    from nbkit import evaluate, models

    tok = AutoTokenizer.from_pretrained(tok_dir)
    names = {0: "neg", 1: "pos"}
    model = _classifier(tok, names, pooling)
    out = models.export_classifier(model, tok, tmp_path / "export", max_length=24)   # trained at 24 of 48
    texts = ["屏幕很清晰，物流很快" * 8, "味道一般", "iPhone15 屏幕OLED很清晰" * 3, "ＧＰＵ很快"]
    ours = evaluate.predict(model, tok, texts, max_length=24)
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    hf_logging.get_logger().addHandler(handler)
    try:   # the README's call, its exact text (the README's example exports with mean pooling)
        classify = readme_call(out, hf_pipeline) if pooling == "mean" else \
            hf_pipeline("text-classification", model=str(out), truncation=True, device="cpu")
    finally:
        hf_logging.get_logger().removeHandler(handler)
    assert not [r.getMessage()[:80] for r in records if "not supported" in r.getMessage()]
    got = classify(texts, batch_size=2)
    assert [g["label"] for g in got] == [names[i] for i in ours["label"]]
    assert torch.allclose(torch.tensor([g["score"] for g in got]), torch.tensor(ours["prob"]).float(), atol=1e-5)
    assert classify("")[0]["label"] in names.values()             # empty text: a label, no exception
    if pooling == "mean":            # the shipped code cuts untruncated input the same way
        plain = hf_pipeline("text-classification", model=str(out), trust_remote_code=True, device="cpu")
        assert abs(plain(texts[0])[0]["score"] - got[0]["score"]) < 1e-5
        with pytest.raises(ValueError, match="trust_remote_code"):   # never silently CLS-pooled
            hf_pipeline("text-classification", model=str(out), device="cpu")


def test_export_loads_with_home_unwritable(tok_dir, tmp_path):
    """HOME that cannot hold a cache (a file's child: not writable even by root); the remote code goes to
    HF_MODULES_CACHE, as docker/entrypoint.sh and the README set it."""
    from transformers import AutoTokenizer

    from nbkit import models

    tok = AutoTokenizer.from_pretrained(tok_dir)
    out = models.export_classifier(_classifier(tok, {0: "neg", 1: "pos"}, "mean"), tok, tmp_path / "e")
    (tmp_path / "blocker").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "XDG_"))}
    env.update(HOME=str(tmp_path / "blocker" / "home"), HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT),
               HF_MODULES_CACHE=str(tmp_path / "modules"))
    code = ("import sys, transformers; p = transformers.pipeline('text-classification', model=sys.argv[1], "
            "truncation=True, trust_remote_code=True, device='cpu'); print(p('很好')[0]['label'])")
    run = subprocess.run([sys.executable, "-c", code, str(out)], env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-800:]
    assert run.stdout.strip().splitlines()[-1] in ("neg", "pos")


def test_one_class_predictions_and_missing_train_file_are_named():
    from nbkit import data, evaluate
    from nbkit.errors import ConfigError

    with pytest.warns(UserWarning, match="degenerate classifier: it predicts 'b' for all 4"):
        report = evaluate.classification_report([0, 1, 0, 1], [1, 1, 1, 1], {0: "a", 1: "b"})
    assert report["degenerate"].startswith("degenerate")
    assert evaluate.classification_report([0, 1], [0, 1], {0: "a", 1: "b"})["degenerate"] is None
    with pytest.raises(ConfigError, match="train=None"):
        data.load_labeled_files(None, test="x.csv")


def test_a_mean_pooling_classifier_never_trains_its_unused_pooler(tok_dir, tmp_path):
    """DDP requires every trainable parameter to get a gradient; the pooler is never read with mean pooling."""
    from transformers import AutoTokenizer

    from nbkit import models

    tok = AutoTokenizer.from_pretrained(tok_dir)
    built = _classifier(tok, {0: "neg", 1: "pos"}, "mean")
    built.save_pretrained(tmp_path / "m")
    loaded, _ = models.build_classifier(str(tmp_path / "m"), 2, {0: "neg", 1: "pos"}, tokenizer=tok)
    for model in (built, loaded):
        frozen = sorted(n for n, p in model.named_parameters() if not p.requires_grad)
        assert frozen == ["bert.pooler.dense.bias", "bert.pooler.dense.weight"], frozen
