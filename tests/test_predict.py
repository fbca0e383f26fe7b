"""pipeline.predict: length-sorted batches, answers in input order."""
import pytest
import torch

from nbkit import pipeline
from nbkit.tokenization import train_wordpiece
from tests._corpus import texts


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
