"""Conversations to model inputs through the tokenizer's own chat template: the template, the encoding with the
assistant-only loss mask, and the padding collator.

``apply_chat_template`` is the one encoder of conversations, so nbkit's training and generation, an exported
``pipeline("text-generation")`` and TRL's ``SFTTrainer`` read the same ids: the template lives in the tokenizer files
(:func:`store_chat_template`), and its ``{% generation %}`` span marks the assistant's tokens for
``return_assistant_tokens_mask`` (no role parsing here). nbkit's own template and its four markers: docs/instruct.md.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from nbkit.errors import ConfigError, DataError
from nbkit.text.causal import CausalCollator
from nbkit.text.mlm import IGNORE_INDEX, document_separator

#: BERT-vocabulary slots taken as the markers of system, user, assistant and end of turn (no resize)
UNUSED_MARKERS = ("[unused1]", "[unused2]", "[unused3]", "[unused4]")
#: the same markers added as new special tokens where the vocabulary has no ``[unused*]`` slots (resize)
NEW_MARKERS = ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>")
#: what :func:`encode_conversations` does with a conversation longer than the context
OVERFLOW = ("drop", "truncate")
#: a ``{% generation %}`` block (also ``{%- generation -%}``), the marking ``return_assistant_tokens_mask`` needs
_GENERATION = re.compile(r"\{%-?\s*generation\s*-?%\}")


def nbkit_chat_template(start: str, markers: Sequence[str] = UNUSED_MARKERS) -> str:
    """nbkit's Jinja chat template: ``start`` (the document separator), then per message its role's marker
    (``markers``: system, user, assistant, end of turn), the content and the end-of-turn marker; the assistant's
    content and end-of-turn marker inside ``{% generation %}``, so they carry the loss and the model learns to stop.
    ``add_generation_prompt`` appends the assistant marker; an unknown role raises in the template."""
    system, user, assistant, end = (repr(m) for m in markers)
    return (
        f"{{{{ {start!r} }}}}"
        "{% for message in messages %}"
        "{% if message['role'] == 'assistant' %}"
        f"{{{{ {assistant} }}}}{{% generation %}}{{{{ message['content'] }}}}{{{{ {end} }}}}{{% endgeneration %}}"
        f"{{% elif message['role'] == 'user' %}}{{{{ {user} + message['content'] + {end} }}}}"
        f"{{% elif message['role'] == 'system' %}}{{{{ {system} + message['content'] + {end} }}}}"
        "{% else %}{{ raise_exception('unknown role ' + message['role'] + ': use system, user or assistant') }}"
        "{% endif %}{% endfor %}"
        f"{{% if add_generation_prompt %}}{{{{ {assistant} }}}}{{% endif %}}")


def with_chat_template(tok, chat_template: str | None = None) -> dict:
    """Give ``tok`` (a fast tokenizer; changed in place) a chat template that marks the assistant's tokens, and
    return what was done: ``{"how", "end_of_turn_id", "end_of_turn", "added_tokens"}``.

    ``chat_template`` (Jinja) replaces the tokenizer's own (``how="given"``); else an existing template is kept
    (``"kept"``); else :func:`nbkit_chat_template` with ``[unused1..4]`` as markers where the vocabulary has them
    (``"unused"``), or :data:`NEW_MARKERS` added (``"added"``: the model needs :func:`fit_embeddings`). Idempotent.
    ``end_of_turn_id``: where generation is to stop (:func:`end_of_turn_id`).

    Raises:
        ConfigError: a template without ``{% generation %}`` markers (the fix: e.g.
            ``trl.chat_template_utils.get_training_chat_template(tok)`` as ``chat_template``), one whose assistant span
            does not end in a special token, or a tokenizer without a separator or eos.
    """
    before = len(tok)
    if chat_template is not None:
        tok.chat_template, how = chat_template, "given"
    elif getattr(tok, "chat_template", None):
        how = "kept"
    else:
        how = "unused" if set(UNUSED_MARKERS) <= tok.get_vocab().keys() else "added"
        markers = UNUSED_MARKERS if how == "unused" else NEW_MARKERS
        tok.add_special_tokens({"additional_special_tokens": list(markers)}, replace_extra_special_tokens=False)
        tok.chat_template = nbkit_chat_template(document_separator(tok)[1], markers)
    template = tok.chat_template if isinstance(tok.chat_template, str) else tok.chat_template.get("default")
    if not (template and _GENERATION.search(template)):
        raise ConfigError(
            "the tokenizer's chat template has no {% generation %} / {% endgeneration %} markers, so "
            "apply_chat_template cannot say which tokens are the assistant's (the loss mask). Fix: pass a template "
            "that wraps the assistant's content and end-of-turn token in them as chat_template=... (for Llama 3, "
            "Qwen, Gemma and others trl.chat_template_utils.get_training_chat_template(tokenizer) returns one), or "
            "delete the tokenizer's chat_template to use nbkit's")
    eot = end_of_turn_id(tok)
    return {"how": how, "end_of_turn_id": eot, "end_of_turn": tok.convert_ids_to_tokens(eot),
            "added_tokens": len(tok) - before}


def end_of_turn_id(tok) -> int:
    """The id of the last token of an assistant turn under ``tok``'s template (the last one its assistant mask marks in
    a one-exchange probe).

    Raises:
        ConfigError: the mask is empty or ends in a token that is not special (the model would never learn to stop).
    """
    probe = [{"role": "user", "content": "1"}, {"role": "assistant", "content": "2"}]
    enc = tok.apply_chat_template(probe, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    marked = [i for i, m in zip(enc["input_ids"], enc["assistant_masks"]) if m]
    special = set(tok.all_special_ids)
    if not marked or marked[-1] not in special:
        raise ConfigError("the chat template's {% generation %} span does not end in a special end-of-turn token "
                          f"(it marks {tok.convert_ids_to_tokens(marked)} of a probe turn): a model trained on it "
                          "never learns to stop. Fix: move the end-of-turn token (e.g. <|eot_id|>) inside "
                          "{% generation %} ... {% endgeneration %}")
    return int(marked[-1])


def fit_embeddings(model, tok) -> int:
    """Grow ``model``'s token embeddings (and a tied or untied output layer) to ``len(tok)`` rows, the new rows
    the mean of the old (transformers' ``mean_resizing``), and return the rows added (0 when they fit).

    Raises:
        ConfigError: the tokenizer has fewer tokens than the model has rows and ids past it (never shrinks).
    """
    rows = model.get_input_embeddings().weight.shape[0]
    if len(tok) <= rows:
        return 0
    model.resize_token_embeddings(len(tok), mean_resizing=True)
    return len(tok) - rows


def encode_conversations(tok, conversations: Sequence[Sequence[dict]], max_length: int,
                         overflow: str = "drop") -> tuple[dict[str, list], dict]:
    """Encode conversations (each a list of ``{"role", "content"}`` messages) with ``tok``'s chat template.

    Returns ``(columns, report)``: ``columns`` ``input_ids`` and ``assistant_masks`` (per kept conversation, at most
    ``max_length`` ints; 1 where the template marks the assistant's tokens) and ``index`` (its position in
    ``conversations``). ``overflow``: a conversation over ``max_length`` tokens is dropped, or (``"truncate"``)
    cut, and dropped when no assistant token is left. ``report``: ``n_conversations``, ``n_kept``,
    ``n_dropped_too_long``, ``n_truncated``, ``n_dropped_no_target``, ``n_tokens``, ``n_target_tokens``,
    ``length_p50/p95/max`` (before any cut).

    Raises:
        ConfigError: ``overflow`` not one of :data:`OVERFLOW`, ``max_length`` below 2.
        DataError: no conversation left (the counts and the fix named).
    """
    import numpy as np

    if overflow not in OVERFLOW:
        raise ConfigError(f"overflow={overflow!r}: use one of {', '.join(OVERFLOW)}")
    if max_length < 2:
        raise ConfigError(f"max_length={max_length}: a conversation needs at least 2 tokens; use e.g. 256")
    ids_out, masks_out, index = [], [], []
    counts = dict.fromkeys(("n_dropped_too_long", "n_truncated", "n_dropped_no_target"), 0)
    lengths = []
    step = 1000
    for start in range(0, len(conversations), step):
        chunk = [list(c) for c in conversations[start:start + step]]
        enc = tok.apply_chat_template(chunk, tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
                                      tokenizer_kwargs={"verbose": False})      # overflow: counted below instead
        for k, (ids, mask) in enumerate(zip(enc["input_ids"], enc["assistant_masks"])):
            lengths.append(len(ids))
            if len(ids) > max_length:
                if overflow == "drop":
                    counts["n_dropped_too_long"] += 1
                    continue
                ids, mask = ids[:max_length], mask[:max_length]
                counts["n_truncated"] += 1
            if not any(mask[1:]):                    # position 0 is never a target (nothing before it)
                counts["n_dropped_no_target"] += 1
                continue
            ids_out.append(list(ids))
            masks_out.append(list(mask))
            index.append(start + k)
    arr = np.asarray(lengths or [0])
    report = {"n_conversations": len(conversations), "n_kept": len(ids_out), **counts,
              "n_tokens": int(sum(map(len, ids_out))), "n_target_tokens": int(sum(sum(m[1:]) for m in masks_out)),
              "length_p50": float(np.percentile(arr, 50)), "length_p95": float(np.percentile(arr, 95)),
              "length_max": int(arr.max()), "max_length": max_length, "overflow": overflow}
    if not ids_out:
        raise DataError(f"no conversation left to train on: {report['n_conversations']} read, "
                        f"{counts['n_dropped_too_long']} longer than {max_length} tokens dropped, "
                        f"{counts['n_dropped_no_target']} without an assistant token in the context. Fix: a larger "
                        "block_size" + (", overflow='truncate'," if overflow != "truncate" else "") + " or shorter "
                        "conversations")
    return {"input_ids": ids_out, "assistant_masks": masks_out, "index": index}, report


class ChatCollator(CausalCollator):
    """Pad encoded conversations (:func:`encode_conversations`), one per row, with next-token labels on the
    assistant's tokens only: ``labels[b, t] = input_ids[b, t + 1]`` where ``assistant_masks[b, t + 1]`` is 1, else
    -100. The loop's loss is a sum over label tokens divided by their count: the token-weighted mean over the batch.

    ``examples``: dicts with ``input_ids`` and ``assistant_masks`` (T_i,). Returns ``input_ids``, ``attention_mask``,
    ``labels``: (B, T) int64, T the longest row rounded up to ``pad_to_multiple_of``, padded on the right.

    Raises:
        DataError: an empty batch, or a row whose mask and ids differ in length.
    """

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        rows = [torch.as_tensor(ex["input_ids"], dtype=torch.long) for ex in examples]
        input_ids, attention_mask, labels = self.padded(rows)                    # (B, T) each
        for i, (ids, ex) in enumerate(zip(rows, examples)):
            mask = torch.as_tensor(ex["assistant_masks"], dtype=torch.bool)        # (T_i,)
            if ids.shape != mask.shape:
                raise DataError(f"conversation {i} of the batch has {len(ids)} ids but {len(mask)} mask entries; "
                                "encode it with nbkit.text.chat.encode_conversations")
            n = len(ids)
            labels[i, :n - 1] = torch.where(mask[1:], ids[1:], IGNORE_INDEX)       # (T_i - 1,) shifted targets
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def store_chat_template(folder) -> None:
    """Move ``folder``'s ``chat_template.jinja`` (transformers 5's ``save_pretrained``) into
    ``tokenizer_config.json``'s ``chat_template``, where transformers 4.x, 5.x and TRL read it; nothing without it."""
    from pathlib import Path

    from nbkit import jsonio

    folder = Path(folder)
    jinja, cfg_path = folder / "chat_template.jinja", folder / "tokenizer_config.json"
    if not jinja.is_file() or not cfg_path.is_file():
        return
    config = jsonio.loads_strict(cfg_path.read_text(encoding="utf-8"))
    config["chat_template"] = jinja.read_text(encoding="utf-8")
    jsonio.write_json(cfg_path, config)
    jinja.unlink()
