"""The causal LM's document separator and collator: next-token labels, shifted here.

Blocks are packed by :func:`nbkit.text.mlm.make_blocks` with ``causal=True`` (GPT-2's packing: no padding,
attention runs across a separator); each block records the stream's next token, so every position has a target.
"""
from __future__ import annotations

import torch

from nbkit.errors import DataError
from nbkit.text.mlm import IGNORE_INDEX, document_separator, pad_rows


def prompt_ids(tokenizer, prompt: str) -> list[int]:
    """A prompt's ids as a causal LM trained on packed documents reads one: the document separator (the end of the
    previous document), then the text without ``[CLS]``/``[SEP]``."""
    sep, _ = document_separator(tokenizer)
    return [sep, *tokenizer(prompt, add_special_tokens=False)["input_ids"]]


class CausalCollator:
    """Pad blocks and set next-token labels: ``labels[:, t] = input_ids[:, t + 1]``, the last position's label the
    block's ``next_id`` (-100 without one), -100 at padding. The loop computes CE over them itself (the model would
    shift them again).

    ``examples``: dicts with ``input_ids`` (T_i,) and optionally ``next_id``. Returns ``input_ids``,
    ``attention_mask``, ``labels``: (B, T) int64, T the longest row rounded up to ``pad_to_multiple_of``.

    Raises:
        ConfigError: a tokenizer without a pad token nor a separator.
        DataError: an empty batch.
    """

    def __init__(self, tokenizer, pad_to_multiple_of: int | None = None):
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else document_separator(tokenizer)[0]
        self.pad_to_multiple_of = pad_to_multiple_of

    def padded(self, rows: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(input_ids, attention_mask, labels)`` (B, T) of ``rows`` (T_i,) padded on the right as the class says;
        ``labels`` all -100, for the caller to set. Raises ``DataError`` for no row."""
        if not rows:
            raise DataError(f"{type(self).__name__} got an empty batch")
        input_ids = pad_rows(rows, self.pad_id, self.pad_to_multiple_of)                          # (B, T)
        attention_mask = pad_rows([torch.ones_like(r) for r in rows], 0, self.pad_to_multiple_of)  # (B, T)
        return input_ids, attention_mask, torch.full_like(input_ids, IGNORE_INDEX)

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        rows = [torch.as_tensor(ex["input_ids"], dtype=torch.long) for ex in examples]
        input_ids, attention_mask, labels = self.padded(rows)                    # (B, T) each
        for i, (row, ex) in enumerate(zip(rows, examples)):
            n = len(row)
            labels[i, :n - 1] = row[1:]
            nxt = ex.get("next_id", IGNORE_INDEX)
            labels[i, n - 1] = int(nxt) if nxt is not None else IGNORE_INDEX
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
