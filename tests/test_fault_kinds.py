"""Faults users hit (cases 2026-11-30), each fixed by kind: checkpoint loads (C01), macro-F1 over
absent classes (C05), blank texts in predict (C09), implausible vocabulary sizes (C10) and
deterministic WordPiece training (C20)."""
import json
import random
import warnings

import pytest
import torch

from nbkit.errors import CheckpointError, ConfigError, DataError
from nbkit.evaluate import inference as pipeline
from nbkit.evaluate.metrics import classification_report, format_report
from nbkit.models.bert import build_classifier, build_mlm_model
from nbkit.text.tokenizer import train_wordpiece
from tests._corpus import char_tokenizer, texts

LABELS4 = {i: f"l{i}" for i in range(4)}


@pytest.fixture(scope="module")
def four_label_dir(tmp_path_factory):
    tok = char_tokenizer()
    path = tmp_path_factory.mktemp("clf4")
    model, _ = build_classifier(None, 4, LABELS4, tokenizer=tok, preset="tiny")
    model.save_pretrained(path)
    return tok, path


def test_head_with_other_label_count_is_config_error_naming_both_and_the_fixes(four_label_dir):
    tok, path = four_label_dir
    with pytest.raises(ConfigError) as err:
        build_classifier(path, 2, {0: "a", 1: "b"}, tokenizer=tok)
    msg = str(err.value)
    assert "4 labels" in msg and "2 labels were requested" in msg
    assert "num_labels=4" in msg and "reinit_head=True" in msg


def test_reinit_head_is_explicit_and_says_what_was_reinitialised(four_label_dir):
    tok, path = four_label_dir
    model, how = build_classifier(path, 2, {0: "a", 1: "b"}, tokenizer=tok, reinit_head=True)
    assert model.classifier.weight.shape[0] == 2
    assert "classifier.weight (4, 64) -> (2, 64)" in how and "classifier.bias (4) -> (2)" in how
    same, _ = build_classifier(path, 4, LABELS4, tokenizer=tok)      # the checkpoint's labels load as they are
    assert same.config.num_labels == 4


def test_a_corrupt_checkpoint_is_checkpoint_error_with_the_report(four_label_dir, tmp_path):
    tok, path = four_label_dir
    for f in path.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])                    # truncated download
    with pytest.raises(CheckpointError, match="failed"):
        build_classifier(tmp_path, 4, LABELS4, tokenizer=tok)
    weights.unlink()                                                    # config.json without weights
    with pytest.raises(CheckpointError, match=r"has config.json but no weights file \(model.safetensors or pytorch_model.bin\)"):
        build_classifier(tmp_path, 4, LABELS4, tokenizer=tok)
    weights.write_bytes(b"\0" * 1000)
    from nbkit.profiling.step_timing import model_factory  # the other loader (notebook 04)
    factory, _ = model_factory("tiny", len(tok), 32, model_dir=tmp_path)
    with pytest.raises(CheckpointError):
        factory()


def test_build_mlm_model_default_seed_is_reproducible():
    tok = char_tokenizer()
    a, b = build_mlm_model("tiny", tok, 32), build_mlm_model("tiny", tok, 32)
    assert torch.equal(a.bert.embeddings.word_embeddings.weight, b.bert.embeddings.word_embeddings.weight)


def test_macro_f1_leaves_out_classes_absent_from_truth_and_predictions():
    with pytest.warns(UserWarning, match=r"\['c'\] occur neither"):
        rep = classification_report([0, 1, 0, 1], [0, 1, 0, 1], {0: "a", 1: "b", 2: "c"})
    assert rep["macro_f1"] == 1.0 and rep["absent"] == ["c"]
    assert format_report(rep).loc["macro avg", "recall"] == 1.0
    # a class that is in the truth but never predicted still counts (as 0)
    with pytest.warns(UserWarning, match="class 'b' has recall 0"):
        rep = classification_report([0, 0, 0, 1], [0, 0, 0, 0], {0: "a", 1: "b"})
    assert rep["zero_recall"] == ["b"] and rep["macro_f1"] == pytest.approx((6 / 7) / 2)
    assert "recall 0: b" in format_report(rep).index.name


def test_predict_refuses_texts_without_tokens_and_shows_unk_share():
    tok = char_tokenizer(model_max_length=64)
    model, _ = build_classifier(None, 2, {0: "a", 1: "b"}, tokenizer=tok, preset="tiny")
    with pytest.raises(DataError, match=r"3 of 5 texts give no token.*0: '', 1: '   ', 3: '\\u3000\\u3000'"):
        pipeline.predict(model, tok, ["", "   ", "好", "\u3000\u3000", "中国"], max_length=32)
    out = pipeline.predict(model, tok, ["中国", "中☃☃☃"], max_length=32, id2label={0: "a", 1: "b"})
    assert out["unk_share"] == [0.0, 0.5] and list(out["table"]["unk_share"]) == [0.0, 0.5]  # 中 [UNK]


def test_implausible_vocab_size_is_config_error_before_training(tmp_path):
    with pytest.raises(ConfigError, match=r"vocab_size=2,147,483,647 is implausible.*<= 1,000,000"):
        train_wordpiece(["你好世界", "今天天气很好"], vocab_size=2**31 - 1, out_dir=tmp_path, model_max_length=128)
    assert not (tmp_path / "tokenizer.json").exists()


def test_vocabulary_far_below_the_request_is_reported(tmp_path):
    with pytest.warns(UserWarning, match=r"has \d+ tokens, far below vocab_size=5,000"):
        tok = train_wordpiece(["你好世界", "今天天气很好"], vocab_size=5000, out_dir=tmp_path, model_max_length=128)
    assert len(tok) < 50


def test_wordpiece_training_is_deterministic(tmp_path):
    """tokenizers' trainer gives the continuation tokens (##x) ids in hash-map order and breaks ties
    between equally frequent merges by those ids: without nbkit's fix, 5 trainings of this corpus
    (Latin words with tied pair counts) gave 5 different vocabularies."""
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(3, 7))) for _ in range(60)]
    corpus = texts(50) + [" ".join(words)] * 2
    vocabs = []
    for i in range(4):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            train_wordpiece(corpus, vocab_size=1500, out_dir=tmp_path / str(i), model_max_length=64)
        vocabs.append(json.loads((tmp_path / str(i) / "tokenizer.json").read_text())["model"]["vocab"])
    assert all(v == vocabs[0] for v in vocabs[1:])
    assert any(t.startswith("##") and len(t) > 3 for t in vocabs[0])   # merges happened: ties were possible
    limited = [train_wordpiece(corpus, 1500, tmp_path / f"lim{i}", 64, limit_alphabet=300).get_vocab()
               for i in range(2)]
    assert limited[0] == limited[1]
