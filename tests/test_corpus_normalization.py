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


def test_doc_key_is_the_blake2b_of_the_nfkc_form_for_full_width_text_and_combining_marks():
    """doc_key maps full-width ASCII to its NFKD form before NFKC (a speed-up): the key must stay the hash of
    ``unicodedata.normalize("NFKC", text)`` exactly, also where a combining mark follows a full-width letter."""
    import hashlib
    import random
    import unicodedata

    from nbkit.corpus.worker import doc_key

    def reference(t):
        return int.from_bytes(hashlib.blake2b(unicodedata.normalize("NFKC", t).encode("utf-8"), digest_size=8)
                              .digest(), "little")

    pool = [chr(c) for c in [*range(0xFF00, 0xFF70), 0x3000, 0x2026, 0x301, 0x308, 0x3099, 0x309A, 0x41, 0x4E00,
                             0x304B, 0xFF76, 0xFF9E, 0x1100, 0x1161, 0xAC00]]
    rng = random.Random(0)
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(1, 8))) for _ in range(20000)]
    texts += ["ＧＤＰ增长７．８％！", "Ａ\u0301", "你好，世界（１９９８）…", "\u3000全角空格"]
    assert [doc_key(t) for t in texts] == [reference(t) for t in texts]


def test_visible_and_cjk_counts_of_the_filters_match_the_regex_definitions():
    """min_chars counts characters that are not ``\\s``; min_cjk_share CJK ideographs: the faster counts in
    clean_chunk drop exactly what the definitions drop."""
    import re
    from collections import Counter

    from nbkit.corpus import manifest as mf
    from nbkit.corpus.readers import Chunk
    from nbkit.corpus.worker import clean_chunk

    texts = ["你好 世界\u3000！", "ab\u00a0cd\u2003e", "abcdefghij中", "中文中文abcdefghijkl", "𠀀𠀁𠀂𠀃𠀄x", " \t\n\x1c啊啊啊啊"]
    s = {**mf.DEFAULTS, "min_chars": 5, "min_cjk_share": 0.2, "cjk_share_by_source": {},
         "unicode_normalization": "none"}
    got, counts, *_ = clean_chunk(Chunk(0, "txt", 1, [t.encode() for t in texts]), s, "x.txt")
    cjk = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")
    want, want_counts = [], Counter()
    for t in texts:
        visible = len(t) - sum(len(m) for m in re.findall(r"\s+", t))
        if visible < 5:
            want_counts["too_short"] += 1
        elif len(cjk.findall(t)) < 0.2 * visible:
            want_counts["non_cjk"] += 1
        else:
            want.append(t)
    assert got == want
    assert (counts["too_short"], counts["non_cjk"]) == (want_counts["too_short"], want_counts["non_cjk"])
    assert want_counts["too_short"] and want_counts["non_cjk"] and want   # each path taken
