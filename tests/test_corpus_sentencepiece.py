"""Issue 52 item 16: a Llama checkpoint's SentencePiece tokenizer prepares a store (nbkit.corpus) as any tokenizer
AutoTokenizer loads; a Python-only tokenizer without an exact fast conversion is refused before any text is read,
naming the cause and the fix. The SentencePiece model is trained here in a second; nothing is downloaded."""
from __future__ import annotations

import json
import shutil

import pytest

from nbkit.corpus import prepare_corpus
from nbkit.errors import ConfigError
from tests.corpus_helpers import load_split, review_lines, write_txt

spm = pytest.importorskip("sentencepiece")   # the test extra (pyproject.toml) installs it


@pytest.fixture(scope="module")
def sp_model(tmp_path_factory):
    """A 2,000-piece SentencePiece BPE (byte fallback, Llama's <unk>/<s>/</s> at 0/1/2) on 600 review lines."""
    root = tmp_path_factory.mktemp("sp")
    text = write_txt(root / "train.txt", review_lines(600))
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(root / "sp"), vocab_size=2000, model_type="bpe",
                                   character_coverage=0.995, byte_fallback=True, unk_id=0, bos_id=1, eos_id=2,
                                   pad_id=-1, minloglevel=2, num_threads=1)
    return root / "sp.model"


def _llama_upload(folder, sp_model):
    """A Llama checkpoint's tokenizer files as many uploads have them: the SentencePiece tokenizer.model only."""
    folder.mkdir()
    shutil.copy(sp_model, folder / "tokenizer.model")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
         "add_bos_token": True, "add_eos_token": False}))
    return folder


@pytest.mark.parametrize("layout", ["tokenizer.model", "tokenizer.json"])
def test_a_llama_sentencepiece_tokenizer_prepares_a_store_of_its_own_ids(tmp_path, sp_model, layout):
    """Before: 'the tokenizer has no [SEP]/[CLS] token; use a BERT-style tokenizer'. Now every document is the
    tokenizer's ids of the text followed by its eos (</s>, what causal training separates documents with), and an
    MLM block would start with bos."""
    from transformers import AutoTokenizer, LlamaTokenizerFast

    folder = _llama_upload(tmp_path / "llama", sp_model)
    if layout == "tokenizer.json":                   # the same tokenizer saved by transformers (LlamaTokenizerFast)
        tok = LlamaTokenizerFast.from_pretrained(folder)
        folder = tmp_path / "llama-fast"
        tok.save_pretrained(folder)
        assert (folder / "tokenizer.json").is_file()
    tok = AutoTokenizer.from_pretrained(folder)
    assert tok.sep_token_id is None and tok.cls_token_id is None and len(tok) == 2000
    texts = review_lines(40, start=600)              # texts the SentencePiece model never saw
    out = tmp_path / "store"
    m = prepare_corpus(write_txt(tmp_path / "c.txt", texts), out, tokenizer=str(folder), heldout_share=0.0,
                       num_workers=1, progress=False)
    assert (m["sep_id"], m["cls_id"]) == (tok.eos_token_id, tok.bos_token_id) == (2, 1)
    assert m["tokenizer"]["vocab_size"] == 2000 and m["counts"]["n_texts_kept"] == len(texts)
    ids, _ = load_split(out)
    expected = [i for t in texts for i in (*tok(t, add_special_tokens=False)["input_ids"], tok.eos_token_id)]
    assert ids.tolist() == expected
    assert tok.unk_token_id not in expected          # byte fallback: no character is lost
    stored = AutoTokenizer.from_pretrained(out / "tokenizer")
    assert stored(texts[0], add_special_tokens=False)["input_ids"] == tok(texts[0], add_special_tokens=False)["input_ids"]


def test_a_python_only_tokenizer_without_an_exact_conversion_is_refused_before_reading(tmp_path, sp_model):
    """BertGenerationTokenizer loads through AutoTokenizer as a slow (SentencePiece, Python) tokenizer that
    transformers cannot convert: the store's workers need tokenizer.json. Before: 'has no fast (Rust) version' with no
    way on. Now the cause (its class, no converter) and the fix; no shard is written."""
    from transformers import AutoTokenizer

    folder = tmp_path / "slow"
    folder.mkdir()
    shutil.copy(sp_model, folder / "spiece.model")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertGenerationTokenizer"}))
    assert not AutoTokenizer.from_pretrained(folder).is_fast
    out = tmp_path / "store"
    with pytest.raises(ConfigError, match=r"loads as BertGenerationTokenizer, a Python-only \(slow\) tokenizer, and "
                                          r"transformers has no converter .*tokenizer\.json.*Fix: pass the fast version"
                                          r".*tokenizer=None to train a WordPiece"):
        prepare_corpus(write_txt(tmp_path / "c.txt", review_lines(40)), out, tokenizer=str(folder), num_workers=1,
                       progress=False)
    assert not (out / "shards").exists() or not any((out / "shards").glob("*.ids"))


def test_an_mlm_on_a_llama_tokenized_store_is_refused_before_a_model_is_made(tmp_path, sp_model):
    """A masked LM needs [MASK] and [PAD]; a Llama/SentencePiece tokenizer has neither. Before: the store's blocks and a
    BERT of its vocabulary were made, then the collator refused with 'use nbkit.text.tokenizer.train_wordpiece'.
    Now the model and blocks stages refuse first, naming the tokenizer, what it lacks and the fixes."""
    import nbkit.recipes.pretraining as pt

    folder = _llama_upload(tmp_path / "llama", sp_model)
    store = tmp_path / "store"
    prepare_corpus(write_txt(tmp_path / "c.txt", review_lines(40, start=600)), store, tokenizer=str(folder),
                   heldout_share=0.0, num_workers=1, progress=False)
    cfg = pt.PretrainConfig.for_scale("smoke", objective="mlm", corpus=str(store), block_size=32)
    corpus = pt.data(cfg)
    tok = pt.tokenizer(cfg, corpus)
    why = (r"objective='mlm' needs a BERT-style tokenizer with a mask token \(\[MASK\]\) and a pad token \(\[PAD\]\), "
           r"but the corpus store .*store uses a LlamaTokenizer\w* with no mask and no pad token .*Fix: objective='causal'.*"
           r"tokenizer=None")
    with pytest.raises(ConfigError, match=why):
        pt.model(cfg, tok)
    with pytest.raises(ConfigError, match=why):
        pt.blocks(cfg, tok, corpus)
    bare = pt.PretrainConfig.for_scale("smoke", objective="mlm", block_size=32)                  # a BERT preset handed the Llama tokenizer directly
    with pytest.raises(ConfigError, match=r"the given tokenizer uses a LlamaTokenizer\w* with no mask and no pad"):
        pt.model(bare, tok)
    causal = cfg.replace(objective="causal", model="gpt2-tiny")
    assert pt.model(causal, tok).config.vocab_size == len(tok)   # the same store trains a causal LM
