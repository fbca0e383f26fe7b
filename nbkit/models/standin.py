"""Stand-ins for published Chinese checkpoints, built locally: a folder in the file layout of
``bert-base-chinese`` or of a ckiplab model (BERT masked LMs), of ``uer/gpt2-chinese-cluecorpussmall`` (a GPT-2
over the same vocabulary) or of a Llama causal LM, with random weights.

For tests, notebook 02's smoke path and ``bench/continued_pretraining.py``: they exercise loading a
published checkpoint (its 21,128-token vocabulary, its tokenizer files, its weight names) without a
download. The weights are random, so a stand-in is no language model.
"""
from __future__ import annotations

from pathlib import Path

from nbkit import jsonio
from nbkit.text.chinese_vocab import VOCAB_SIZE, bert_chinese_tokenizer, chinese_vocab

POSITIONS = 512
LAYOUTS = ("bert-base-chinese", "ckiplab", "uer-gpt2", "llama")
#: the causal layouts (GPT-2 / Llama), the rest are BERT masked LMs
CAUSAL_LAYOUTS = ("uer-gpt2", "llama")
#: the sizes of BERT-base (Devlin et al. 2019), for a stand-in as big as bert-base-chinese
BASE_SIZES = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
#: the BERT vocabulary's special tokens, as ``special_tokens_map.json`` names them
SPECIALS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
            "mask_token": "[MASK]"}


def build_standin(out_dir, layout: str = "bert-base-chinese", seed: int = 0, hidden_size: int = 32,
                  num_hidden_layers: int = 2, num_attention_heads: int = 2, intermediate_size: int = 64) -> Path:
    """Write a stand-in checkpoint of ``layout`` into ``out_dir`` (created) and return it as a ``Path``; tiny by
    default, :data:`BASE_SIZES` for BERT-base; same ``seed``, same weights. ValueError: an unknown ``layout``.

    - ``"bert-base-chinese"``: ``BertForPreTraining``'s weights in ``model.safetensors`` under the original names
      (``LayerNorm.gamma`` / ``beta``, pooler and next-sentence head, no tied decoder), ``vocab.txt`` and
      ``tokenizer.json`` (no lower-casing), 512 positions.
    - ``"ckiplab"``: a ``pytorch_model.bin`` of ``BertForMaskedLM``, ``vocab.txt`` only, ``tokenizer_class`` in
      ``config.json``.
    - ``"uer-gpt2"``: as ``uer/gpt2-chinese-cluecorpussmall``: ``GPT2LMHeadModel`` (1,024 positions, GPT-2's bos/eos
      50256 past its 21,128 rows), ``BertTokenizer`` files, a ``pytorch_model.bin`` without ``lm_head.weight``.
    - ``"llama"``: a tied ``LlamaForCausalLM`` over the same vocabulary (``tokenizer.json``, eos ``[SEP]``, bos
      ``[CLS]``, ``PreTrainedTokenizerFast``), so a corpus store can hold its ids.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r}: use one of {', '.join(LAYOUTS)}")
    from nbkit.atomic import atomic_dir

    with atomic_dir(Path(out_dir), what="stand-in checkpoint") as tmp:
        _write(tmp, layout, seed, dict(hidden_size=hidden_size, num_hidden_layers=num_hidden_layers,
                                       num_attention_heads=num_attention_heads, intermediate_size=intermediate_size))
    return Path(out_dir)


def _write(out: Path, layout: str, seed: int, sizes: dict) -> None:
    if layout in CAUSAL_LAYOUTS:
        _write_causal(out, layout, seed, sizes)
        return
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertForPreTraining

    from nbkit.models.loading import seeded

    vocab = chinese_vocab()
    (out / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
    config = BertConfig(vocab_size=VOCAB_SIZE, max_position_embeddings=POSITIONS, type_vocab_size=2, pad_token_id=0,
                        **sizes)
    with seeded(seed):
        model = (BertForPreTraining if layout == "bert-base-chinese" else BertForMaskedLM)(config)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()
             if not k.startswith("cls.predictions.decoder.")}           # tied to the word embeddings
    saved = config.to_dict()
    for k in ("transformers_version", "dtype", "torch_dtype", "use_cache", "return_dict", "output_hidden_states"):
        saved.pop(k, None)
    saved["architectures"] = ["BertForMaskedLM"]
    if layout == "bert-base-chinese":
        from safetensors.torch import save_file

        saved.update(directionality="bidi", pooler_type="first_token_transform")
        legacy = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
                  for k, v in state.items()}
        save_file(legacy, str(out / "model.safetensors"), metadata={"format": "pt"})
        jsonio.write_json(out / "tokenizer_config.json", {"do_lower_case": False, "model_max_length": POSITIONS})
        bert_chinese_tokenizer(vocab).save(str(out / "tokenizer.json"))
    else:
        saved["tokenizer_class"] = "BertTokenizerFast"
        torch.save(state, out / "pytorch_model.bin")
        jsonio.write_json(out / "tokenizer_config.json", {"do_lower_case": False, "tokenizer_class": "BertTokenizerFast",
                                                          "model_max_length": POSITIONS})
        jsonio.write_json(out / "special_tokens_map.json", SPECIALS)
    jsonio.write_json(out / "config.json", saved)


def _write_causal(out: Path, layout: str, seed: int, sizes: dict) -> None:
    """The ``uer-gpt2`` / ``llama`` layouts of :func:`build_standin`."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    from nbkit.models.loading import quiet_transformers, seeded

    vocab = chinese_vocab()
    ids = {t: i for i, t in enumerate(vocab)}
    d, n_layers, heads, inner = (sizes[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                                   "intermediate_size"))
    if layout == "uer-gpt2":
        with quiet_transformers():                       # its warning about the out-of-vocabulary ids
                config = GPT2Config(vocab_size=VOCAB_SIZE, n_positions=1024, n_embd=d, n_layer=n_layers, n_head=heads,
                                n_inner=inner)           # bos/eos 50256: GPT-2's, as UER's config keeps them
        with seeded(seed):
            model = GPT2LMHeadModel(config)
    else:
        config = LlamaConfig(vocab_size=VOCAB_SIZE, max_position_embeddings=POSITIONS, hidden_size=d,
                             num_hidden_layers=n_layers, num_attention_heads=heads, num_key_value_heads=heads,
                             intermediate_size=inner, tie_word_embeddings=True, bos_token_id=ids["[CLS]"],
                             eos_token_id=ids["[SEP]"], pad_token_id=ids["[PAD]"])
        with seeded(seed):
            model = LlamaForCausalLM(config)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    saved = config.to_dict()
    for k in ("transformers_version", "dtype", "torch_dtype", "return_dict", "output_hidden_states"):
        saved.pop(k, None)
    saved["architectures"] = [type(model).__name__]
    if layout == "uer-gpt2":
        saved["tokenizer_class"] = "BertTokenizer"
        (out / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
        torch.save(state, out / "pytorch_model.bin")
        jsonio.write_json(out / "tokenizer_config.json", {"do_lower_case": False, "tokenizer_class": "BertTokenizer",
                                                          "model_max_length": 1024})
        jsonio.write_json(out / "special_tokens_map.json", SPECIALS)
    else:
        from safetensors.torch import save_file

        save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
        bert_chinese_tokenizer(vocab).save(str(out / "tokenizer.json"))
        jsonio.write_json(out / "tokenizer_config.json", {"tokenizer_class": "PreTrainedTokenizerFast",
                                                          "model_max_length": POSITIONS, "bos_token": "[CLS]",
                                                          "eos_token": "[SEP]", **SPECIALS})
    jsonio.write_json(out / "config.json", saved)
