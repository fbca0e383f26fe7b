"""Causal-LM blocks packed from a token stream and their collator: next-token labels, shifted here.

Texts are tokenized without ``[CLS]``, each followed by the document separator (``[SEP]`` for a
BERT-vocabulary tokenizer, else eos: :func:`document_separator`), concatenated and cut
into blocks of exactly ``block_size`` tokens (GPT-2's and nanoGPT's packing: no padding, attention runs across
a separator, which the model learns to treat as a document end). Each block also records the stream's next
token, so every position of a block has a target.
"""
from __future__ import annotations

import torch

from nbkit.errors import ConfigError, DataError
from nbkit.text.mlm import IGNORE_INDEX


def document_separator(tokenizer) -> tuple[int, str]:
    """``(id, token)`` written between documents of a causal stream: ``[SEP]`` for a BERT-vocabulary tokenizer
    (the store already ends every document with it, and UER's Chinese GPT-2 over that vocabulary marks text
    ends with it), else ``eos`` (Llama's ``</s>``, GPT-2's ``<|endoftext|>``). The model learns to predict it,
    so generation stops there (it is the model's ``eos_token_id``).

    Raises:
        ConfigError: a tokenizer with neither.
    """
    for name in ("sep", "eos"):
        i = getattr(tokenizer, f"{name}_token_id", None)
        if i is not None:
            return int(i), str(getattr(tokenizer, f"{name}_token"))
    raise ConfigError("the tokenizer has neither a [SEP] nor an eos token to separate documents; use a BERT-style "
                      "WordPiece (nbkit.text.train_wordpiece) or a tokenizer with an eos token")


def prompt_ids(tokenizer, prompt: str) -> list[int]:
    """A prompt's ids as a causal LM trained on packed documents reads one: the document separator (the end of
    the previous document: :func:`document_separator`), then the text without ``[CLS]``/``[SEP]``."""
    sep, _ = document_separator(tokenizer)
    return [sep, *tokenizer(prompt, add_special_tokens=False)["input_ids"]]


def make_causal_blocks(dataset, tokenizer, block_size: int, text_column: str = "text",
                       max_position_embeddings: int | None = None, num_proc: int | None = None):
    """Blocks of ``block_size`` tokens cut from the texts of each ``datasets.map`` batch of 1,000, every text
    followed by the separator (each batch's short tail dropped, as ``run_clm.py`` does).

    Returns columns ``input_ids`` (``block_size`` ids) and ``next_id`` (the stream's token after the block,
    -100 after a batch's last block), for :class:`CausalCollator`.

    Raises:
        ConfigError: ``block_size`` below 2 or above ``max_position_embeddings`` / ``tokenizer.model_max_length``.
        DataError: a missing column, or too little text for one block.
    """
    limits = {"tokenizer.model_max_length": getattr(tokenizer, "model_max_length", None),
              "the model's positions": max_position_embeddings}
    for what, limit in limits.items():
        if limit is not None and block_size > limit:
            raise ConfigError(f"block_size={block_size} exceeds {what}={limit}; use block_size <= {limit}")
    if block_size < 2:
        raise ConfigError(f"block_size={block_size}: a causal block needs at least 2 tokens; use e.g. 128")
    if text_column not in dataset.column_names:
        raise DataError(f"column {text_column!r} not in dataset columns {dataset.column_names}; pass text_column=...")
    sep, _ = document_separator(tokenizer)

    def blocks(batch):
        enc = tokenizer(batch[text_column], add_special_tokens=False, verbose=False)["input_ids"]
        ids = [t for row in enc if row for t in (*row, sep)]
        n = len(ids) // block_size * block_size
        return {"input_ids": [ids[i:i + block_size] for i in range(0, n, block_size)],
                "next_id": [ids[i + block_size] if i + block_size < len(ids) else IGNORE_INDEX
                            for i in range(0, n, block_size)]}

    result = dataset.map(blocks, batched=True, batch_size=1000, remove_columns=dataset.column_names,
                         num_proc=num_proc, desc=f"causal blocks of {block_size}")
    if len(result) == 0:
        raise DataError(f"the corpus has fewer than {block_size} tokens per 1,000 texts, so no block of {block_size} "
                        "fits; use more text or a smaller block_size")
    return result


class CausalCollator:
    """Pad blocks and set next-token labels: ``labels[:, t] = input_ids[:, t + 1]``, the last position's label
    the block's ``next_id`` (-100 without one), -100 at padding. The loop computes CE over the labels itself
    (it never passes them to the model, which would shift them again).

    ``examples``: dicts with ``input_ids`` (T_i,) and optionally ``next_id`` (int). Returns ``input_ids``,
    ``attention_mask``, ``labels``: (B, T) int64, T the longest row rounded up to ``pad_to_multiple_of``.

    Raises:
        ConfigError: a tokenizer without a pad token nor a separator.
        DataError: an empty batch.
    """

    def __init__(self, tokenizer, pad_to_multiple_of: int | None = None):
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else document_separator(tokenizer)[0]
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        if not examples:
            raise DataError("CausalCollator got an empty batch")
        rows = [torch.as_tensor(ex["input_ids"], dtype=torch.long) for ex in examples]
        length = max(len(r) for r in rows)
        if self.pad_to_multiple_of:
            length = -(-length // self.pad_to_multiple_of) * self.pad_to_multiple_of
        b = len(rows)
        input_ids = torch.full((b, length), self.pad_id, dtype=torch.long)        # (B, T)
        attention_mask = torch.zeros((b, length), dtype=torch.long)               # (B, T)
        labels = torch.full((b, length), IGNORE_INDEX, dtype=torch.long)          # (B, T)
        for i, (row, ex) in enumerate(zip(rows, examples)):
            n = len(row)
            input_ids[i, :n] = row
            attention_mask[i, :n] = 1
            labels[i, :n - 1] = row[1:]
            nxt = ex.get("next_id", IGNORE_INDEX)
            labels[i, n - 1] = int(nxt) if nxt is not None else IGNORE_INDEX
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
