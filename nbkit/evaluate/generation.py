"""Text generation from a causal LM: greedy or sampled (temperature, top-k, top-p), seeded, Chinese without spaces.

A thin, checked front to ``model.generate`` with a ``transformers.GenerationConfig`` (no sampler of nbkit's
own): every input a user can get wrong is refused with the fix before transformers sees it, and the same
``seed`` gives the same text on a rerun (sampling draws from torch's generator, seeded and restored here).
"""
from __future__ import annotations

from pathlib import Path

from nbkit.errors import ConfigError, DataError


def generate(model, tokenizer, prompt: str | list[str], *, max_new_tokens: int | None = None, do_sample: bool = False,
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None, seed: int = 0,
             full_text: bool = True, repetition_penalty: float | None = None,
             no_repeat_ngram_size: int | None = None) -> str | list[str]:
    """``prompt`` continued by ``model`` (a GPT-2 / Llama causal LM, or its saved folder; ``tokenizer`` an
    object, a folder, or None with a folder) for at most ``max_new_tokens`` tokens (None: up to the end of the
    model's context, what a bare ``pipeline("text-generation")`` call on the export writes).

    ``do_sample=False``: greedy; ``True``: sampled at ``temperature``, cut to ``top_k`` and ``top_p``, with
    ``seed``. ``repetition_penalty`` and ``no_repeat_ngram_size``: ``model.generate``'s own. Stops early at the
    model's eos. The prompt is encoded as the opening of a document (:func:`nbkit.text.causal.prompt_ids`), as an
    exported model's pipeline encodes it. Returns the prompt and the continuation (``full_text=False``: the
    continuation only), Chinese unspaced, special tokens dropped; a list of prompts gives a list of texts, each
    generated as if alone.

    Raises:
        ConfigError: ``model`` not a causal LM, a generation setting out of range
            (:func:`nbkit.models.causal.generation_config`), or ``max_new_tokens`` past the model's context.
        DataError: an empty prompt (or list), a prompt neither text nor a list of texts, or a prompt that leaves
            no room for ``max_new_tokens`` (None: one token) in the context (the numbers and fixes named).
    """
    import torch

    from nbkit.models.causal import generation_config, is_causal_lm, positions
    from nbkit.models.loading import quiet_transformers
    from nbkit.switches import model_mode
    from nbkit.text.causal import prompt_ids
    from nbkit.text.tokenizer_files import cjk_decoding

    if isinstance(model, (str, Path)):                 # a saved folder (export_causal_lm, a run's model/)
        model, tokenizer = _load(model, tokenizer)
    elif isinstance(tokenizer, (str, Path)):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
    if not is_causal_lm(model):
        kind = getattr(getattr(model, "config", None), "model_type", None)
        raise ConfigError(f"generate takes a causal LM (GPT-2 / Llama), got a {kind!r} model ({type(model).__name__}): "
                          "a masked LM fills in [MASK]s instead; use nbkit.evaluate.probes.fill_mask(model, tokenizer), "
                          "or pretrain with PretrainConfig(objective='causal') to get a model that writes")
    context = positions(model.config)
    gen = generation_config(model.config, max_new_tokens, do_sample, temperature, top_k, top_p, repetition_penalty,
                            no_repeat_ngram_size)                       # ConfigError: a setting out of range
    if isinstance(prompt, (list, tuple)):
        if not prompt:
            raise DataError("prompt=[]: give at least one text to continue (e.g. ['今天天气'])")
        return [generate(model, tokenizer, p, max_new_tokens=max_new_tokens, do_sample=do_sample,
                         temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, full_text=full_text,
                         repetition_penalty=repetition_penalty, no_repeat_ngram_size=no_repeat_ngram_size)
                for p in prompt]
    if not isinstance(prompt, str):
        raise DataError(f"prompt={prompt!r} is a {type(prompt).__name__}; give a text (str) or a list of texts")
    if not prompt.strip():
        raise DataError(f"prompt={prompt!r}: give some text to continue (e.g. '今天天气'); a causal LM needs at least "
                        "one token of context")
    ids = torch.tensor([prompt_ids(tokenizer, prompt)])                                   # (1, T)
    n_prompt = int(ids.shape[1])
    if n_prompt == 1:
        raise DataError(f"prompt={prompt!r} gives no token with this tokenizer; give text it knows")
    if n_prompt + (max_new_tokens or 1) > context:
        raise DataError(_too_long(tokenizer, prompt, n_prompt, max_new_tokens, context))
    device = next(model.parameters()).device
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), model_mode(model, training=False), torch.no_grad(), \
            quiet_transformers():
        torch.manual_seed(seed)
        out = model.generate(input_ids=ids.to(device), attention_mask=torch.ones_like(ids).to(device),
                             generation_config=gen)                                         # (1, T + new)
    backend = cjk_decoding(tokenizer)
    new = out[0, n_prompt:].tolist()
    text = backend.decode(new, skip_special_tokens=True)
    if not full_text:
        return text
    joined = backend.decode(out[0].tolist(), skip_special_tokens=True)
    head = backend.decode(ids[0].tolist(), skip_special_tokens=True)
    return prompt + joined[len(head):] if joined.startswith(head) else prompt + text


def _too_long(tokenizer, prompt: str, n_prompt: int, max_new_tokens: int | None, context: int) -> str:
    """The refusal of a prompt of ``n_prompt`` tokens (the separator included) that leaves no room for
    ``max_new_tokens`` (None: one token) in ``context``, with the fixes that exist and their numbers."""
    keep = context - (max_new_tokens or 1) - 1           # text tokens that fit beside the separator (>= 1: checked)
    where = ""
    try:
        offsets = tokenizer(prompt, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        where = f": prompt[{offsets[-keep][0]}:]"
    except (NotImplementedError, KeyError, IndexError, TypeError, ValueError):   # a slow tokenizer: no offsets
        pass
    fixes = [f"keep the prompt's last {keep} tokens{where}"]
    if max_new_tokens is not None and context - n_prompt >= 1:
        fixes.append(f"lower max_new_tokens to {context - n_prompt}")
    asked = "one new token" if max_new_tokens is None else f"max_new_tokens={max_new_tokens}"
    return (f"the prompt is {n_prompt} tokens and {asked}, {n_prompt + (max_new_tokens or 1)} in "
            f"all (the document separator included), past the model's context of {context} tokens: shorten the "
            f"prompt ({'; or '.join(fixes)})")


def repeated_ngrams(text: str, n: int = 3) -> float:
    """The share (0-1) of ``text``'s character ``n``-grams that already occurred earlier in it (spaces dropped):
    0 for text that never repeats itself, near 1 for a greedy loop ("旗旗旗旗..."). Characters, not tokens, so
    two tokenizers' outputs compare; for Chinese a character is about a token. 0.0 for text under ``n + 1``
    characters."""
    chars = "".join(text.split())
    grams = [chars[i:i + n] for i in range(len(chars) - n + 1)]
    seen: set[str] = set()
    repeats = 0
    for g in grams:
        repeats += g in seen
        seen.add(g)
    return repeats / len(grams) if len(grams) > 1 else 0.0


def _load(folder, tokenizer):
    """``(model, tokenizer)`` of a saved causal-LM folder (the tokenizer saved there unless one is given), or
    ConfigError for a masked LM's folder, saying what to use instead."""
    from transformers import AutoTokenizer

    from nbkit.models.causal import MODEL_TYPES, load_causal_model
    from nbkit.models.loading import saved_config

    kind = (saved_config(folder) or {}).get("model_type")
    if kind not in MODEL_TYPES:
        raise ConfigError(f"{str(folder)!r} holds a {kind!r} model, not a causal LM: a masked LM fills in [MASK]s "
                          "instead of writing; use nbkit.evaluate.probes.fill_mask on it, or generate from a causal "
                          "model (PretrainConfig(objective='causal') writes one to <run>/model)")
    model = load_causal_model(folder)[0]
    tok = tokenizer if tokenizer is not None and not isinstance(tokenizer, (str, Path)) else \
        AutoTokenizer.from_pretrained(str(tokenizer or folder))
    return model, tok
