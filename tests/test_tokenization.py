"""WordPiece training: round trip, loading with AutoTokenizer, alphabet/UNK behaviour, stats."""
from __future__ import annotations

import json

import pytest

from nbkit.errors import ConfigError, DataError
from nbkit.text.tokenizer import SPECIAL_TOKENS, save_stats, tokenizer_stats, train_wordpiece
from tests._corpus import texts

RARE = "齉"  # "nasal voice": not in the first 300 People's Daily lines
TRAIN = texts(300) + [f"他说话带着{RARE}音。"] + ["Hello World, BERT 模型 2026 年。"] * 2


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    # a generator: train_wordpiece must not need len() or a second pass
    tok = train_wordpiece((t for t in TRAIN), vocab_size=3000, out_dir=out, model_max_length=128)
    return tok, out


def _squash(s: str) -> str:
    return "".join(s.split())


def test_rare_character_is_in_vocab_by_default(trained):
    tok, _ = trained
    assert sum(t.count(RARE) for t in TRAIN) == 1
    ids = tok(RARE, add_special_tokens=False)["input_ids"]
    assert ids == [tok.convert_tokens_to_ids(RARE)]
    assert tok.unk_token_id not in ids


def test_limit_alphabet_turns_rare_characters_into_unk(tmp_path):
    tok = train_wordpiece(TRAIN, vocab_size=3000, out_dir=tmp_path, model_max_length=128, limit_alphabet=100)
    assert tok(RARE, add_special_tokens=False)["input_ids"] == [tok.unk_token_id]


def test_round_trip_up_to_normalisation_spaces(trained):
    tok, _ = trained
    for text in TRAIN[:50] + ["hello world, bert 模型 2026 年。"]:
        ids = tok(text)["input_ids"]
        assert tok.unk_token_id not in ids
        assert _squash(tok.decode(ids, skip_special_tokens=True)) == _squash(text.lower())  # no NFKC: width kept


def test_autotokenizer_loads_fast_bert_with_position_limit(trained):
    from transformers import AutoTokenizer

    tok, out = trained
    loaded = AutoTokenizer.from_pretrained(out)
    assert loaded.is_fast and loaded.backend_tokenizer.normalizer.__getstate__() == tok.backend_tokenizer.normalizer.__getstate__()
    assert loaded.model_max_length == 128
    assert loaded.get_vocab() == tok.get_vocab()
    assert [loaded.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    sample = TRAIN[7]
    assert loaded(sample)["input_ids"] == tok(sample)["input_ids"]
    # templates: [CLS] A [SEP] and [CLS] A [SEP] B [SEP] with segment ids
    one = loaded("我们", "你们")
    toks = loaded.convert_ids_to_tokens(one["input_ids"])
    assert toks == ["[CLS]", "我", "们", "[SEP]", "你", "们", "[SEP]"]
    assert one["token_type_ids"] == [0, 0, 0, 0, 1, 1, 1]
    long = loaded("中" * 500, truncation=True)["input_ids"]
    assert len(long) == 128 and long[-1] == loaded.sep_token_id


def test_training_json_counts_the_alphabet(trained):
    _, out = trained
    info = json.loads((out / "training.json").read_text(encoding="utf-8"))
    assert info["n_texts"] == len(TRAIN)
    assert info["alphabet_size"] == len(set("".join(TRAIN)))
    assert info["limit_alphabet"] is None


def test_unk_rate_zero_on_training_text_and_exact_on_unseen(trained):
    tok, _ = trained
    assert tokenizer_stats(tok, TRAIN[:100])["unk_rate"] == 0.0
    # 4 tokens, 2 of them characters never seen in training (both [UNK])
    assert "龘" not in "".join(TRAIN) and "靐" not in "".join(TRAIN)
    st = tokenizer_stats(tok, ["我们龘靐"])
    assert st["unk_rate"] == pytest.approx(0.5)


def test_stats_lengths_and_chars_per_token(trained, tmp_path):
    tok, _ = trained
    st = tokenizer_stats(tok, ["我们", "", "我们我们", "我们我们我们我们"])
    assert st["n_texts"] == 3 and st["n_tokens"] == 14
    assert st["length_p50"] == 4 and st["length_max"] == 8
    assert st["chars_per_token"] == pytest.approx(1.0)
    assert st["vocab_size"] == len(tok)
    # Latin words are WordPieces: fewer tokens than characters
    assert tokenizer_stats(tok, ["hello world"])["chars_per_token"] > 1.0
    path = save_stats(st, tmp_path / "x")
    assert json.loads(path.read_text(encoding="utf-8")) == st


def test_bad_input_raises_nbkit_errors(tmp_path):
    with pytest.raises(DataError, match="no non-empty text"):
        train_wordpiece(["", "  "], 1000, tmp_path, 128)
    with pytest.raises(DataError, match="expects strings"):
        train_wordpiece([["我们"]], 1000, tmp_path, 128)
    with pytest.raises(ConfigError):
        train_wordpiece(["我们"], 3, tmp_path, 128)
    with pytest.raises(ConfigError):
        train_wordpiece(["我们"], 1000, tmp_path, 2)


def test_accepts_a_datasets_column(tmp_path):
    from datasets import Dataset

    ds = Dataset.from_dict({"text": ["我们在北京", "你们好", ""]})
    tok = train_wordpiece(ds["text"], 100, tmp_path, 64)
    assert len(tok) == 5 + len(set("我们在北京你们好"))  # specials + every character, nothing else
    st = tokenizer_stats(tok, ds["text"])
    assert st["n_texts"] == 2 and st["unk_rate"] == 0.0


def test_nfkc_option_folds_width_and_reload_keeps_it(tmp_path):
    """nfkc=True: People's Daily's ＧＤＰ and ７．８％ teach the reviews' GDP and 7.8%; the files say so."""
    from transformers import AutoTokenizer

    full_width = ["今年ＧＤＰ增长７．８％，ｉＰｈｏｎｅ售价９９９元。"] * 5 + texts(50)
    tok = train_wordpiece(full_width, vocab_size=3000, out_dir=tmp_path, model_max_length=64, nfkc=True)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    for t in (tok, loaded):
        ascii_ids = t("iPhone 售价999元, GDP 增长7.8%")["input_ids"]
        assert t.unk_token_id not in ascii_ids, t.convert_ids_to_tokens(ascii_ids)
        assert t.tokenize("ＧＤＰ７．８％") == t.tokenize("GDP7.8%")
    assert not any("\uff01" <= c <= "\uff5e" for t in tok.get_vocab() for c in t)  # no full-width ASCII left
    config = json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["unicode_normalization"] == "NFKC" and "BertTokenizer" in config["normalization_note"]
    assert json.loads((tmp_path / "training.json").read_text(encoding="utf-8"))["nfkc"] is True


def test_default_has_no_nfkc_and_keeps_full_width_forms(tmp_path):
    """The default is BERT's normalizer alone: full-width forms are tokens of their own, never folded."""
    full_width = ["今年ＧＤＰ增长７．８％，ｉＰｈｏｎｅ售价９９９元！"] * 5 + ["售价999元，很好!"] * 5
    tok = train_wordpiece(full_width, vocab_size=3000, out_dir=tmp_path, model_max_length=64)
    spec = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    assert spec["normalizer"]["type"] == "BertNormalizer"       # not a Sequence with NFKC in front
    assert tok.tokenize("ＧＤＰ７．８％") != tok.tokenize("GDP7.8%")
    vocab = tok.get_vocab()
    assert "！" in vocab and "!" in vocab and vocab["！"] != vocab["!"]
    assert tok.unk_token_id not in tok("ｇｄｐ增长７．８％！")["input_ids"]
