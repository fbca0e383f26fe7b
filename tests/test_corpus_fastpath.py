"""nbkit.corpus.fastpath gives the tokenizer's own ids (table lookup for CJK and punctuation), with word starts."""
from __future__ import annotations

import json
import unicodedata

import numpy as np
import pytest

from nbkit.corpus.fastpath import encode_texts, lookup_table
from nbkit.corpus.segment import cutter
from tests.corpus_helpers import review_lines

MIXED = ["ＧＤＰ增长７．８％左右 iPhone 6s Plus很好用!!", "café naïve 東京 ½ ㎡ \u0301a 𠀀𠀁 emoji😀 tab\there",
         "İstanbul ǅ ß ﬁne", "“引号”《书名》、顿号…省略——破折号", "控制\x07字符\ufffd与\u200b零宽", "   ", "a",
         "数字12345和English混排，see https://example.com/a_b?x=1", "乾隆皇帝與臺灣", "ＡＢＣ"]


@pytest.fixture(scope="module")
def tok_file(tmp_path_factory):
    from nbkit.text.tokenizer import train_wordpiece

    d = tmp_path_factory.mktemp("tok")
    train_wordpiece(review_lines(400) + MIXED + WIDE[:2], 300, d, model_max_length=128)
    return str(d / "tokenizer.json")


def _trained(tmp_path_factory, **kw) -> str:
    from nbkit.text.tokenizer import train_wordpiece

    d = tmp_path_factory.mktemp("tok")
    train_wordpiece(review_lines(400) + MIXED + WIDE[:2], 300, d, model_max_length=128, **kw)
    return str(d / "tokenizer.json")


#: full-width letters, digits and punctuation, compatibility ideographs, kana (half-width too), Greek ";"
WIDE = ["ＭＰ３播放器音质很好！售价１９９元（含运费）", "【限时】《三体》，“好书”；真的？！", "豈更車賈滑串句龜",
        "ﾊﾟﾋﾟﾌﾟ ぱぴぷ パピプ", "問題\u037e答案\u0387完", "Ｃａｆé ＮＡÏＶＥ"]


def texts(nfkc: bool = False):
    """Raw test texts; NFKC-normalised as the store's worker does for an NFKC tokenizer (``nfkc=True``)."""
    raw = review_lines(300, 400, which="pos") + MIXED + WIDE
    return [unicodedata.normalize("NFKC", t) for t in raw] if nfkc else raw


def split(ids, counts):
    off = np.concatenate([[0], np.cumsum(counts)])
    return [ids[off[i]:off[i + 1]].tolist() for i in range(len(counts))]


def test_ids_equal_the_tokenizers_own(tok_file):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tok_file)
    table = lookup_table(tok_file)
    assert (table >= 0).sum() > 20000  # CJK ideographs and punctuation are looked up
    ts = texts()
    ids, wst, counts = encode_texts(ts, tok, table, cutter("jieba", keep_space=True))
    assert split(ids, counts) == [e.ids for e in tok.encode_batch(ts, add_special_tokens=False)]
    assert len(wst) == len(ids) and counts[ts.index("   ")] == 0
    assert json.loads(open(tok_file, encoding="utf-8").read())["normalizer"]["type"] == "BertNormalizer"  # no NFKC


@pytest.mark.parametrize("kw", [{"nfkc": True}, {"strip_accents": True}], ids=["nfkc", "strip_accents"])
def test_ids_equal_the_tokenizers_own_for_other_normalizers(tmp_path_factory, kw):
    """NFKC (the worker normalises first, as the store does) and NFD-based accent stripping (table skips
    the characters NFD changes: compatibility ideographs, U+037E) give the tokenizer's own ids too."""
    from tokenizers import Tokenizer

    path = _trained(tmp_path_factory, **kw)
    tok = Tokenizer.from_file(path)
    ts = texts(nfkc=bool(kw.get("nfkc")))
    ids, _, counts = encode_texts(ts, tok, lookup_table(path), cutter("jieba", keep_space=True))
    assert split(ids, counts) == [e.ids for e in tok.encode_batch(ts, add_special_tokens=False)]


def test_word_starts_follow_the_segmenter_words(tok_file):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tok_file)
    ts = ["我爱北京天安门", "他用iPhone6s拍照"]
    ids, wst, counts = encode_texts(ts, tok, lookup_table(tok_file), cutter("jieba", keep_space=True))
    first, second = np.split(wst, [counts[0]])
    assert first.tolist() == [1, 1, 1, 0, 1, 0, 0]
    words = cutter("jieba")(ts[1])
    toks = tok.encode(ts[1], add_special_tokens=False)
    # a token starts a word exactly when its first character begins a word that no earlier token covered
    word_starts = np.cumsum([0] + [len(w) for w in words[:-1]])
    expected = [1 if o[0] in set(word_starts.tolist()) else 0 for o in toks.offsets]
    assert second.tolist() == expected and len(second) == len(toks.ids)


def test_other_pipelines_go_through_the_tokenizer(tmp_path, tok_file):
    from tokenizers import Tokenizer, pre_tokenizers

    tok = Tokenizer.from_file(tok_file)
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # not BERT's: CJK runs are not split per character
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    table = lookup_table(str(path))
    assert (table >= 0).sum() == 0
    ts = texts()
    ids, _, counts = encode_texts(ts, tok, table, cutter("jieba", keep_space=True))
    assert split(ids, counts) == [e.ids for e in tok.encode_batch(ts, add_special_tokens=False)]
    assert json.loads(path.read_text())["pre_tokenizer"]["type"] == "Whitespace"
