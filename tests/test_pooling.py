"""Mean pooling: the classifier reads the masked mean of token states, loads an nbkit MLM checkpoint."""
import pytest
import torch

from nbkit.errors import ConfigError
from nbkit.models import MeanPoolBertForSequenceClassification, build_classifier, build_mlm_model
from nbkit.text import train_wordpiece

ID2LABEL = {0: "neg", 1: "pos"}


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    texts = ["这本书很好看", "质量太差了", "物流很快，满意", "不推荐购买"] * 10
    return train_wordpiece(texts, vocab_size=200, out_dir=tmp_path_factory.mktemp("tok"), model_max_length=64)


def test_mean_pooling_loads_the_encoder_and_ignores_padding(tok, tmp_path):
    mlm = build_mlm_model("tiny", tok, block_size=64)
    mlm.save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    clf, how = build_classifier(tmp_path / "model", 2, ID2LABEL, tokenizer=tok, pooling="mean")
    assert isinstance(clf, MeanPoolBertForSequenceClassification) and "mean pooling" in how
    assert clf.config.classifier_pooling == "mean"
    assert torch.equal(clf.bert.embeddings.word_embeddings.weight, mlm.bert.embeddings.word_embeddings.weight)
    clf.eval()
    ids = torch.randint(5, len(tok), (1, 7))                                      # (1, T)
    padded = torch.cat([ids, torch.zeros(1, 5, dtype=torch.long)], 1)             # (1, T + 5)
    mask = torch.cat([torch.ones(1, 7), torch.zeros(1, 5)], 1).long()
    a = clf(input_ids=ids, attention_mask=torch.ones_like(ids)).logits            # (1, 2)
    b = clf(input_ids=padded, attention_mask=mask).logits
    assert a.shape == (1, 2) and torch.allclose(a, b, atol=1e-5)
    cls_clf, _ = build_classifier(tmp_path / "model", 2, ID2LABEL, tokenizer=tok, pooling="cls")   # padding-safe
    assert not isinstance(cls_clf, MeanPoolBertForSequenceClassification)                          # too, another class
    auto, how = build_classifier(tmp_path / "model", 2, ID2LABEL, tokenizer=tok)   # no pooler saved: mean, said why
    assert isinstance(auto, MeanPoolBertForSequenceClassification) and "no pooler weights" in how


def test_from_scratch_overrides_and_bad_pooling(tok):
    scratch, how = build_classifier(None, 2, ID2LABEL, tokenizer=tok, preset="tiny", pooling="mean", hidden_size=32)
    assert isinstance(scratch, MeanPoolBertForSequenceClassification) and scratch.config.hidden_size == 32
    assert "mean pooling" in how
    out = scratch(input_ids=torch.tensor([[2, 7, 3]]), labels=torch.tensor([1]))
    assert out.loss is not None and out.logits.shape == (1, 2)
    with pytest.raises(ConfigError, match="pooling"):
        build_classifier(None, 2, ID2LABEL, tokenizer=tok, preset="tiny", pooling="max")
