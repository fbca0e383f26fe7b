"""The saved tokenizer as a complete file set that every standard loader reads alike.

``tokenizer.json`` defines the tokenizer; loaders that rebuild it from the other files get ``vocab.txt``
(ids in order) and ``tokenizer_config.json`` with ``tokenizer_class: "PreTrainedTokenizerFast"``
(resolved by transformers 4.x and 5.x) and explicit normalisation flags, so all give the same ids
(``tests/test_tokenizer_reload.py``); with NFKC a ``normalization_note`` names the loaders that drop it.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

from nbkit import jsonio
from nbkit.atomic import atomic_file
from nbkit.errors import ConfigError

#: The class name written to ``tokenizer_config.json``.
TOKENIZER_CLASS = "PreTrainedTokenizerFast"
#: Generic fast-tokenizer class names that :func:`complete_tokenizer_files` renames to :data:`TOKENIZER_CLASS`.
GENERIC_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast", "NbkitTokenizerFast")
#: ``from_pretrained`` arguments transformers 5 writes back on save (how one load went, e.g. offline): dropped.
LOAD_ONLY_KEYS = ("is_local", "local_files_only", "cache_dir", "force_download", "proxies", "revision",
                  "subfolder", "token", "trust_remote_code", "_commit_hash")
NFKC_NOTE = ("NFKC runs before BERT's normalizer (full-width ＡＢＣ１２３ -> abc123). Load with AutoTokenizer or "
             "PreTrainedTokenizerFast (they read tokenizer.json). BertTokenizer, BertTokenizerFast (transformers 5) "
             "and the slow BertTokenizer rebuild BERT's normalizer without NFKC: pass them "
             "unicodedata.normalize('NFKC', text) to get the same ids.")


def normalization_flags(backend) -> dict:
    """A ``tokenizers.Tokenizer``'s normalisation as config flags: ``do_lower_case``, ``strip_accents``,
    ``tokenize_chinese_chars``, ``clean_text`` (when it has a ``BertNormalizer``) and
    ``unicode_normalization`` (``"NFKC"``, ... or None)."""
    spec = json.loads(backend.to_str()).get("normalizer") or {}
    steps = spec.get("normalizers", []) if spec.get("type") == "Sequence" else [spec]
    flags: dict = {"unicode_normalization": None}
    for step in steps:
        if step.get("type") in ("NFKC", "NFC", "NFKD", "NFD"):
            flags["unicode_normalization"] = step["type"]
        elif step.get("type") == "BertNormalizer":
            strip = step.get("strip_accents")
            flags.update(do_lower_case=bool(step.get("lowercase")),
                         strip_accents=bool(step.get("lowercase")) if strip is None else bool(strip),
                         tokenize_chinese_chars=bool(step.get("handle_chinese_chars")),
                         clean_text=bool(step.get("clean_text")))
    return flags


def tokenizer_sha256(tokenizer) -> str:
    """SHA-256 (hex) of a fast tokenizer's pipeline (vocabulary, normalizer, pre-tokenizer, post-processor),
    without its per-call truncation/padding state: equal exactly when two tokenizers give the same ids."""
    import hashlib

    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    spec.pop("truncation", None)
    spec.pop("padding", None)
    return hashlib.sha256(jsonio.dumps(spec, sort_keys=True).encode("utf-8")).hexdigest()


#: files a tokenizer folder may define the tokenizer by (Hugging Face's names; ``*.model``: SentencePiece)
DEFINING_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                  "vocab.txt", "vocab.json", "merges.txt")


def tokenizer_files_sha256(folder) -> str | None:
    """SHA-256 (hex) of the tokenizer files in ``folder`` (:data:`DEFINING_FILES` and ``*.model``: names and bytes),
    without loading them; None when there are none. Byte-identical files in two folders (a model and its fp16
    copy) give the same value, so what is keyed by it (a corpus store) is shared."""
    import hashlib

    found = sorted(f for f in Path(folder).iterdir()
                   if f.is_file() and (f.name in DEFINING_FILES or f.suffix == ".model"))
    if not found:
        return None
    digest = hashlib.sha256()
    for f in found:
        digest.update(f.name.encode("utf-8") + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()


#: CJK ideographs, kana, bopomofo, CJK and full-width punctuation, curly quotes, … and —: a space decode put
#: beside one of these is dropped (:func:`cjk_decoder`)
CJK_CHARS = (r"\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
             r"\ufe30-\ufe4f\uff00-\uffef\u2018-\u201f\u2026\u2014")


def cjk_decoder(prefix: str = "##"):
    """A ``tokenizers`` decoder that writes Chinese without spaces: BERT's ``WordPiece`` decoder, ``Fuse``, then
    ``Replace`` of every space next to a CJK character or punctuation (:data:`CJK_CHARS`) by nothing, where
    ``BertTokenizer.decode`` joins every token with a space (``"我 爱 北 京"``). Spaces between Latin words stay
    (``"我爱python"``); stored in ``tokenizer.json``, so every loader decodes the same way.
    """
    from tokenizers import Regex, decoders

    pattern = Regex(f"(?<=[{CJK_CHARS}]) | (?=[{CJK_CHARS}])")
    return decoders.Sequence([decoders.WordPiece(prefix=prefix, cleanup=True), decoders.Fuse(),
                              decoders.Replace(pattern, "")])


def cjk_decoding(tokenizer):
    """A copy of a fast ``tokenizer``'s ``tokenizers.Tokenizer``, with :func:`cjk_decoder` when it is a WordPiece
    (byte-level BPE already decodes without added spaces): its ``decode`` gives what the files saved with
    ``cjk_decode=True`` give. The caller's tokenizer (and its :func:`tokenizer_sha256`) is not changed."""
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    model = json.loads(backend.to_str()).get("model") or {}
    if model.get("type") == "WordPiece":
        backend.decoder = cjk_decoder(model.get("continuing_subword_prefix") or "##")
    return backend


def _start_template(tokenizer, token: str) -> dict:
    """The ``tokenizer.json`` post-processor that puts ``token`` before a text (and between a pair)."""
    from tokenizers import Tokenizer, models, processors

    i = int(tokenizer.convert_tokens_to_ids(token))
    holder = Tokenizer(models.WordLevel({token: i}, unk_token=token))   # serialises the template to JSON
    holder.post_processor = processors.TemplateProcessing(single=f"{token} $A", pair=f"{token} $A {token}:1 $B:1",
                                                          special_tokens=[(token, i)])
    return json.loads(holder.to_str())["post_processor"]


def complete_tokenizer_files(out_dir: str | Path, tokenizer, model_max_length: int | None = None,
                             cjk_decode: bool = False, start_token: str | None = None) -> Path:
    """Complete what ``tokenizer.save_pretrained(out_dir)`` wrote: ``vocab.txt`` and normalisation flags (WordPiece),
    ``model_max_length`` (tokens ``truncation=True`` cuts to; None: keep). Returns ``out_dir``.

    ``cjk_decode``: a WordPiece's ``tokenizer.json`` gets :func:`cjk_decoder` (ids unchanged). ``start_token`` (any
    fast tokenizer): the post-processor puts that token (a causal LM's document separator) before the text, as
    :func:`nbkit.text.causal.prompt_ids` does. Either sets ``tokenizer_class`` to :data:`TOKENIZER_CLASS`, so loaders
    read ``tokenizer.json`` as written.

    Raises:
        ConfigError: the ids are not 0..n-1 (no ``vocab.txt`` can hold them).
    """
    out = Path(out_dir)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    cfg_path = out / "tokenizer_config.json"
    if backend is None or not cfg_path.is_file():
        return out
    model = json.loads(backend.to_str()).get("model") or {}
    config = json.loads(cfg_path.read_text(encoding="utf-8"))
    tok_json = out / "tokenizer.json"
    edits = (cjk_decode and model.get("type") == "WordPiece") or start_token is not None
    spec = json.loads(tok_json.read_text(encoding="utf-8")) if edits and tok_json.is_file() else None   # only to edit
    rewritten = False     # tokenizer.json changed: loaders must read it as written
    if model.get("type") == "WordPiece":
        vocab = backend.get_vocab(with_added_tokens=True)
        tokens = sorted(vocab, key=vocab.get)
        if [vocab[t] for t in tokens] != list(range(len(tokens))):
            raise ConfigError(f"the tokenizer's ids are not 0..{len(tokens) - 1} without gaps, so no vocab.txt "
                              "can hold them; retrain it with nbkit.text.train_wordpiece")
        with atomic_file(out / "vocab.txt", what="tokenizer vocabulary") as tmp:   # ENOSPC: WriteError
            tmp.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
        config.update(normalization_flags(backend))
        if config.get("unicode_normalization"):
            config["normalization_note"] = NFKC_NOTE
        if cjk_decode and spec is not None:
            spec["decoder"] = json.loads(cjk_decoding(tokenizer).to_str())["decoder"]
            rewritten = True
    if start_token is not None and spec is not None:
        # any model type: the generic class keeps the file's post-processor (GPT2Tokenizer and LlamaTokenizer
        # would rebuild their own from add_bos_token)
        template = _start_template(tokenizer, start_token)
        before = spec.get("post_processor") or {}
        if before.get("type") == "ByteLevel":            # keep its offset trimming, then the template
            template = {"type": "Sequence", "processors": [before, template]}
        spec["post_processor"], rewritten = template, True
        for key in ("add_bos_token", "add_eos_token"):  # the template decides what is added, nothing else
            config.pop(key, None)
    if rewritten:
        jsonio.write_json(tok_json, spec)
        config.update(tokenizer_class=TOKENIZER_CLASS, clean_up_tokenization_spaces=False)
    for key in LOAD_ONLY_KEYS:
        config.pop(key, None)
    if config.get("tokenizer_class") in GENERIC_CLASSES:
        config["tokenizer_class"] = TOKENIZER_CLASS
    if model_max_length is not None:
        config["model_max_length"] = int(model_max_length)
    jsonio.write_json(cfg_path, config)
    return out


def save_tokenizer(tokenizer, out_dir: str | Path, model_max_length: int | None = None,
                   cjk_decode: bool = False, start_token: str | None = None) -> Path:
    """``tokenizer.save_pretrained(out_dir)`` plus :func:`complete_tokenizer_files` (``cjk_decode``: Chinese
    decoded without spaces; ``start_token``: put before every text; both for a causal LM), whatever its class;
    returns ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(out))
    return complete_tokenizer_files(out, tokenizer, model_max_length, cjk_decode=cjk_decode, start_token=start_token)


@functools.cache
def nbkit_tokenizer_class():
    """``NbkitTokenizerFast``, a ``PreTrainedTokenizerFast`` whose ``save_pretrained`` writes the complete
    set; defined on first use, so transformers is imported only then."""
    from transformers import PreTrainedTokenizerFast

    class NbkitTokenizerFast(PreTrainedTokenizerFast):
        """A ``PreTrainedTokenizerFast`` saved as a complete file set."""

        def save_pretrained(self, save_directory, *args, **kwargs):
            files = super().save_pretrained(save_directory, *args, **kwargs)
            complete_tokenizer_files(save_directory, self)
            return files

    NbkitTokenizerFast.__module__ = __name__
    NbkitTokenizerFast.__qualname__ = "NbkitTokenizerFast"
    return NbkitTokenizerFast


def __getattr__(name):  # pickling finds the class as nbkit.text.tokenizer_files.NbkitTokenizerFast
    if name == "NbkitTokenizerFast":
        return nbkit_tokenizer_class()
    raise AttributeError(name)
