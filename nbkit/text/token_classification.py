"""Token classification encoding: tagged characters -> sub-tokens with aligned labels, long sentences in windows.

Each item is ``{"tokens": [...], "tags": [...]}`` (one BIO tag per token; nbkit's NER data has one Chinese
character per token). Text is read through :func:`char_tokenizer`, every character its own pre-token, so a plain
string and the same characters as words give the same ids. The first sub-token of a word carries its label, the
others ``-100`` (Devlin et al. 2019, section 5.3). A sentence longer than the block becomes windows of ``max_length``
tokens overlapping by ``stride``, the last ending at the sentence's end; prediction goes through transformers'
pipeline with the same ``stride`` instead (:func:`nbkit.evaluate.inference.predict_tags`, docs/ner.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from nbkit.errors import ConfigError, DataError
from nbkit.text.mlm import IGNORE_INDEX, check_length

#: how ``transformers``' token-classification pipeline turns sub-token predictions into a word's tag: "first",
#: the word's first sub-token, the only one training labels (the others are -100); "simple" would let untrained
#: later sub-tokens of a Latin or digit word vote and split or start entities there (tests/test_ner_aggregation.py)
AGGREGATION = "first"

#: what :func:`char_tokenizer` cuts text into before the vocabulary is looked up: each character (one Unicode
#: code point, as Python's ``list(text)``) alone; the tokenizer's own pre-tokenizer then drops whitespace
CHAR_SPLIT = {"type": "Split", "pattern": {"Regex": "."}, "behavior": "Isolated", "invert": False}


def char_tokenizer(tokenizer):
    """The fast ``tokenizer`` with every character its own pre-token, as a generic ``PreTrainedTokenizerFast`` (a
    ``BertTokenizer`` class would rebuild BERT's pre-tokenizer, which keeps ``1998`` whole): ``tok(text)`` gives the ids
    of ``tok(list(text), is_split_into_words=True)``, offsets pointing at characters of ``text``. Returned as it is
    when already split so, else a copy with the same vocabulary, special tokens and ``model_max_length``.

    Raises:
        ConfigError: a slow tokenizer (no ``tokenizer.json`` pipeline to change).
    """
    import json

    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from nbkit import jsonio

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not getattr(tokenizer, "is_fast", False):
        raise ConfigError("token classification needs a fast tokenizer (word ids, offsets); load it with "
                          "AutoTokenizer.from_pretrained(path) (use_fast=True, the default)")
    spec = json.loads(backend.to_str())
    pre = spec.get("pre_tokenizer")
    if pre and pre.get("type") == "Sequence" and pre["pretokenizers"][:1] == [CHAR_SPLIT]:
        return tokenizer
    spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [CHAR_SPLIT, *([pre] if pre else [])]}
    special = {k: v for k, v in tokenizer.special_tokens_map.items() if k != "additional_special_tokens"}
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(jsonio.dumps(spec)),
                                   model_max_length=tokenizer.model_max_length, **special)


@dataclass
class TokenEncoding:
    """What :func:`encode_token_classification` made of the items.

    ``dataset``: windows with ``input_ids``, ``attention_mask`` and ``labels`` (unpadded, ``[CLS] ... [SEP]``; its
    ``describe_example`` a :class:`WindowOrigin`). ``windows``: per row ``(item index, first sub-token)``.
    ``word_ids``: per item, its sub-tokens' word index. ``report``: the counts.
    """

    dataset: object
    windows: list[tuple[int, int]]
    word_ids: list[list[int]]
    report: dict = field(default_factory=dict)


@dataclass(frozen=True)
class WindowOrigin:
    """Where each window of :func:`encode_token_classification` comes from: ``origin(i)`` -> ``"sentence 12 (id
    'train.conll:40'), window 2 of 3 (sub-tokens 96-221)"``; picklable, carried as the dataset's ``describe_example``
    for the loop's non-finite-loss message. ``ids``: per item, its ``id`` or None; ``windows``: as in
    :class:`TokenEncoding`; ``body``: sub-tokens per window between ``[CLS]`` and ``[SEP]``.
    """

    ids: tuple
    windows: tuple[tuple[int, int], ...]
    body: int

    def __call__(self, i: int) -> str:
        item, start = self.windows[i]
        mine = [s for k, s in self.windows if k == item]           # this sentence's windows, in order
        ident = f" (id {self.ids[item]!r})" if self.ids[item] is not None else ""
        where = (f", window {mine.index(start) + 1} of {len(mine)} (sub-tokens {start}-{start + self.body - 1})"
                 if len(mine) > 1 else "")
        return f"sentence {item}{ident}{where}"


def window_starts(n_tokens: int, body: int, stride: int) -> list[int]:
    """First sub-token of each window over ``n_tokens`` sub-tokens: windows of ``body`` overlapping by ``stride``, the
    last one ending at the last sub-token; ``[0]`` when everything fits.

    Raises:
        ConfigError: ``stride`` not in ``0 .. body - 1``.
    """
    if not 0 <= stride < body:
        raise ConfigError(f"stride={stride} must be between 0 and {body - 1} (the tokens of a window between "
                          "[CLS] and [SEP], minus one); use e.g. a quarter of max_length")
    return [0] if n_tokens <= body else [*range(0, n_tokens - body, body - stride), n_tokens - body]


def encode_token_classification(items, tokenizer, label2id: dict, max_length: int, stride: int | None = None,
                                tokens_key: str = "tokens", tags_key: str = "tags") -> TokenEncoding:
    """Tokenize tagged items into windows of at most ``max_length`` sub-tokens (``[CLS]``/``[SEP]`` included).

    ``items``: dicts with ``tokens`` (list of str) and ``tags`` (one key of ``label2id`` per token; without them labels
    are -100, for prediction). ``tokenizer``: fast; read as :func:`char_tokenizer` makes it. Longer sentences are
    windowed, never cut; ``stride``: sub-tokens two neighbouring windows share (None: a quarter of the window).

    Returns a :class:`TokenEncoding` whose ``report`` has ``n_items``, ``n_windows``, ``n_windowed`` (items in more
    than one window), ``max_length``, ``stride``, ``n_words``, ``n_subtokens``, ``n_multi_subtoken_words`` (only their
    first sub-token is labelled), ``n_extra_subtokens``, ``n_words_without_token`` (words the tokenizer drops, e.g. a
    space), ``n_words_unk`` (words read as ``[UNK]``) with ``unk_words`` (the 5 most frequent), and
    ``subtokens_p50/p95/max`` per item.

    Raises:
        ConfigError: ``max_length`` above the tokenizer's limit or below 3, a bad ``stride``, a slow tokenizer.
        DataError: no items, tokens and tags of different lengths, or a tag not in ``label2id`` (item named).
    """
    from collections import Counter

    import numpy as np
    from datasets import Dataset

    check_length("max_length", max_length, tokenizer)
    tokenizer = char_tokenizer(tokenizer)                          # ConfigError for a slow one
    items = list(items)
    if not items:
        raise DataError("encode_token_classification got no items; check that the split is not empty")
    body = max_length - 2
    stride = body // 4 if stride is None else stride
    window_starts(0, body, stride)                                  # a bad stride raises before any work
    words = [list(it[tokens_key]) for it in items]
    for i, (it, w) in enumerate(zip(items, words)):
        tags = it.get(tags_key)
        if tags is not None and len(tags) != len(w):
            raise DataError(f"item {i} ({it.get('id', i)!r}) has {len(w)} tokens but {len(tags)} tags; give one tag "
                            "per token")
        if not w:
            raise DataError(f"item {i} ({it.get('id', i)!r}) has no tokens; drop empty sentences first")
    enc = tokenizer(words, is_split_into_words=True, add_special_tokens=False, verbose=False)
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    rows = {"input_ids": [], "attention_mask": [], "labels": []}
    windows, all_wids, lengths = [], [], []
    n_multi = n_dropped = n_windowed = 0
    unk_id, unk_words = tokenizer.unk_token_id, Counter()
    for i, it in enumerate(items):
        ids = enc["input_ids"][i]
        wids = enc.word_ids(i)                                      # (n_subtokens,) word index per sub-token
        tags = it.get(tags_key)
        labels = []
        for j, w in enumerate(wids):
            if tags is None or (j > 0 and wids[j - 1] == w):        # a later sub-token of the same word
                labels.append(IGNORE_INDEX)
                continue
            tag = tags[w]
            if tag not in label2id:
                raise DataError(f"item {i} ({it.get('id', i)!r}) has tag {tag!r} at token {w}, not one of the "
                                f"labels {sorted(label2id)}; build label2id from the training split's labels")
            labels.append(label2id[tag])
        seen = set(wids)
        n_dropped += len(words[i]) - len(seen)
        if unk_id is not None:                                      # a word whose first sub-token is [UNK]
            unk_words.update(words[i][w] for j, w in enumerate(wids)
                             if ids[j] == unk_id and (j == 0 or wids[j - 1] != w))
        n_multi += len(wids) - len(seen)                            # sub-tokens beyond one per word
        starts = window_starts(len(ids), body, stride)
        n_windowed += len(starts) > 1
        for s in starts:
            chunk = ids[s:s + body]
            rows["input_ids"].append([cls_id, *chunk, sep_id])
            rows["attention_mask"].append([1] * (len(chunk) + 2))
            rows["labels"].append([IGNORE_INDEX, *labels[s:s + body], IGNORE_INDEX])
            windows.append((i, s))
        all_wids.append(list(wids))
        lengths.append(len(ids) + 2)
    multi_words = sum(sum(1 for c in Counter(w).values() if c > 1) for w in all_wids)
    p50, p95 = np.percentile(lengths, [50, 95])
    report = {"n_items": len(items), "n_windows": len(windows), "n_windowed": n_windowed, "max_length": max_length,
              "stride": stride, "n_words": sum(len(w) for w in words), "n_subtokens": sum(map(len, all_wids)),
              "n_multi_subtoken_words": multi_words, "n_extra_subtokens": n_multi,
              "n_words_without_token": n_dropped, "n_words_unk": sum(unk_words.values()),
              "unk_words": [w for w, _ in unk_words.most_common(5)], "subtokens_p50": float(p50),
              "subtokens_p95": float(p95), "subtokens_max": int(max(lengths))}
    dataset = Dataset.from_dict(rows)
    dataset.describe_example = WindowOrigin(tuple(it.get("id") for it in items), tuple(windows), body)
    return TokenEncoding(dataset, windows, all_wids, report)


def token_classification_collator(tokenizer, pad_to_multiple_of: int | None = None):
    """Pad :func:`encode_token_classification` rows per batch (``DataCollatorForTokenClassification``):
    ``input_ids``, ``attention_mask`` and ``labels`` (B, T), labels padded with -100, T the longest row."""
    from transformers import DataCollatorForTokenClassification

    return DataCollatorForTokenClassification(tokenizer, padding="longest", pad_to_multiple_of=pad_to_multiple_of,
                                              label_pad_token_id=IGNORE_INDEX, return_tensors="pt")
