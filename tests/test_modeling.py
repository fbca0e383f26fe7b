"""Model presets, MLM model construction, classifier loading (local, hub offline, scratch)."""
from __future__ import annotations

import pytest
import torch

from nbkit.errors import CheckpointError, ConfigError
from nbkit.models.bert import PRESETS, build_classifier, build_config, build_mlm_model, count_parameters
from tests._corpus import char_tokenizer

ID2LABEL = {0: "negative", 1: "positive"}


@pytest.fixture(scope="module")
def tok():
    return char_tokenizer(model_max_length=128)


def test_presets_and_config_fields():
    assert set(PRESETS) == {"tiny", "narrow", "mini", "small", "base"}
    cfg = build_config("mini", 1234)
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.intermediate_size) == (256, 4, 4, 1024)
    assert cfg.vocab_size == 1234 and cfg.max_position_embeddings == 512
    assert build_config("tiny", 10).max_position_embeddings == 128
    assert build_config("base", 10, max_position_embeddings=256).max_position_embeddings == 256
    assert build_config("small", 10, hidden_dropout_prob=0.0).hidden_dropout_prob == 0.0
    assert cfg._attn_implementation == "sdpa"


def test_unknown_preset_lists_presets():
    with pytest.raises(ConfigError, match="tiny, narrow, mini, small, base"):
        build_config("huge", 100)
    with pytest.raises(ConfigError, match="divisible"):
        build_config("tiny", 100, num_attention_heads=3)


def test_mlm_model_matches_tokenizer_and_runs(tok):
    model = build_mlm_model("tiny", tok, block_size=64)
    assert model.config.vocab_size == len(tok)
    assert model.config.pad_token_id == tok.pad_token_id == 0
    assert (model.config.cls_token_id, model.config.sep_token_id) == (tok.cls_token_id, tok.sep_token_id)
    ids = torch.randint(5, len(tok), (3, 64))  # (B, T)
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids))
    assert out.logits.shape == (3, 64, len(tok))  # (B, T, V)
    assert count_parameters(model) > 0


def test_block_size_above_position_limit_names_both_numbers(tok):
    with pytest.raises(ConfigError, match=r"block_size=256.*max_position_embeddings=128"):
        build_mlm_model("tiny", tok, block_size=256)
    model = build_mlm_model("tiny", tok, block_size=256, max_position_embeddings=256)
    assert model.config.max_position_embeddings == 256


def test_count_parameters():
    lin = torch.nn.Linear(3, 4)
    assert count_parameters(lin) == 16
    lin.bias.requires_grad_(False)
    assert count_parameters(lin, trainable_only=True) == 12


def test_classifier_from_local_checkpoint_keeps_encoder_new_head(tok, tmp_path):
    mlm = build_mlm_model("tiny", tok, block_size=64)
    mlm.save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    clf, how = build_classifier(tmp_path / "model", 2, ID2LABEL, tokenizer=tok)
    assert "local checkpoint" in how and "classifier" in how
    mlm_sd, clf_sd = mlm.bert.state_dict(), clf.bert.state_dict()
    encoder_keys = [k for k in mlm_sd if not k.startswith("pooler")]
    assert len(encoder_keys) > 10
    for k in encoder_keys:
        assert torch.equal(mlm_sd[k], clf_sd[k]), k
    assert clf.classifier.weight.shape == (2, 64)
    assert clf.config.id2label == ID2LABEL and clf.config.label2id == {"negative": 0, "positive": 1}
    logits = clf(input_ids=torch.tensor([[2, 10, 11, 3]])).logits
    assert logits.shape == (1, 2)


def test_classifier_checks_tokenizer_fits(tok, tmp_path):
    small_tok = char_tokenizer(n_lines=20)
    build_mlm_model("tiny", small_tok, block_size=32).save_pretrained(tmp_path)
    with pytest.raises(ConfigError, match="embedding table"):
        build_classifier(tmp_path, 2, ID2LABEL, tokenizer=tok)


def test_classifier_rejects_a_tokenizer_that_is_not_the_models(tok, tmp_path):
    from transformers import BertTokenizer

    build_mlm_model("tiny", tok, block_size=64).save_pretrained(tmp_path)   # no tokenizer saved
    smaller = BertTokenizer(vocab={t: i for t, i in tok.get_vocab().items() if i < len(tok) - 1},
                            do_lower_case=True)
    with pytest.raises(ConfigError, match=r"has \d+ tokens but .*embedding table.*AutoTokenizer.from_pretrained"):
        build_classifier(tmp_path, 2, ID2LABEL, tokenizer=smaller)   # fits the table, yet not the model's
    tok.save_pretrained(tmp_path)                                      # now the model dir has its own tokenizer
    vocab = tok.get_vocab()
    a, b = sorted(vocab, key=vocab.get)[10:12]
    swapped = BertTokenizer(vocab={**vocab, a: vocab[b], b: vocab[a]}, do_lower_case=True)
    assert len(swapped) == len(tok)                                    # same size: only the vocab check sees it
    with pytest.raises(ConfigError, match=r"does not match the one saved with the model.*2 tokens with other ids"):
        build_classifier(tmp_path, 2, ID2LABEL, tokenizer=swapped)
    model, _ = build_classifier(tmp_path, 2, ID2LABEL, tokenizer=tok)   # its own tokenizer is fine
    assert model.config.vocab_size == len(tok)


def test_classifier_dir_without_config_is_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="config.json"):
        build_classifier(tmp_path, 2, ID2LABEL)


def test_classifier_missing_local_path_says_so(tmp_path):
    with pytest.raises(ConfigError, match="no directory"):
        build_classifier(str(tmp_path / "runs" / "mlm" / "model"), 2, ID2LABEL)
    with pytest.raises(ConfigError, match="no directory"):
        build_classifier("./not-here", 2, ID2LABEL)


def test_classifier_hub_name_offline_is_clear_config_error(monkeypatch):
    import huggingface_hub.constants as hc

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    with pytest.raises(ConfigError, match="HF_HUB_OFFLINE=1.*source=None"):
        build_classifier("nbkit-test/no-such-model", 2, ID2LABEL)


def test_classifier_from_scratch(tok):
    model, how = build_classifier(None, 2, ID2LABEL, tokenizer=tok, preset="tiny")
    assert how.startswith("from scratch") and "tiny" in how
    assert model.config.vocab_size == len(tok) and model.num_labels == 2
    with pytest.raises(ConfigError, match="preset"):
        build_classifier(None, 2, ID2LABEL, tokenizer=tok)
    with pytest.raises(ConfigError, match="num_labels"):
        build_classifier(None, 3, ID2LABEL, tokenizer=tok, preset="tiny")
