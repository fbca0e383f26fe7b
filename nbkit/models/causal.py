"""Causal (GPT-style) language models: GPT-2 and Llama presets built from config, a published causal LM loaded.

``GPT2LMHeadModel`` (Radford et al. 2019) at the BERT presets' sizes and GPT-2 small's, and ``LlamaForCausalLM``
(Touvron et al. 2023: RMSNorm, rotary positions, SwiGLU) as the modern choice. Both tie the output layer to the
token embeddings (at these sizes the head would otherwise be most of the weights). Special ids come from the
tokenizer: ``eos`` = the document separator, ``bos`` = ``[CLS]`` where there is one, ``pad`` = ``[PAD]``.
"""
from __future__ import annotations

import json
from pathlib import Path

from nbkit.errors import CheckpointError, ConfigError
from nbkit.text.mlm import document_separator

#: preset -> (family, config kwargs). GPT-2 kwargs are GPT2Config's, Llama's LlamaConfig's.
PRESETS: dict[str, tuple[str, dict]] = {
    "gpt2-tiny": ("gpt2", dict(n_embd=64, n_layer=2, n_head=2, n_inner=256, n_positions=128)),
    "gpt2-narrow": ("gpt2", dict(n_embd=128, n_layer=4, n_head=2, n_inner=512, n_positions=128)),
    "gpt2-mini": ("gpt2", dict(n_embd=256, n_layer=4, n_head=4, n_inner=1024, n_positions=512)),
    # GPT-2 small (Radford et al. 2019, the 124 M "gpt2" on the Hub): L12/H768, 1,024 positions
    "gpt2-small": ("gpt2", dict(n_embd=768, n_layer=12, n_head=12, n_inner=3072, n_positions=1024)),
    # SwiGLU's hidden width 8/3 d rounded up to a multiple of 16 (LLaMA rounds to 256 at its sizes)
    "llama-tiny": ("llama", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=176,
                                 max_position_embeddings=128)),
    "llama-narrow": ("llama", dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=2,
                                   intermediate_size=352, max_position_embeddings=128)),
    "llama-mini": ("llama", dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                 intermediate_size=688, max_position_embeddings=512)),
}
#: ``config.model_type`` of the causal LMs nbkit trains and continues
MODEL_TYPES = ("gpt2", "llama")
ATTN_IMPLEMENTATION = "sdpa"


def family_preset(family: str, size: str) -> str | None:
    """The causal preset of ``family`` (``"gpt2"``/``"llama"``) at a BERT preset's ``size`` (``"narrow"`` ->
    ``"gpt2-narrow"``), None when there is none: how a sized plan's BERT choice maps to a causal model."""
    name = f"{family}-{size}"
    return name if name in PRESETS and not (family == "gpt2" and size == "small") else None


def special_ids(tokenizer) -> dict:
    """``{"bos_token_id", "eos_token_id", "pad_token_id"}`` for a causal config from ``tokenizer``:
    eos the separator, bos ``[CLS]`` (else bos, else eos), pad ``[PAD]`` (else eos)."""
    eos, _ = document_separator(tokenizer)
    bos = next((i for i in (tokenizer.cls_token_id, tokenizer.bos_token_id) if i is not None), eos)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    return {"bos_token_id": int(bos), "eos_token_id": eos, "pad_token_id": int(pad)}


def build_causal_config(preset: str, vocab_size: int, block_size: int | None = None, dropout: float | None = None,
                        **ids):
    """A ``GPT2Config`` / ``LlamaConfig`` for ``preset`` (:data:`PRESETS`): ``vocab_size`` rows, tied embeddings,
    SDPA attention, ``block_size`` positions (None: the preset's), ``dropout`` (None: GPT-2's 0.1, Llama's 0.0),
    ``ids``: :func:`special_ids`.

    Raises:
        ConfigError: an unknown preset (the presets listed), a non-positive size.
    """
    from transformers import GPT2Config, LlamaConfig

    if preset not in PRESETS:
        raise ConfigError(f"unknown causal preset {preset!r}; choose one of {', '.join(PRESETS)}")
    if vocab_size <= 0:
        raise ConfigError(f"vocab_size={vocab_size} must be positive; pass len(tokenizer)")
    family, kwargs = PRESETS[preset]
    kwargs = dict(kwargs)
    if family == "gpt2":
        if block_size is not None:
            kwargs["n_positions"] = block_size
        if dropout is not None:
            kwargs.update(resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout)
        config = GPT2Config(vocab_size=vocab_size, tie_word_embeddings=True, **kwargs, **ids)
    else:
        if block_size is not None:
            kwargs["max_position_embeddings"] = block_size
        kwargs["num_key_value_heads"] = kwargs["num_attention_heads"]
        config = LlamaConfig(vocab_size=vocab_size, tie_word_embeddings=True, rms_norm_eps=1e-6,
                             attention_dropout=dropout or 0.0, **kwargs, **ids)
    config._attn_implementation = ATTN_IMPLEMENTATION
    return config


def build_causal_model(preset: str, tokenizer, block_size: int, seed: int | None = 0, dropout: float | None = None):
    """A randomly initialised ``GPT2LMHeadModel`` or ``LlamaForCausalLM`` for ``tokenizer`` (its vocabulary and
    :func:`special_ids`) with ``block_size`` positions: ``input_ids`` (B, T <= block_size) -> ``logits`` (B, T, V).
    ``seed``: weights drawn under :func:`nbkit.models.loading.seeded`; None draws from the global RNG.

    Raises:
        ConfigError: unknown preset; ``block_size`` below 2 or above the preset's positions (both named).
    """
    from transformers import GPT2LMHeadModel, LlamaForCausalLM

    from nbkit.models.loading import seeded

    config = build_causal_config(preset, len(tokenizer), block_size, dropout, **special_ids(tokenizer))
    family, kwargs = PRESETS[preset]
    limit = kwargs.get("n_positions") or kwargs.get("max_position_embeddings")
    if not 2 <= block_size <= limit:
        raise ConfigError(f"block_size={block_size} outside 2..{limit}, the {preset!r} model's positions "
                          f"(n_positions / max_position_embeddings); use block_size <= {limit}")
    with seeded(seed):
        return (GPT2LMHeadModel if family == "gpt2" else LlamaForCausalLM)(config)


def positions(config) -> int:
    """The context of a causal config in tokens (``n_positions`` / ``max_position_embeddings``)."""
    return int(getattr(config, "n_positions", None) or config.max_position_embeddings)


def check_generation_args(max_new_tokens: int | None, do_sample: bool, temperature: float, top_k: int | None,
                          top_p: float | None, context: int | None = None, repetition_penalty: float | None = None,
                          no_repeat_ngram_size: int | None = None) -> None:
    """Raise ``ConfigError``, naming the valid range, for ``max_new_tokens < 1`` or above ``context - 2`` (the
    model's positions), ``temperature <= 0``, ``top_k < 1``, ``top_p`` outside (0, 1], ``repetition_penalty <= 0``
    or ``no_repeat_ngram_size < 1``."""
    def whole(v) -> bool:   # a whole number >= 1, not a bool
        return isinstance(v, int) and not isinstance(v, bool) and v >= 1

    if max_new_tokens is not None and not whole(max_new_tokens):
        raise ConfigError(f"max_new_tokens={max_new_tokens!r}: use a whole number >= 1 (tokens to add), or None "
                          "(up to the end of the model's context)")
    if max_new_tokens is not None and context is not None and max_new_tokens > context - 2:
        raise ConfigError(f"max_new_tokens={max_new_tokens} leaves no room for a prompt in the model's context of "
                          f"{context} tokens (the separator and one token at least); use max_new_tokens <= "
                          f"{context - 2}")
    if do_sample and not temperature > 0:
        raise ConfigError(f"temperature={temperature!r}: use a number > 0 (1.0: the model's distribution; lower is "
                          "more conservative), or do_sample=False for greedy decoding")
    if top_k is not None and not whole(top_k):
        raise ConfigError(f"top_k={top_k!r}: use a whole number >= 1, or None for no top-k cut")
    if top_p is not None and not 0 < top_p <= 1:
        raise ConfigError(f"top_p={top_p!r}: use a share in (0, 1] (e.g. 0.9), or None for no nucleus cut")
    if repetition_penalty is not None and (isinstance(repetition_penalty, bool) or not repetition_penalty > 0):
        raise ConfigError(f"repetition_penalty={repetition_penalty!r}: use a number > 0 (1.0: none; 1.1-1.5 "
                          "discourages tokens already in the text), or None")
    if no_repeat_ngram_size is not None and not whole(no_repeat_ngram_size):
        raise ConfigError(f"no_repeat_ngram_size={no_repeat_ngram_size!r}: use a whole number >= 1 (e.g. 3: no "
                          "3-gram of tokens twice), or None")


def generation_config(model_config, max_new_tokens: int | None = None, do_sample: bool = False,
                      temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                      repetition_penalty: float | None = None, no_repeat_ngram_size: int | None = None):
    """The checked (:func:`check_generation_args`) ``transformers.GenerationConfig`` of one generation call: at most
    ``max_new_tokens`` new tokens, or with None ``max_length`` = the context (:func:`positions`; a fixed count past
    GPT-2's position table raises IndexError in transformers, a full context a ValueError naming both lengths);
    greedy or sampled (``temperature``, ``top_k``, ``top_p``), ``repetition_penalty`` (CTRL's, Keskar et al. 2019)
    and ``no_repeat_ngram_size``; ``model_config``'s special ids (pad: eos where there is none). Every field is
    set, so an export's bare pipeline call decodes as ``generate`` does, not by the pipeline's defaults.

    Raises:
        ConfigError: a setting out of range (:func:`check_generation_args`).
    """
    from transformers import GenerationConfig

    cfg = model_config
    context = positions(cfg)
    check_generation_args(max_new_tokens, do_sample, temperature, top_k, top_p, context, repetition_penalty,
                          no_repeat_ngram_size)
    controls = {k: v for k, v in (("repetition_penalty", repetition_penalty),
                                  ("no_repeat_ngram_size", no_repeat_ngram_size)) if v is not None}
    length = {"max_length": context} if max_new_tokens is None else {"max_new_tokens": max_new_tokens}
    return GenerationConfig(**length, do_sample=do_sample, use_cache=True,
                            eos_token_id=cfg.eos_token_id, bos_token_id=cfg.bos_token_id,
                            pad_token_id=cfg.pad_token_id if cfg.pad_token_id is not None else cfg.eos_token_id,
                            **({"temperature": float(temperature), "top_k": top_k or 0, "top_p": top_p or 1.0}
                               if do_sample else {}), **controls)


def is_causal_lm(model) -> bool:
    """True for a GPT-2 / Llama causal LM (``config.model_type`` in :data:`MODEL_TYPES`)."""
    return getattr(getattr(model, "config", None), "model_type", None) in MODEL_TYPES


def fused_output_weight(model):
    """The output layer's weight (V, d) when the loop may fuse it with the loss
    (:func:`nbkit.train.loss.linear_cross_entropy_sum`): a GPT-2 / Llama causal LM whose head is a plain bias-free
    ``nn.Linear`` on the base model's ``last_hidden_state``; else None."""
    import torch

    head = model.get_output_embeddings() if is_causal_lm(model) else None
    if type(head) is not torch.nn.Linear or head.bias is not None:
        return None
    return head.weight


def causal_class(model_type: str):
    """``GPT2LMHeadModel`` / ``LlamaForCausalLM`` for a config's ``model_type``."""
    from transformers import GPT2LMHeadModel, LlamaForCausalLM

    return {"gpt2": GPT2LMHeadModel, "llama": LlamaForCausalLM}[model_type]


def read_causal_config(folder: Path, source: str) -> dict:
    """``config.json`` of the checkpoint ``folder`` (``model_type`` filled in from ``architectures`` where missing)
    when it is a causal LM nbkit continues, else ConfigError (a BERT: use ``objective="mlm"``). CheckpointError:
    no model type to be read."""
    from nbkit.models.loading import checkpoint_model_type

    saved = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    kind = saved["model_type"] = checkpoint_model_type(saved, source)
    if kind == "bert":
        raise ConfigError(f"init={source!r} is a BERT masked LM ({saved.get('architectures')}), but objective='causal' "
                          "needs a causal LM (GPT2LMHeadModel: uer/gpt2-chinese-cluecorpussmall; LlamaForCausalLM); "
                          "continue it with objective='mlm', or pass a causal checkpoint")
    if kind not in MODEL_TYPES:
        raise ConfigError(f"init={source!r} is a {kind!r} model ({saved.get('architectures')}); objective='causal' "
                          f"continues {' / '.join(MODEL_TYPES)} causal LMs (GPT2LMHeadModel, LlamaForCausalLM)")
    return saved


def load_causal_model(source, tokenizer=None, dropout: float | None = None):
    """The causal LM ``source`` (a GPT-2 or Llama folder or Hub name) with every weight of the checkpoint loaded.
    With ``tokenizer``: special ids outside the vocabulary (UER's GPT-2 keeps GPT-2's eos 50256) are set from it; a
    list of ids (``eos_token_id`` of an SFT export or Llama 3) is kept when every id is in the vocabulary.
    Returns ``(model, report)``: ``source``, ``folder``, ``unused`` (weights not used, by name), ``stored_dtype``.

    Raises:
        ConfigError: a BERT or other non-causal checkpoint (which objective to use), a Hub name not available.
        CheckpointError: weights missing (named), shapes that differ, files that do not load.
    """
    from nbkit.models.loading import load_pretrained, resolve_checkpoint

    folder = resolve_checkpoint(source)
    saved = read_causal_config(folder, str(source))
    extra = {}
    if dropout is not None:
        extra = ({"resid_pdrop": dropout, "embd_pdrop": dropout, "attn_pdrop": dropout}
                 if saved["model_type"] == "gpt2" else {"attention_dropout": dropout})
    model, info = load_pretrained(causal_class(saved["model_type"]), folder, seed=None,
                                  attn_implementation=ATTN_IMPLEMENTATION, **extra)
    missing = sorted(k for k in info.get("missing_keys") or []
                     if not (k == "lm_head.weight" and model.config.tie_word_embeddings))
    if missing:
        raise CheckpointError(
            f"init={str(source)!r} lacks {len(missing)} weights of a {saved['model_type']} causal LM, which would "
            f"start random: {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}. Pass a complete causal-LM "
            "checkpoint (GPT2LMHeadModel / LlamaForCausalLM saved with save_pretrained)")
    if tokenizer is not None:
        vocab = model.config.vocab_size
        for key, value in special_ids(tokenizer).items():
            now = getattr(model.config, key, None)    # an id, or a list of them (an SFT export's, Llama 3's eos)
            if now is None or not all(0 <= int(i) < vocab for i in (now if isinstance(now, list) else [now])):
                setattr(model.config, key, value)
                setattr(model.generation_config, key, value)
    return model, {"source": str(source), "folder": str(folder),
                   "unused": sorted(info.get("unexpected_keys") or []), "stored_dtype": info.get("stored_dtype")}
