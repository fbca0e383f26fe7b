"""The store's text follows its tokenizer's normalisation (NFKC only when the tokenizer runs it), and the
tokenizer's identity is part of the store's: a store is never reused with another tokenizer."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from nbkit.corpus import prepare_corpus
from nbkit.errors import ConfigError
from tests.corpus_helpers import load_split, review_lines, write_txt

#: full-width letters/digits/punctuation, compatibility ideograph, half-width kana, accents, mixed case
WIDE = ["新款ＵＳＢ３．０接口的Ｕ盘，容量６４ＧＢ！", "（限量）《红楼梦》精装版，仅售８８元？", "ﾃｽﾄ 用的 ｶﾀｶﾅ 很少见",
        "咖啡馆叫 Café Ｎａïｖｅ，很安静。", "兀 與 乾 都是汉字：“对”"]


def _tokenizer(path, **kw):
    from nbkit.text.tokenizer import train_wordpiece

    train_wordpiece(review_lines(200, which="pos") + WIDE * 3, 400, path, model_max_length=128, **kw)
    return path


def _stored(out, n):
    ids, _ = load_split(out)
    m = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    cuts = np.flatnonzero(ids == m["sep_id"])
    starts = np.concatenate([[0], cuts[:-1] + 1])
    return m, [ids[a:b].tolist() for a, b in zip(starts, cuts)][-n:]


@pytest.mark.parametrize("nfkc", [False, True], ids=["default", "nfkc"])
def test_stored_ids_equal_the_tokenizer_on_raw_text(tmp_path, nfkc):
    from transformers import AutoTokenizer

    tok_dir = _tokenizer(tmp_path / "tok", nfkc=nfkc)
    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    src = write_txt(tmp_path / "c.txt", review_lines(20) + WIDE)
    prepare_corpus(src, tmp_path / "out", tokenizer=str(tok_dir), heldout_share=0.0, num_workers=1, progress=False)
    m, got = _stored(tmp_path / "out", len(WIDE))
    assert got == [tok(t, add_special_tokens=False)["input_ids"] for t in WIDE]
    assert m["settings"]["unicode_normalization"] == ("NFKC" if nfkc else "none")
    assert len(m["settings"]["tokenizer_sha256"]) == 64
    if not nfkc:  # width kept: ！ is its own token, not !'s
        assert tok.convert_tokens_to_ids("！") in got[0] and tok.convert_tokens_to_ids("!") not in got[0]


def test_a_store_trained_tokenizer_has_no_nfkc_and_matches_its_ids(tmp_path):
    from nbkit.corpus.store import store_tokenizer

    src = write_txt(tmp_path / "c.txt", review_lines(150) + WIDE * 2 + ["全角ＡＢＣ与半角ABC各一次"])
    m = prepare_corpus(src, tmp_path / "out", vocab_size=500, heldout_share=0.0, num_workers=1, progress=False)
    assert m["settings"]["unicode_normalization"] == "none" and m["settings"]["tokenizer_sha256"] is None
    tok = store_tokenizer(tmp_path / "out")
    spec = json.loads((tmp_path / "out" / "tokenizer" / "tokenizer.json").read_text(encoding="utf-8"))
    assert spec["normalizer"]["type"] == "BertNormalizer"
    _, got = _stored(tmp_path / "out", 1)
    assert got == [tok("全角ＡＢＣ与半角ABC各一次", add_special_tokens=False)["input_ids"]]


def test_another_tokenizer_at_the_same_path_is_named_not_reused(tmp_path):
    tok_dir = _tokenizer(tmp_path / "tok")
    src = write_txt(tmp_path / "c.txt", review_lines(40) + WIDE)
    kw = dict(tokenizer=str(tok_dir), heldout_share=0.0, num_workers=1, progress=False)
    first = prepare_corpus(src, tmp_path / "out", **kw)
    assert prepare_corpus(src, tmp_path / "out", **kw) == first      # the same tokenizer: reused
    shutil.rmtree(tok_dir)
    _tokenizer(tok_dir, nfkc=True)                                   # same path, another pipeline
    with pytest.raises(ConfigError, match="tokenizer_sha256: .*unicode_normalization: 'none' -> 'NFKC'"):
        prepare_corpus(src, tmp_path / "out", **kw)


def test_a_store_of_the_old_nfkc_default_is_not_reused(tmp_path):
    """Stores prepared before this setting existed were NFKC-normalised: their identity lacks the key."""
    src = write_txt(tmp_path / "c.txt", review_lines(60))
    kw = dict(vocab_size=300, heldout_share=0.0, num_workers=1, progress=False)
    prepare_corpus(src, tmp_path / "out", **kw)
    path = tmp_path / "out" / "manifest.json"
    old = json.loads(path.read_text(encoding="utf-8"))
    for key in ("unicode_normalization", "tokenizer_sha256"):
        old["settings"].pop(key)
    path.write_text(json.dumps(old), encoding="utf-8")
    with pytest.raises(ConfigError, match="setting unicode_normalization: None -> 'none'"):
        prepare_corpus(src, tmp_path / "out", **kw)
