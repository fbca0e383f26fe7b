"""The store's tokenizer: the user's own (copied in), or WordPiece trained on a documented sample (the first
``sample_mb`` MB of kept texts in input order, held-out, repeated and excluded ones left out), written to a temp
folder renamed to ``tokenizer/`` when complete; and the held-out rule.
"""
from __future__ import annotations

import hashlib
import shutil
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from nbkit import jsonio
from nbkit.corpus.manifest import read_store_json
from nbkit.corpus.worker import doc_key
from nbkit.errors import ConfigError, DataError
from nbkit.text.tokenizer_files import normalization_flags
from nbkit.text.wordpiece_order import FAR_BELOW

INFO = "tokenizer_info.json"  # beside tokenizer/: what the store needs to know about it
#: Whether the tokenizer a store trains runs NFKC (``train_wordpiece``'s default: BERT's normalizer alone).
TRAINED_NFKC = False


def tokenizer_identity(given: str | None) -> dict[str, Any]:
    """``{"unicode_normalization", "tokenizer_sha256"}`` for the settings: the form the tokenizer runs (applied
    to the stored text; ``"none"`` for BERT's normalizer alone) and the SHA-256 of a given one's pipeline (None
    when the store trains its own), so a store is never reused with another tokenizer.

    Raises:
        ConfigError: a given tokenizer that does not load with ``AutoTokenizer``, or a slow one without an exact
            fast conversion (:func:`_load_given`).
    """
    if given is None:
        return {"unicode_normalization": "NFKC" if TRAINED_NFKC else "none", "tokenizer_sha256": None}
    tok = _load_given(given)
    spec = tok.backend_tokenizer.to_str()
    form = normalization_flags(tok.backend_tokenizer)["unicode_normalization"] or "none"
    return {"unicode_normalization": form, "tokenizer_sha256": hashlib.sha256(spec.encode("utf-8")).hexdigest()}


def _load_given(given: str):
    """The tokenizer ``AutoTokenizer`` loads from ``given`` as a fast (Rust) one: the store's worker processes
    encode through its ``tokenizer.json``. A Llama's SentencePiece ``tokenizer.model`` loads fast already; a
    Python-only (slow) tokenizer is converted with transformers' own converter and kept only where it encodes
    :data:`PROBE` as the slow one does.

    Raises:
        ConfigError: a corpus store's folder (its ``tokenizer/`` named), it does not load, or it is slow and has no
            exact conversion (the cause and the fix named).
    """
    from transformers import AutoTokenizer

    from nbkit.corpus.store import holds_store_files

    if holds_store_files(given) and (Path(given) / "tokenizer").is_dir():
        raise ConfigError(f"tokenizer={given!r} is a corpus store, not a tokenizer folder; its tokenizer is "
                          f"{Path(given) / 'tokenizer'}: pass tokenizer={str(Path(given) / 'tokenizer')!r}")
    try:
        tok = AutoTokenizer.from_pretrained(given)
    except Exception as exc:  # noqa: BLE001  (OSError, ValueError, ... from transformers)
        raise ConfigError(f"tokenizer={given!r} does not load with AutoTokenizer ({exc}); pass a "
                          "tokenizer directory (vocab.txt, tokenizer.json or a SentencePiece tokenizer.model with its "
                          "tokenizer_config.json), or None to train one") from exc
    return tok if tok.is_fast else _as_fast(tok, given)


#: texts a converted tokenizer must encode as its slow original: Chinese, Latin, digits, full-width, spaces, emoji
PROBE = ("今天天气很好，我们去公园散步。", "北京大学 Peking University 1898年", "ＡＢＣ１２３ mixed\tspaces  here",
         "表情😀和罕见字𠀀", "")


def _as_fast(slow, given: str):
    """``slow`` as a fast tokenizer (``convert_slow_tokenizer``), or ConfigError naming why not and the fix."""
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import convert_slow_tokenizer

    kind = type(slow).__name__
    try:
        fast = PreTrainedTokenizerFast(tokenizer_object=convert_slow_tokenizer(slow), **slow.special_tokens_map)
    except Exception as exc:  # noqa: BLE001  (ValueError: no converter; others from the converter itself)
        why = f"transformers has no converter from {kind} to a fast tokenizer ({str(exc).splitlines()[0][:160]})"
    else:
        differ = [t for t in PROBE if fast(t, add_special_tokens=False)["input_ids"]
                  != slow(t, add_special_tokens=False)["input_ids"]]
        if not differ:
            return fast
        why = f"its conversion to a fast tokenizer encodes {differ[0]!r} differently"
    raise ConfigError(
        f"tokenizer={given!r} loads as {kind}, a Python-only (slow) tokenizer, and {why}: the store's worker processes "
        "encode with the Rust tokenizers library (tokenizer.json), so the store would not hold the ids this tokenizer "
        "gives. Fix: pass the fast version of this tokenizer (a folder with its tokenizer.json, e.g. the model's "
        "original upload), or tokenizer=None to train a WordPiece on the corpus (then train the model on that "
        "vocabulary).")


def heldout_cut(share: float) -> int:
    """The held-out rule: a text whose hash ``h`` (uint64) is below ``int(share * 2**64)`` is validation."""
    return int(share * 2**64)


def _ids(tok, out: dict[str, Any]) -> dict[str, Any]:
    """``out`` with the store's id facts: ``sep_id`` ends every document (``[SEP]``, else eos: a Llama's
    ``</s>``, as causal training reads it: :func:`nbkit.text.mlm.document_separator`), ``cls_id`` starts an
    MLM block (``[CLS]``, else bos, else the separator).

    Raises:
        ConfigError: a tokenizer with neither ``[SEP]`` nor an eos token (nothing marks a document's end).
    """
    from nbkit.text.mlm import document_separator

    size = len(tok)
    sep, _ = document_separator(tok)
    cls = next(i for i in (tok.cls_token_id, tok.bos_token_id, sep) if i is not None)
    return {**out, "dir": "tokenizer", "vocab_size": size, "dtype": "uint16" if size <= 65535 else "uint32",
            "sep_id": int(sep), "cls_id": int(cls)}


def sample_texts(cleaned: Iterable[list[str]], share: float, max_bytes: int,
                 excluded=()) -> tuple[list[str], int]:
    """The training sample ``(texts, UTF-8 bytes)`` from batches of cleaned texts in input order, held-out
    texts, repeats and ``excluded`` (uint64 hashes) left out, up to ``max_bytes``."""
    texts, seen, size, cut = [], {int(h) for h in excluded}, 0, heldout_cut(share)
    for batch in cleaned:
        for t in batch:
            h = doc_key(t)
            if h < cut or h in seen:
                continue
            seen.add(h)
            texts.append(t)
            size += len(t.encode("utf-8"))
            if size >= max_bytes:
                return texts, size
    return texts, size


def vocab_size_note(n_vocab: int, asked: int, n_texts: int, sample_bytes: int, sample_cut: bool,
                    sample_mb: float) -> str | None:
    """The warning for a trained vocabulary under :data:`~nbkit.text.wordpiece_order.FAR_BELOW` of ``asked``, or
    above ``asked / FAR_BELOW`` (every distinct character is kept), with its reason and fix; None when close enough."""
    if n_vocab > asked / FAR_BELOW:
        return (f"the store's tokenizer has {n_vocab:,} tokens, {n_vocab / asked:.0%} of vocab_size={asked:,}: "
                f"WordPiece keeps every distinct character of its {n_texts:,} training texts as a token (one left out "
                "would read as [UNK]), and they alone outnumber vocab_size; the embedding matrix has a row per token. "
                f"Pass vocab_size={n_vocab:,} or more to ask for what the text needs")
    if n_vocab >= FAR_BELOW * asked:
        return None
    if sample_cut:
        fix = (f"the sample is the corpus's first sample_mb={sample_mb:g} MB: a larger sample_mb gives it more to "
               f"merge; or pass vocab_size={n_vocab} to ask for what this sample holds")
    else:
        fix = f"the sample was the whole corpus: more text, or vocab_size={n_vocab}, fits it"
    return (f"the store's tokenizer has {n_vocab:,} tokens, {n_vocab / asked:.0%} of vocab_size={asked:,}: "
            f"WordPiece ran out of pairs occurring at least twice in its {n_texts:,} training texts "
            f"({sample_bytes / 1e6:,.2f} MB; each Chinese character is its own word, so merges happen only inside "
            f"Latin words and digit runs); {fix}")


def ensure_tokenizer(out_dir: Path, settings: dict[str, Any], cleaned: Callable[[], Iterable[list[str]]],
                     excluded=(), nothing: Callable[[str], str] | None = None) -> tuple[dict[str, Any], float]:
    """``out_dir/tokenizer/`` reused, copied or trained; returns ``(info, seconds)``. ``cleaned()`` (called only
    to train) yields batches of cleaned texts; ``excluded``: uint64 hashes kept out of the sample; ``nothing(fix)``:
    the message when no text passed, naming what was dropped and each file's fix (default: ``fix`` alone).

    Raises:
        ConfigError: a given tokenizer that does not load (or is slow without an exact fast conversion), or has
            neither [SEP] nor an eos token.
        DataError: no text passes the filters (nothing to train on); a damaged ``tokenizer_info.json``.
    """
    final, info_path = out_dir / "tokenizer", out_dir / INFO
    if final.is_dir() and info_path.is_file():
        return read_store_json(info_path, out_dir), 0.0
    t0 = time.perf_counter()
    tmp = out_dir / ".tokenizer.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(final, ignore_errors=True)
    given = settings["tokenizer"]
    if given is not None:
        tok = _load_given(given)
        tok.save_pretrained(str(tmp))
        info = {"trained_on": f"given: {given}"}
    else:
        from nbkit.text.tokenizer import train_wordpiece

        max_bytes = int(settings["sample_mb"] * 1e6)
        texts, size = sample_texts(cleaned(), settings["heldout_share"], max_bytes, excluded)
        if not texts:
            fix = "else check text_field, min_chars and min_cjk_share (there is nothing to train the tokenizer on)"
            raise DataError(nothing(fix) if nothing else f"no text of the corpus passes the validity rule and "
                            f"filters; {fix}")
        with warnings.catch_warnings(record=True) as caught:   # its own shortfall warning is replaced below
            warnings.simplefilter("always")
            tok = train_wordpiece(texts, settings["vocab_size"], tmp, settings["model_max_length"], nfkc=TRAINED_NFKC)
        training = tmp / "training.json"  # its train_seconds would make the folder differ between runs
        record = jsonio.loads_strict(training.read_text(encoding="utf-8"))
        record.pop("train_seconds", None)
        jsonio.write_json(training, record)
        whole = "the whole corpus" if size < max_bytes else f"sample_mb={settings['sample_mb']}"
        info = {"trained_on": (
            f"the first {len(texts):,} texts ({size / 1e6:,.2f} MB UTF-8, {whole}) in input order that pass the "
            "validity rule and filters, held-out, repeated and excluded texts left out"),
            "vocab_size_asked": settings["vocab_size"]}
        info["note"] = vocab_size_note(len(tok), settings["vocab_size"], len(texts), size, size >= max_bytes,
                                        settings["sample_mb"])
        for w in caught:
            if not (info["note"] and issubclass(w.category, UserWarning) and "far below vocab_size" in str(w.message)):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if info["note"]:
            warnings.warn(info["note"], UserWarning, stacklevel=3)
    if not (tmp / "tokenizer.json").is_file():
        raise ConfigError(f"the tokenizer saved to {tmp} has no tokenizer.json; pass a fast tokenizer")
    info = _ids(tok, info)
    tmp.replace(final)
    jsonio.write_json(info_path, info)
    return info, time.perf_counter() - t0
