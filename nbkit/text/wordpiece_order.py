"""Make ``tokenizers``' WordPiece training deterministic, and reject sizes that would crash it.

Why: ``tokenizers``' BPE trainer assigns ids to continuation tokens (``##a``) in hash-map order, which changes
from run to run, and breaks ties between merges of equal count by those ids, so the vocabularies drift
(huggingface/tokenizers issue #1794). The fix: :func:`fixed_token_order` lists ``##c`` for every character that
occurs inside a word, sorted by code point, to be appended to the special tokens, which the trainer numbers
first and in order; :func:`nbkit.text.tokenizer.train_wordpiece` then rebuilds the tokenizer from the trained
vocabulary. With ``limit_alphabet`` the alphabet is chosen here (most frequent first, ties by code point),
because the trainer's own cut is an unstable sort by count.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from nbkit.errors import ConfigError

#: Largest ``vocab_size`` accepted: the Rust trainer pre-allocates for the requested size (about 66 bytes per
#: token) and aborts the whole process, kernel included, when that fails; vocabularies in use stay below it.
MAX_VOCAB_SIZE = 1_000_000
#: A trained vocabulary below this share of the request is reported (a warning). The trainer stops short only
#: when it runs out of pairs, whatever the corpus size, so the warning depends on that outcome alone.
FAR_BELOW = 0.9


def check_vocab_size(vocab_size: int, min_size: int) -> None:
    """Raise ``ConfigError`` for a ``vocab_size`` (tokens) the trainer cannot or should not try; ``min_size``: the
    special tokens, which every vocabulary holds."""
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
    """``(continuation, alphabet)`` to fix before training (see the module docstring): ``["##c", ...]`` sorted by code
    point for every kept character that occurs after a word's first position, and with ``limit_alphabet`` the
    ``limit_alphabet`` most frequent characters (ties by code point) for ``initial_alphabet`` (else ``[]``).
    ``backend``: the untrained ``tokenizers.Tokenizer``, whose normalizer and pre-tokenizer define the words."""
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
