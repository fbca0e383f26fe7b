"""Chinese-aware WordPiece tokenizer training and held-out statistics.

The pipeline is BERT's Chinese one (Devlin et al. 2019; the layout of ``bert-base-chinese``),
made only of pieces ``BertTokenizer`` rebuilds from the saved flags, so every standard loader gives
the same ids (nbkit lowercases and keeps accents; ``bert-base-chinese`` on the Hub says
``do_lower_case: false``, so Latin letters can get other ids there):

- ``BertNormalizer(clean_text, handle_chinese_chars=True, strip_accents, lowercase=True)``:
  drops control characters, puts spaces around every CJK ideograph, so each Chinese
  character is its own "word";
- ``BertPreTokenizer``: splits on whitespace and punctuation;
- ``WordPiece`` with the ``##`` continuation prefix (Latin words, digits);
- ``TemplateProcessing``: ``[CLS] A [SEP]`` and ``[CLS] A [SEP] B [SEP]``;
- special tokens ``[PAD] [UNK] [CLS] [SEP] [MASK]`` with ids 0-4.

Pitfall this module avoids: ``tokenizers``' ``BertWordPieceTokenizer.train``
defaults to ``limit_alphabet=1000``, which keeps only the 1,000 most frequent
characters. On People's Daily (4,687 distinct characters) that gives a
1,821-token vocabulary instead of 5,736, and every rarer character becomes
``[UNK]``: 7.65% of held-out tokens vs 0.03% (95/5 split by line, measured
with ``bench/tokenizer_alphabet.py``). Here ``limit_alphabet=None`` keeps every
character seen in training.

No Unicode NFKC step by default. People's Daily writes Latin letters and digits
full-width (``ＧＤＰ``, ``７．８％``) while reviews use ASCII; a tokenizer trained on
People's Daily *alone* without NFKC has no ASCII letter or digit and about 4 % of
review tokens become ``[UNK]`` (3.96 %; 0.42 % with NFKC). But notebook 01 trains on
the news *and* the training reviews, and there NFKC buys nothing measurable (vocab_size
8000, ``bench/tokenizer_alphabet.py`` on a shared 2-core CPU box, 2026-12-01, written to
``bench/results/tokenizer_nfkc_2026-12-01.json``:
NFKC on: vocabulary 7,424, test-review ``[UNK]`` 0.047 %, held-out news 0.022 %; off:
7,811, 0.048 %, 0.023 %). NFKC, on the other hand, cannot be expressed by
``BertTokenizer`` (which rebuilds ``BertNormalizer`` from the flags on load) or the slow
classes, so with it full-width text (``ＭＰ３``, ``１９９``, every ``，。！（）``) silently
tokenizes differently there. Without it every loader gives the same ids.
``nfkc=True`` remains an option: the saved files then say so (``unicode_normalization:
"NFKC"`` and a ``normalization_note`` naming the loaders that drop it, written by
:mod:`nbkit.text.tokenizer_files`), and such a tokenizer loads as itself only through
``AutoTokenizer`` / ``PreTrainedTokenizerFast`` (``tokenizer.json``).

Because each CJK character is its own word, WordPiece can only merge inside
Latin words and digit runs: on this corpus the vocabulary saturates near
5,700 tokens whatever ``vocab_size`` asks for.

Artifacts in ``out_dir``: the ``transformers`` tokenizer files
(``tokenizer.json``, ``tokenizer_config.json``, ``vocab.txt``), ``training.json`` (what was
trained on and how long it took) and, via :func:`save_stats`, ``stats.json``.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from nbkit import jsonio
from nbkit.errors import ConfigError, DataError
from nbkit.text.wordpiece_order import FAR_BELOW, check_vocab_size, fixed_token_order

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_BATCH = 1000  # texts handed to the Rust trainer per batch


def _build_backend(strip_accents: bool, lowercase: bool, nfkc: bool = False):
    """An untrained BERT-style ``tokenizers.Tokenizer`` (normalizer, pre-tokenizer, decoder)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix="##"))
    bert = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=strip_accents, lowercase=lowercase
    )
    tok.normalizer = with_nfkc(bert) if nfkc else bert
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def with_nfkc(normalizer):
    """``normalizers.Sequence([NFKC(), normalizer])``: width variants folded first."""
    from tokenizers import normalizers

    return normalizers.Sequence([normalizers.NFKC(), normalizer])


class _CountingBatches:
    """Stream ``texts`` to the trainer in lists of ``_BATCH``, counting as they pass.

    Counts texts, characters and distinct characters (the alphabet) without
    holding the corpus in memory; empty / whitespace-only texts are skipped.
    """

    def __init__(self, texts: Iterable[str]):
        self.texts = texts
        self.n_texts = 0
        self.n_chars = 0
        self.alphabet: set[str] = set()

    def __iter__(self) -> Iterator[list[str]]:
        batch: list[str] = []
        for text in self.texts:
            if not isinstance(text, str):
                raise DataError(
                    f"train_wordpiece expects strings, got {type(text).__name__}; "
                    "pass a column of text, e.g. dataset['text']"
                )
            if not text.strip():
                continue
            self.n_texts += 1
            self.n_chars += len(text)
            self.alphabet.update(text)
            batch.append(text)
            if len(batch) == _BATCH:
                yield batch
                batch = []
        if batch:
            yield batch


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
    """Train a BERT-style WordPiece tokenizer on Chinese text and save it.

    Args:
        texts: any iterable of strings (a list, a generator, a ``datasets``
            column); read once and held in memory (the continuation tokens are
            fixed before training, see :mod:`nbkit.text.wordpiece_order`), then
            handed to the trainer in batches of 1,000.
        vocab_size: target vocabulary size in tokens, special tokens included.
            Every character of the alphabet is always kept, so the result can
            be larger than this when the corpus has more distinct characters;
            it is smaller when the corpus runs out of merges (each CJK
            character is its own word), and a ``UserWarning`` names both sizes
            when it is below half the request.
        out_dir: directory for the tokenizer files (created if missing).
        model_max_length: the model's position limit in tokens (BERT's
            ``max_position_embeddings``); ``tokenizer(..., truncation=True)``
            and :func:`nbkit.text.mlm.make_blocks` respect it.
        limit_alphabet: keep at most this many distinct characters; ``None``
            (default) keeps all of them (see the module docstring for why).
        min_frequency: a merge (multi-character token) must occur at least
            this many times; it does not drop single characters.
        strip_accents: strip accents after NFD (``café`` -> ``cafe``). BERT's
            default follows ``lowercase``; it is off here so decoding gives the
            text back (it does not affect CJK characters).
        lowercase: lowercase Latin text (BERT's ``uncased`` models; ``bert-base-chinese`` says ``do_lower_case: false``).
        nfkc: fold width variants with Unicode NFKC before BERT's normalizer.
            Off by default: BERT's normalizer alone is what every loader rebuilds
            (``BertTokenizer``, the slow classes); with it only ``AutoTokenizer`` /
            ``PreTrainedTokenizerFast`` reproduce the ids (see the module docstring).

    Returns:
        A fast ``transformers`` tokenizer (``NbkitTokenizerFast``, a ``PreTrainedTokenizerFast``
        whose ``save_pretrained`` writes the complete file set: BERT's normalizer
        (NFKC in front with ``nfkc=True``), pre-tokenizer, WordPiece and ``[CLS] A [SEP]``
        templates) that ``AutoTokenizer``, ``BertTokenizer`` and ``BertTokenizerLegacy``
        ``.from_pretrained(out_dir)`` load back with identical ids (only the first with ``nfkc=True``).
        The same texts and settings give the same vocabulary, ids included
        (:mod:`nbkit.text.wordpiece_order` says why ``tokenizers`` alone does not).

    Raises:
        ConfigError: ``vocab_size`` not above the 5 special tokens or above
            :data:`~nbkit.text.wordpiece_order.MAX_VOCAB_SIZE` (the Rust trainer
            would abort the process), ``model_max_length`` not above 2.
        DataError: no non-empty text, or a non-string item.
        WriteError: ``out_dir``'s disk is full or not writable (path, free space, size needed named;
            the files are written beside it first, :func:`nbkit.atomic.atomic_dir`, and removed on failure).
    """
    from tokenizers import trainers
    from transformers import BertTokenizer

    from nbkit.text.tokenizer_files import nbkit_tokenizer_class

    check_vocab_size(vocab_size, len(SPECIAL_TOKENS))
    if model_max_length <= 2:
        raise ConfigError(f"model_max_length={model_max_length} must exceed 2 ([CLS] and [SEP]); use e.g. 128 or 512")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    backend = _build_backend(strip_accents=strip_accents, lowercase=lowercase, nfkc=nfkc)
    if limit_alphabet is not None and limit_alphabet < 1:
        raise ConfigError(f"limit_alphabet={limit_alphabet} must be positive, or None to keep every character")
    stream = _CountingBatches(texts)
    batches = list(stream)  # read once: checked, counted and batched on the way
    if stream.n_texts == 0:
        raise DataError("train_wordpiece got no non-empty text; check the corpus column and filters")
    # ids of the continuation tokens fixed before training: the same vocabulary every time
    continuation, alphabet = fixed_token_order(backend, (t for b in batches for t in b), limit_alphabet)
    # The Python binding rejects limit_alphabet=None but leaves the Rust
    # default (no limit) when the argument is omitted.
    limit = {} if limit_alphabet is None else {"limit_alphabet": limit_alphabet, "initial_alphabet": alphabet}
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[*SPECIAL_TOKENS, *continuation],
        continuing_subword_prefix="##",
        show_progress=False,
        **limit,
    )
    t0 = time.perf_counter()
    backend.train_from_iterator(iter(batches), trainer=trainer)
    seconds = time.perf_counter() - t0

    vocab = backend.get_vocab()  # the continuation "special" tokens become plain entries below
    if len(vocab) < FAR_BELOW * vocab_size:
        import warnings

        cut = (f" limit_alphabet={limit_alphabet} kept {limit_alphabet:,} of them, and" if limit_alphabet is not None
               and len(stream.alphabet) > limit_alphabet else "")
        warnings.warn(
            f"the trained vocabulary has {len(vocab):,} tokens, far below vocab_size={vocab_size:,}: the corpus "
            f"({stream.n_texts:,} texts, {len(stream.alphabet):,} distinct characters;{cut} no more pairs occurring "
            f">= min_frequency={min_frequency} times) has nothing more to merge (each Chinese character is its own "
            "word, so merges happen only inside Latin words and digit runs). More text, or a smaller vocab_size, "
            "fits it.", UserWarning, stacklevel=2)
    # The trained backend defines the vocabulary; BertTokenizer builds BERT's
    # normalizer/pre-tokenizer/decoder/[CLS]-[SEP] templates around it (NFKC in front
    # with nfkc=True), saved as a generic fast tokenizer so that AutoTokenizer keeps
    # tokenizer.json's pipeline as saved.
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
    info = {
        "n_texts": stream.n_texts,
        "n_chars": stream.n_chars,
        "alphabet_size": len(stream.alphabet),
        "vocab_size_requested": vocab_size,
        "vocab_size": len(vocab),
        "limit_alphabet": limit_alphabet,
        "min_frequency": min_frequency,
        "nfkc": nfkc,
        "model_max_length": model_max_length,
        "train_seconds": round(seconds, 3),
    }
    jsonio.write_json(out_dir / "training.json", info)
    return tokenizer


def tokenizer_stats(tokenizer, heldout_texts: Iterable[str]) -> dict[str, Any]:
    """Measure a tokenizer on held-out text (text it was not trained on).

    Lengths count tokens without ``[CLS]``/``[SEP]``; characters are counted
    with whitespace removed (Chinese has none; BERT's normaliser drops it).

    Returns:
        ``vocab_size`` (tokens), ``n_texts``, ``n_tokens``, ``unk_rate``
        (fraction of tokens that are ``[UNK]``, 0-1), ``chars_per_token``
        (non-whitespace characters / tokens; about 1.0 for Chinese, where each
        character is a token), and ``length_p50/p95/p99/max`` in tokens per
        text (``numpy.percentile``, linear interpolation).

    Raises:
        DataError: no non-empty held-out text.
    """
    import numpy as np

    unk_id = tokenizer.unk_token_id
    lengths: list[int] = []
    n_unk = n_chars = 0
    batch: list[str] = []

    def flush():
        nonlocal n_unk, n_chars
        enc = tokenizer(batch, add_special_tokens=False, verbose=False)["input_ids"]  # lengths may exceed the limit
        for text, ids in zip(batch, enc):
            lengths.append(len(ids))
            n_unk += sum(1 for i in ids if i == unk_id)
            n_chars += sum(1 for c in text if not c.isspace())
        batch.clear()

    for text in heldout_texts:
        if text and text.strip():
            batch.append(text)
            if len(batch) == _BATCH:
                flush()
    if batch:
        flush()
    if not lengths:
        raise DataError("tokenizer_stats got no non-empty held-out text; pass the validation split's text column")
    arr = np.asarray(lengths)
    n_tokens = int(arr.sum())
    p50, p95, p99 = np.percentile(arr, [50, 95, 99])
    return {
        "vocab_size": len(tokenizer),
        "n_texts": len(lengths),
        "n_tokens": n_tokens,
        "unk_rate": n_unk / n_tokens if n_tokens else 0.0,
        "chars_per_token": n_chars / n_tokens if n_tokens else 0.0,
        "length_p50": float(p50),
        "length_p95": float(p95),
        "length_p99": float(p99),
        "length_max": int(arr.max()),
    }


def save_stats(stats: dict[str, Any], out_dir: str | Path) -> Path:
    """Write ``stats`` as ``out_dir/stats.json`` (strict JSON, UTF-8, indented; NaN -> null); return the path."""
    path = Path(out_dir) / "stats.json"
    jsonio.write_json(path, stats)
    return path
