"""pipeline.predict: length-sorted batches, answers in input order."""
import pytest
import torch

from nbkit.errors import ConfigError
from nbkit.evaluate import inference as pipeline
from nbkit.text.tokenizer import train_wordpiece
from tests._corpus import char_tokenizer, texts


def test_predict_returns_input_order_whatever_the_batching(tmp_path):
    from transformers import BertConfig, BertForSequenceClassification

    corpus = texts(200)
    tok = train_wordpiece(corpus, vocab_size=2000, out_dir=tmp_path, model_max_length=64)
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, num_labels=3, pad_token_id=tok.pad_token_id,
        initializer_range=1.0, hidden_dropout_prob=0.0))  # large weights: answers differ per review
    reviews = [corpus[i][:n] for i, n in enumerate((40, 3, 25, 7, 60, 1, 12, 33, 5))]  # lengths out of order
    one_by_one = [pipeline.predict(model, tok, [r], max_length=64) for r in reviews]
    batched = pipeline.predict(model, tok, reviews, max_length=64, batch_size=4,
                               id2label={0: "a", 1: "b", 2: "c"})
    assert batched["label"] == [o["label"][0] for o in one_by_one]
    assert batched["prob"] == [pytest.approx(o["prob"][0], abs=1e-5) for o in one_by_one]
    assert list(batched["table"]["review"]) == reviews
    assert len({round(p, 4) for p in batched["prob"]}) > 5  # answers differ per review: order matters


def _tiny_classifier(tok, max_positions):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    return BertForSequenceClassification(BertConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=max_positions, num_labels=2,
        pad_token_id=tok.pad_token_id))


def test_predict_takes_a_single_string_as_one_text():
    tok = char_tokenizer(50)
    model = _tiny_classifier(tok, 64)
    one = pipeline.predict(model, tok, "质量很好", max_length=64, id2label={0: "neg", 1: "pos"})
    listed = pipeline.predict(model, tok, ["质量很好"], max_length=64)
    assert len(one["label"]) == 1 and one["label"] == listed["label"]  # not one answer per character
    assert list(one["table"]["review"]) == ["质量很好"]


def test_predict_max_length_above_position_embeddings_names_both_numbers():
    tok = char_tokenizer(50, model_max_length=512)  # the tokenizer would allow it; the model cannot
    model = _tiny_classifier(tok, 64)
    with pytest.raises(ConfigError, match=r"max_length=1000 exceeds the model's max_position_embeddings=64; "
                                          r"use max_length <= 64"):
        pipeline.predict(model, tok, ["质量很好"], max_length=1000)
    with pytest.raises(ConfigError, match="max_length=48 exceeds tokenizer.model_max_length=32"):
        pipeline.predict(model, char_tokenizer(50, model_max_length=32), ["好"], max_length=48)
