"""The default tokenizer, saved any of nbkit's ways, gives the same ids through every standard loader (D03)."""
from __future__ import annotations

import warnings

import pytest

#: full-width letters/digits/punctuation, accents, kana, control characters, emoji, CJK Extension B,
#: mixed case, long Latin words, rare CJK
PROBES = ["新出的ＸＰ９手机，续航１２小时！（实测）", "ＡｂＣ１２３，。！？：；“”《》【】……——", "naïve café Zoë Ångström",
          "ひらがな カタカナ ﾊﾝｶｸ", "控制\x01字符\x7f与\t制表\u200b零宽\ufeff", "表情😀👍🏽 扩展B𠀀𠮷𪚥",
          "MiXeD CaSe iPHONE GPU", "Pneumonoultramicroscopicsilicovolcanoconiosis supercalifragilistic",
          "犇骉麤 龘 生僻字", "价格：￥１９９．００元，折扣５０％"]
TRAIN = PROBES[:3] * 3 + ["续航很好，价格实惠", "手机屏幕清晰，物流很快", "质量一般，客服态度好"] * 8


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The same trained tokenizer saved three ways: train_wordpiece's dir, save_pretrained, save_tokenizer."""
    from nbkit import text
    from nbkit.text.tokenizer_files import save_tokenizer

    base = tmp_path_factory.mktemp("tok")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # a small corpus: "far below vocab_size"
        tok = text.train_wordpiece(TRAIN, 500, base / "trained", 64)
    tok.save_pretrained(str(base / "save_pretrained"))
    save_tokenizer(tok, base / "save_tokenizer")
    return tok, {name: base / name for name in ("trained", "save_pretrained", "save_tokenizer")}


@pytest.mark.parametrize("how", ["trained", "save_pretrained", "save_tokenizer"])
def test_every_loader_gives_nbkits_ids_on_varied_text(saved, how):
    import transformers as tf

    tok, dirs = saved
    want = [tok(p)["input_ids"] for p in PROBES]
    assert any(tok.unk_token_id in ids for ids in want)          # unseen characters: [UNK] everywhere alike
    assert tok.convert_tokens_to_ids("！") != tok.unk_token_id    # full-width punctuation is a token
    names = [n for n in ("AutoTokenizer", "PreTrainedTokenizerFast", "BertTokenizer", "BertTokenizerFast",
                         "BertTokenizerLegacy") if hasattr(tf, n)]
    assert "BertTokenizer" in names and "BertTokenizerLegacy" in names
    for name in names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = getattr(tf, name).from_pretrained(str(dirs[how]))
        got = [loaded(p)["input_ids"] for p in PROBES]
        assert got == want, (name, [(p, loaded.tokenize(p), tok.tokenize(p)) for p, a, b in
                                    zip(PROBES, got, want) if a != b][:2])


def test_a_classifier_export_reloads_with_the_same_ids(saved, tmp_path):
    from transformers import BertTokenizer, BertTokenizerLegacy, pipeline

    from nbkit import models
    from tests.test_export_loaders import _classifier

    tok, _ = saved
    out = models.export_classifier(_classifier(tok, {0: "neg", 1: "pos"}, "cls", positions=64), tok,
                                   tmp_path / "export", max_length=32)
    want = [tok(p, truncation=True, max_length=32)["input_ids"] for p in PROBES]
    for cls in (BertTokenizer, BertTokenizerLegacy):
        loaded = cls.from_pretrained(str(out))
        assert [loaded(p, truncation=True)["input_ids"] for p in PROBES] == want, cls.__name__
    classify = pipeline("text-classification", model=str(out), truncation=True)
    assert [classify.tokenizer(p, truncation=True)["input_ids"] for p in PROBES] == want
    assert len(classify(PROBES[:2])) == 2


def test_a_mean_pooling_export_loads_its_tokenizer_as_the_readme_says(saved, tmp_path):
    """README: on a mean-pooling export, BertTokenizer loads without a question, and AutoTokenizer with
    trust_remote_code=True (it reads config.json, whose model type is the export's own); same ids."""
    from transformers import AutoTokenizer, BertTokenizer

    from nbkit import models
    from tests.test_export_loaders import _classifier

    tok, _ = saved
    out = models.export_classifier(_classifier(tok, {0: "neg", 1: "pos"}, "mean", positions=64), tok,
                                   tmp_path / "export", max_length=32)
    want = [tok(p, truncation=True, max_length=32)["input_ids"] for p in PROBES]
    for loaded in (BertTokenizer.from_pretrained(str(out)), AutoTokenizer.from_pretrained(str(out), trust_remote_code=True)):
        assert [loaded(p, truncation=True)["input_ids"] for p in PROBES] == want, type(loaded).__name__


def test_a_reloaded_tokenizer_saves_without_the_arguments_of_its_own_load(saved, tmp_path):
    import json

    from transformers import AutoTokenizer

    from nbkit.text.tokenizer_files import LOAD_ONLY_KEYS, save_tokenizer

    _, dirs = saved
    reloaded = AutoTokenizer.from_pretrained(str(dirs["trained"]), local_files_only=True)
    config = json.loads((save_tokenizer(reloaded, tmp_path / "again") / "tokenizer_config.json").read_text())
    assert not set(config) & set(LOAD_ONLY_KEYS), sorted(set(config) & set(LOAD_ONLY_KEYS))
    assert config["model_max_length"] == 64 and config["do_lower_case"] is True
