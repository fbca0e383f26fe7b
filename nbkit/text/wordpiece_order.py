"""Make ``tokenizers``' WordPiece training deterministic, and reject sizes that would crash it.

Why training was not deterministic (measured: People's Daily + the review training split,
``vocab_size=8000``, three trainings in a row gave 7,428 / 7,430 / 7,432 tokens, three
different vocabularies). ``tokenizers`` (0.23) trains WordPiece with its BPE trainer, which
has no randomness but assigns ids to the continuation tokens (``##a``) while iterating
over its word counts, a hash map whose order changes from one run to the next. Merges of
equal count are then broken by those ids (``Merge::cmp`` compares the pair ids), so ties
pick different merges and the vocabularies drift. Upstream: huggingface/tokenizers issue
#1794, fix proposed in pull request #2066 (open as of 2026-11). ``TOKENIZERS_PARALLELISM``
plays no part (the word counts are the same either way) and neither does the input order.

The fix here, until the upstream fix ships: give every continuation token its id before
training starts. The trainer assigns ids to its ``special_tokens`` first and in the order
given, so :func:`fixed_token_order` lists ``##c`` for every character ``c`` that occurs
inside a word (not first), sorted by code point, to be appended to the special tokens.
:func:`nbkit.text.tokenizer.train_wordpiece` then rebuilds the tokenizer from the trained
vocabulary, where they are plain vocabulary entries (not added tokens). The base alphabet
is already sorted by the trainer; with ``limit_alphabet`` the alphabet is chosen here
(most frequent first, ties by code point) and passed as ``initial_alphabet``, because the
trainer's own cut is an unstable sort by count (equal counts at the cut land either way).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from nbkit.errors import ConfigError

#: Largest ``vocab_size`` accepted. The Rust trainer pre-allocates for the requested
#: size (about 66 bytes per token: ``vocab_size=2**31-1`` asks for 141 GB and aborts the
#: whole process, a notebook kernel included). The largest vocabularies in use are a few
#: hundred thousand tokens (Gemma: 262,144); ``bert-base-chinese`` has 21,128.
MAX_VOCAB_SIZE = 1_000_000
#: A trained vocabulary below this share of the request is reported (a warning). The trainer stops short only
#: when it runs out of pairs, whatever the corpus size, so the warning depends on that outcome alone.
FAR_BELOW = 0.9


def check_vocab_size(vocab_size: int, min_size: int) -> None:
    """Raise ``ConfigError`` for a ``vocab_size`` (tokens) the trainer cannot or should not try.

    ``min_size``: the special tokens, which every vocabulary holds. Above
    :data:`MAX_VOCAB_SIZE` the trainer would try to allocate memory in proportion and
    abort the process instead of raising.
    """
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise ConfigError(f"vocab_size={vocab_size!r} must be an int (tokens), e.g. 8000")
    if vocab_size <= min_size:
        raise ConfigError(f"vocab_size={vocab_size} is too small: it must exceed the {min_size} special tokens; "
                          "use at least a few thousand for Chinese")
    if vocab_size > MAX_VOCAB_SIZE:
        raise ConfigError(
            f"vocab_size={vocab_size:,} is implausible: the WordPiece trainer reserves memory for every requested "
            f"token (about {vocab_size * 66 / 2**30:,.1f} GiB here) and would abort the process; the largest "
            f"vocabularies in use have a few hundred thousand tokens. Use vocab_size <= {MAX_VOCAB_SIZE:,} "
            "(Chinese BERT: 8,000-21,128).")


def fixed_token_order(backend, texts: Iterable[str], limit_alphabet: int | None) -> tuple[list[str], list[str]]:
    """Continuation tokens and alphabet to fix before training (see the module docstring).

    Args:
        backend: the untrained ``tokenizers.Tokenizer`` (its normalizer and pre-tokenizer
            define the words the trainer will see).
        texts: the training texts (read once).
        limit_alphabet: the trainer's alphabet limit (characters), or None for all.

    Returns:
        ``(continuation, alphabet)``: ``["##c", ...]`` sorted by code point, for every
        kept character that occurs after the first position of a word; and, when
        ``limit_alphabet`` is set, the ``limit_alphabet`` most frequent characters (ties
        by code point) to pass as ``initial_alphabet`` (else ``[]``).
    """
    counts: Counter[str] = Counter()
    inner: set[str] = set()
    normalize, split = backend.normalizer.normalize_str, backend.pre_tokenizer.pre_tokenize_str
    for text in texts:
        for word, _ in split(normalize(text)):
            counts.update(word)
            inner.update(word[1:])
    alphabet: list[str] = []
    kept = set(counts)
    if limit_alphabet is not None and len(counts) > limit_alphabet:
        alphabet = sorted(sorted(counts), key=lambda c: -counts[c])[:limit_alphabet]  # stable: ties by code point
        kept = set(alphabet)
    return [f"##{c}" for c in sorted(inner & kept)], alphabet
