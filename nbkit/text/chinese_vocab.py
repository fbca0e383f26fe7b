"""bert-base-chinese's 21,128-token vocabulary as a code-point WordPiece, built locally (no download): the
stand-in checkpoints (:mod:`nbkit.models.standin`) and the corpus preparation's estimate use it.
"""
from __future__ import annotations

VOCAB_SIZE = 21128   # bert-base-chinese's vocabulary
SPECIALS = ["[PAD]", *(f"[unused{i}]" for i in range(1, 100)), "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<S>", "<T>"]
PUNCT = "，。！？、；：“”‘’（）《》【】…—～·「」『』〈〉％＋"


def chinese_vocab() -> list[str]:
    """21,128 tokens in bert-base-chinese's order of kinds: ``[PAD]``, ``[unused1..99]``, ``[UNK] [CLS] [SEP]
    [MASK] <S> <T>`` (ids 0-105), ASCII, Chinese punctuation, CJK characters from U+4E00, ``##`` + ASCII letters
    and digits. Single characters, as bert-base-chinese splits Chinese text."""
    ascii_ = [chr(c) for c in range(33, 127)]
    tail = ["##" + c for c in ascii_ if c.isalnum()]
    head = SPECIALS + ascii_ + list(PUNCT)
    n_cjk = VOCAB_SIZE - len(head) - len(tail)
    return head + [chr(0x4E00 + i) for i in range(n_cjk)] + tail


def bert_chinese_tokenizer(vocab: list[str]):
    """A ``tokenizers.Tokenizer`` over ``vocab`` (a list of tokens, index = id) as bert-base-chinese's
    ``tokenizer.json`` defines it: BERT's normalizer (no lowercasing, CJK characters split apart), WordPiece with
    ``##`` continuations, ``[CLS] $A [SEP]``.

    Raises:
        KeyError: ``vocab`` lacks ``[CLS]`` or ``[SEP]``.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    ids = {t: i for i, t in enumerate(vocab)}
    tok = Tokenizer(models.WordPiece(vocab=ids, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                lowercase=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    return tok
