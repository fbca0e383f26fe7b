"""Chinese WordPiece training in BERT's Chinese layout, and held-out statistics.

BERT's normalizer (each CJK character its own word, lowercase, accents kept), pre-tokenizer,
``##`` WordPiece, ``[CLS] A [SEP]`` and ``[PAD] [UNK] [CLS] [SEP] [MASK]`` as ids 0-4: all pieces
``BertTokenizer`` rebuilds from the saved flags, so every loader gives the same ids. Every character
is kept (``limit_alphabet=None``; the library's 1,000 turns rare characters into ``[UNK]``). NFKC is
off by default: loaders that rebuild the normalizer drop it.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from nbkit import jsonio
from nbkit.errors import ConfigError, DataError
from nbkit.text.wordpiece_order import FAR_BELOW, check_vocab_size, fixed_token_order

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_BATCH = 1000  # texts handed to the Rust trainer per batch


def with_nfkc(normalizer):
    """``normalizers.Sequence([NFKC(), normalizer])``."""
    from tokenizers import normalizers

    return normalizers.Sequence([normalizers.NFKC(), normalizer])


def train_wordpiece(
    texts: Iterable[str],
    vocab_size: int,
    out_dir: str | Path,
    model_max_length: int,
    limit_alphabet: int | None = None,
    min_frequency: int = 2,
    strip_accents: bool = False,
    lowercase: bool = True,
    nfkc: bool = False,
):
    """Train a WordPiece tokenizer on ``texts`` (read once, held in memory) and save it in ``out_dir`` with
    ``training.json``; the same texts and settings give the same ids.

    ``vocab_size``: target in tokens, specials included (every character is kept, so it can come out larger; a
    ``UserWarning`` when merges run out far below it). ``model_max_length``: the model's position limit, respected by
    truncation. ``limit_alphabet``: most distinct characters kept (None: all). ``min_frequency``: occurrences a merge
    needs (single characters always stay). ``strip_accents`` is off so that decoding gives the text back.
    ``nfkc``: NFKC before BERT's normalizer; then only ``AutoTokenizer``/``PreTrainedTokenizerFast`` reproduce the ids.

    Returns an ``NbkitTokenizerFast`` (its ``save_pretrained`` writes the complete file set).

    Raises:
        ConfigError: ``vocab_size`` not above the 5 specials or above
            :data:`~nbkit.text.wordpiece_order.MAX_VOCAB_SIZE`, ``model_max_length`` not above 2,
            ``limit_alphabet`` below 1.
        DataError: no non-empty text, or a non-string item.
        WriteError: ``out_dir``'s disk full or not writable (nothing half-written is left).
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import BertTokenizer

    from nbkit.text.tokenizer_files import nbkit_tokenizer_class

    check_vocab_size(vocab_size, len(SPECIAL_TOKENS))
    if model_max_length <= 2:
        raise ConfigError(f"model_max_length={model_max_length} must exceed 2 ([CLS] and [SEP]); use e.g. 128 or 512")
    if limit_alphabet is not None and limit_alphabet < 1:
        raise ConfigError(f"limit_alphabet={limit_alphabet} must be positive, or None to keep every character")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    backend = Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix="##"))
    bert = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=strip_accents,
                                      lowercase=lowercase)
    backend.normalizer = with_nfkc(bert) if nfkc else bert
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece(prefix="##")
    kept = []
    for text in texts:
        if not isinstance(text, str):
            raise DataError(f"train_wordpiece expects strings, got {type(text).__name__}; "
                            "pass a column of text, e.g. dataset['text']")
        if text.strip():
            kept.append(text)
    if not kept:
        raise DataError("train_wordpiece got no non-empty text; check the corpus column and filters")
    chars = set().union(*kept)
    # ids of the continuation tokens fixed before training: the same vocabulary every time
    continuation, alphabet = fixed_token_order(backend, kept, limit_alphabet)
    # The Python binding rejects limit_alphabet=None but leaves the Rust default (no limit) when it is omitted.
    limit = {} if limit_alphabet is None else {"limit_alphabet": limit_alphabet, "initial_alphabet": alphabet}
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                        special_tokens=[*SPECIAL_TOKENS, *continuation],
                                        continuing_subword_prefix="##", show_progress=False, **limit)
    t0 = time.perf_counter()
    backend.train_from_iterator((kept[i:i + _BATCH] for i in range(0, len(kept), _BATCH)), trainer=trainer)
    seconds = time.perf_counter() - t0

    vocab = backend.get_vocab()  # the continuation "special" tokens become plain entries below
    if len(vocab) < FAR_BELOW * vocab_size:
        import warnings

        cut = (f" limit_alphabet={limit_alphabet} kept {limit_alphabet:,} of them, and" if limit_alphabet is not None
               and len(chars) > limit_alphabet else "")
        warnings.warn(
            f"the trained vocabulary has {len(vocab):,} tokens, far below vocab_size={vocab_size:,}: the corpus "
            f"({len(kept):,} texts, {len(chars):,} distinct characters;{cut} no more pairs occurring "
            f">= min_frequency={min_frequency} times) has nothing more to merge (each Chinese character is its own "
            "word, so merges happen only inside Latin words and digit runs). More text, or a smaller vocab_size, "
            "fits it.", UserWarning, stacklevel=2)
    # BertTokenizer builds BERT's pipeline around the trained vocabulary, saved as a generic fast tokenizer so
    # that AutoTokenizer keeps tokenizer.json's pipeline as saved
    bert = BertTokenizer(vocab=vocab, do_lower_case=lowercase, strip_accents=strip_accents,
                         tokenize_chinese_chars=True, model_max_length=model_max_length)
    pipeline = bert.backend_tokenizer
    if nfkc:
        pipeline.normalizer = with_nfkc(pipeline.normalizer)
    tokenizer = nbkit_tokenizer_class()(
        tokenizer_object=pipeline, model_max_length=model_max_length,
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],  # BERT's, segment ids included
        **{f"{role}_token": tok for role, tok in zip(("pad", "unk", "cls", "sep", "mask"), SPECIAL_TOKENS)})
    from nbkit.atomic import atomic_dir

    with atomic_dir(out_dir, replace=False, what="tokenizer") as tmp:  # WriteError when the disk is full
        tokenizer.save_pretrained(str(tmp))
    info = {"n_texts": len(kept), "n_chars": sum(map(len, kept)), "alphabet_size": len(chars),
            "vocab_size_requested": vocab_size, "vocab_size": len(vocab), "limit_alphabet": limit_alphabet,
            "min_frequency": min_frequency, "nfkc": nfkc, "model_max_length": model_max_length,
            "train_seconds": round(seconds, 3)}
    jsonio.write_json(out_dir / "training.json", info)
    return tokenizer


def tokenizer_stats(tokenizer, heldout_texts: Iterable[str]) -> dict[str, Any]:
    """A tokenizer measured on held-out text: ``vocab_size``, ``n_texts``, ``n_tokens``, ``unk_rate``
    (0-1 of tokens), ``chars_per_token`` (non-whitespace characters per token) and
    ``length_p50/p95/p99/max`` (tokens per text, without ``[CLS]``/``[SEP]``).

    Raises:
        DataError: no non-empty held-out text.
    """
    import numpy as np

    texts = [t for t in heldout_texts if t and t.strip()]
    if not texts:
        raise DataError("tokenizer_stats got no non-empty held-out text; pass the validation split's text column")
    lengths, n_unk = [], 0
    for i in range(0, len(texts), _BATCH):
        enc = tokenizer(texts[i:i + _BATCH], add_special_tokens=False, verbose=False)["input_ids"]  # untruncated
        lengths += map(len, enc)
        n_unk += sum(ids.count(tokenizer.unk_token_id) for ids in enc)
    n_chars = sum(1 for t in texts for c in t if not c.isspace())
    arr = np.asarray(lengths)
    n_tokens = int(arr.sum())
    p50, p95, p99 = np.percentile(arr, [50, 95, 99])
    return {"vocab_size": len(tokenizer), "n_texts": len(lengths), "n_tokens": n_tokens,
            "unk_rate": n_unk / n_tokens if n_tokens else 0.0,
            "chars_per_token": n_chars / n_tokens if n_tokens else 0.0,
            "length_p50": float(p50), "length_p95": float(p95), "length_p99": float(p99), "length_max": int(arr.max())}


#: the ``[UNK]`` share (0-1 of tokens) above which training on a corpus is refused (:func:`check_unk_share`)
UNK_LIMIT = 0.05


def check_unk_share(tokenizer, texts: Iterable[str] | None = None, ids: Iterable[Sequence[int]] | None = None,
                    allow: bool = False, what: str = "the corpus") -> dict[str, Any]:
    """The ``[UNK]`` share of a sample of what training will read, refused above :data:`UNK_LIMIT` (a model trained on
    ``[UNK]`` learns nothing, and its loss falls all the same). ``texts``: raw text; ``ids``: token ids this tokenizer
    made (a prepared store), when there is no text. ``allow``: warn instead (``PretrainConfig(allow_unk=True)``).
    Returns ``{"unk_share", "n_tokens", "examples"}`` (up to 3 characters of ``texts`` that become ``[UNK]``).

    Raises:
        DataError: the share is above :data:`UNK_LIMIT` and not ``allow`` (the message names the likely cause, a
            ``BertTokenizerFast(vocab_file=...)`` of transformers 5 or too small an alphabet, and the fixes).
    """
    import warnings

    unk_id = tokenizer.unk_token_id
    if unk_id is None:                                   # byte-level BPE: nothing is unknown
        return {"unk_share": 0.0, "n_tokens": None, "examples": []}
    examples: list[str] = []
    if texts is not None:
        texts = [t for t in texts if t and t.strip()]
        if not texts:
            return {"unk_share": 0.0, "n_tokens": 0, "examples": []}
        stats = tokenizer_stats(tokenizer, texts)
        share, n_tokens = stats["unk_rate"], stats["n_tokens"]
        if share > UNK_LIMIT:
            chars = dict.fromkeys(c for t in texts for c in t if not c.isspace())   # distinct, in order
            unknown = (c for c in chars if tokenizer(c, add_special_tokens=False)["input_ids"] == [unk_id])
            examples = list(islice(unknown, 3))
    else:
        rows = [list(r) for r in ids or ()]
        n_tokens = sum(map(len, rows))
        share = sum(1 for r in rows for i in r if i == unk_id) / n_tokens if n_tokens else 0.0
    out = {"unk_share": share, "n_tokens": n_tokens, "examples": examples}
    if share <= UNK_LIMIT:
        return out
    shown = (f"e.g. {', '.join(repr(c) for c in examples)} become {tokenizer.unk_token}" if examples else
             "the store holds ids only: tokenizer.tokenize(a line of your corpus) shows which characters")
    message = (f"{share:.1%} of {what}'s tokens ({n_tokens:,} sampled) are {tokenizer.unk_token}, above "
               f"{UNK_LIMIT:.0%} ({shown}): a model trained on it learns nothing of that text. Likely cause: the "
               "tokenizer files do not read this text, e.g. saved from transformers 5's "
               "BertTokenizerFast(vocab_file=...) or BertTokenizer(vocab_file=...) (both map every Chinese "
               "character to [UNK]), or a vocabulary trained with too small an alphabet. Fix: load the tokenizer "
               "with AutoTokenizer.from_pretrained(dir) / BertTokenizer.from_pretrained(dir) from a folder holding "
               "the vocab.txt (delete the tokenizer.json saved from the vocab_file= tokenizer first) and "
               "save_pretrained it beside the checkpoint, or retrain it (nbkit.text.train_wordpiece); or, if this "
               "share is right for your text, go on with PretrainConfig(allow_unk=True) (--allow-unk).")
    if not allow:
        raise DataError(message)
    warnings.warn(message, UserWarning, stacklevel=2)
    return out


def save_stats(stats: dict[str, Any], out_dir: str | Path) -> Path:
    """Write ``stats`` to ``out_dir/stats.json`` (strict JSON, NaN -> null); return the path."""
    path = Path(out_dir) / "stats.json"
    jsonio.write_json(path, stats)
    return path
