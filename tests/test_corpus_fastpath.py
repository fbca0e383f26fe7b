"""nbkit.corpus.fastpath gives the tokenizer's own ids (table lookup for CJK and punctuation), with word starts."""
from __future__ import annotations

import json
import unicodedata

import numpy as np
import pytest

from nbkit.corpus.fastpath import continuation_mask, encode_texts, lookup_table
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


def test_passes_of_a_few_characters_give_the_one_pass_result(tok_file, monkeypatch):
    """A chunk is encoded in passes of PASS_CHARS characters (memory bounded by the pass, not the chunk: one long
    line cut into many pieces); whole texts per pass, so the ids, word starts and counts are the one pass's."""
    from tokenizers import Tokenizer

    from nbkit.corpus import fastpath

    tok, table, cut = Tokenizer.from_file(tok_file), lookup_table(tok_file), cutter("jieba", keep_space=True)
    ts = texts()
    whole = encode_texts(ts, tok, table, cut)
    calls = []
    real = fastpath._encode_pass
    monkeypatch.setattr(fastpath, "_encode_pass", lambda g, *a: calls.append(len(g)) or real(g, *a))
    monkeypatch.setattr(fastpath, "PASS_CHARS", 500)
    passed = encode_texts(ts, tok, table, cut)
    assert len(calls) > 10 and sum(calls) == len(ts)
    assert all((a == b).all() and a.dtype == b.dtype for a, b in zip(whole, passed))


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


#: mixed Chinese/Latin/digits/punctuation, full-width forms, and characters outside the 21,128 vocabulary
#: ([UNK]: 𠀀 beyond the BMP, 龥 past its CJK range, ☃, Cyrillic, a Latin word of letters the vocabulary lacks)
BERT_MIXED = ["我在2024年买了iPhone15，花了５９９９元！", "ＧＤＰ增长７．８％左右（同比）", "龥𠀀☃Жизнь élan ǅ",
              "Hello, World!!! 3.14159 -- https://example.com/a_b?x=1&y=2", "“引号”《书名》、顿号…省略——破折号",
              "[SEP] 与 [UNK] 写在文本里", "ＡＢＣ abc Ａbc１２３", "  \t  ", "数字12345和English混排"]


@pytest.fixture(scope="module")
def bert_file(tmp_path_factory):
    """The bert-base-chinese stand-in's tokenizer.json as a store copies it (AutoTokenizer, save_pretrained)."""
    from nbkit.corpus.vocab import _load_given
    from nbkit.models.standin import VOCAB_SIZE, build_standin

    d = build_standin(tmp_path_factory.mktemp("bert") / "ckpt")
    tok = _load_given(str(d))
    assert len(tok) == VOCAB_SIZE == 21128
    saved = tmp_path_factory.mktemp("saved")
    tok.save_pretrained(str(saved))
    return str(saved / "tokenizer.json")


def test_bert_vocabulary_takes_the_fast_path_with_its_own_ids(bert_file):
    """bert-base-chinese's 21,128-token vocabulary: CJK and punctuation by table (not bypassed), and the ids are
    the tokenizer's own on mixed text, [UNK] and full-width characters included (the literal "[SEP]" aside)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(bert_file)
    table = lookup_table(bert_file)
    unk = tok.token_to_id("[UNK]")
    assert (table >= 0).sum() > 20000 and table[ord("我")] == tok.token_to_id("我") and table[ord("龥")] == unk
    ts = texts() + BERT_MIXED
    cut = cutter("jieba", keep_space=True)
    ids, wst, counts = encode_texts(ts, tok, table, cut)
    want = [e.ids for e in tok.encode_batch(ts, add_special_tokens=False)]
    got = split(ids, counts)
    sep = ts.index("[SEP] 与 [UNK] 写在文本里")
    assert got[:sep] + got[sep + 1:] == want[:sep] + want[sep + 1:]
    assert unk in got[ts.index("龥𠀀☃Жизнь élan ǅ")] and counts[ts.index("  \t  ")] == 0
    sep_id = tok.token_to_id("[SEP]")   # a written "[SEP]" stays its characters (the tokenizer makes it the token)
    assert sep_id in want[sep] and sep_id not in got[sep] and got[sep][0] == tok.token_to_id("[")
    none_ids, none_wst, none_counts = encode_texts(ts, tok, table, None, continuation_mask(bert_file))
    assert np.array_equal(none_ids, ids) and np.array_equal(none_counts, counts)


def test_without_a_segmenter_word_starts_are_the_tokenizers_words(tok_file):
    """segmenter="none": every token starts a word except a ``##`` continuation (BERT's own words)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tok_file)
    ts = texts()
    mask = continuation_mask(tok_file)
    ids, wst, counts = encode_texts(ts, tok, lookup_table(tok_file), None, mask)
    encs = tok.encode_batch(ts, add_special_tokens=False)
    assert split(ids, counts) == [e.ids for e in encs]
    want = [0 if t.startswith("##") else 1 for e in encs for t in e.tokens]
    assert wst.tolist() == want and 0 in want and mask.sum() > 0


def test_a_segmenter_that_drops_characters_gives_one_word_per_character(tok_file):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tok_file)
    ts = ["我爱北京天安门", "他用 iPhone 拍照", "北京大学"]
    jieba_cut = cutter("jieba", keep_space=True)

    def dropping(t):   # drops the spaces of the second text: its words no longer join to it
        return [w for w in jieba_cut(t) if not w.isspace()]

    _, wst, counts = encode_texts(ts, tok, lookup_table(tok_file), dropping)
    first, second, third = np.split(wst, np.cumsum(counts)[:-1])
    assert first.tolist() == [1, 1, 1, 0, 1, 0, 0] and third.tolist() == [1, 0, 0, 0]
    chars = [o[0] for o in tok.encode(ts[1], add_special_tokens=False).offsets]
    assert second.tolist() == [1] * len(chars)   # one word per character: every token a start
