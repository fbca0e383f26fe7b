"""Blocks packed from documents (one packing for MLM and causal LM), BERT's masking collator (Devlin et al. 2019,
15 % with 80/10/10; whole words after Cui et al. 2019), and classification encoding.

Not ``transformers.DataCollatorForLanguageModeling``: in 5.x it may replace with special tokens and
leave a row without a target.
"""
from __future__ import annotations

import torch

from nbkit.errors import ConfigError, DataError
from nbkit.rng import current_scope

IGNORE_INDEX = -100  # label value that cross-entropy ignores


def check_length(name: str, value: int, tokenizer=None, max_position_embeddings: int | None = None,
                 minimum: int = 3) -> None:
    """Check the length ``value`` (tokens, ``[CLS]``/``[SEP]`` included) of argument ``name`` against
    ``tokenizer.model_max_length`` and ``max_position_embeddings`` (beyond it BERT fails with a raw size mismatch),
    each when given, and ``minimum``.

    Raises:
        ConfigError: ``value`` above a limit (both numbers named), or below ``minimum``.
    """
    limits = {}
    if tokenizer is not None:
        limits["tokenizer.model_max_length"] = tokenizer.model_max_length
    if max_position_embeddings is not None:
        limits["the model's max_position_embeddings"] = max_position_embeddings
    for what, limit in sorted(limits.items(), key=lambda item: item[1]):  # the binding limit first
        if value > limit:
            raise ConfigError(f"{name}={value} exceeds {what}={limit}; use {name} <= {limit}")
    if value < minimum:
        raise ConfigError(f"{name}={value} leaves no room for text (at least {minimum} tokens); use e.g. 128")


def document_separator(tokenizer) -> tuple[int, str]:
    """``(id, token)`` written between documents of a causal stream: ``[SEP]`` for a BERT-vocabulary tokenizer (UER's
    Chinese GPT-2 marks text ends with it too), else eos. The model learns to predict it, so generation stops there.

    Raises:
        ConfigError: a tokenizer with neither.
    """
    for name in ("sep", "eos"):
        i = getattr(tokenizer, f"{name}_token_id", None)
        if i is not None:
            return int(i), str(getattr(tokenizer, f"{name}_token"))
    raise ConfigError("the tokenizer has neither a [SEP] nor an eos token to separate documents; use a BERT-style "
                      "WordPiece (nbkit.text.train_wordpiece) or a tokenizer with an eos token")


def make_blocks(dataset, tokenizer, block_size: int, text_column: str = "text",
                words_column: str | None = None, max_position_embeddings: int | None = None,
                num_proc: int | None = None, causal: bool = False):
    """Blocks of exactly ``block_size`` tokens packed from the texts of each ``datasets.map`` batch of 1,000: every text
    followed by :func:`document_separator`, concatenated and cut, each batch's short tail dropped (as ``run_mlm.py``).

    MLM (the default): each block is ``[CLS] chunk [SEP]``; column ``input_ids`` and, with ``words_column`` (word
    lists), ``word_ids`` for whole-word masking (-1 at ``[CLS]``/``[SEP]``, words numbered from 0 per block, a separator
    its own word). ``causal=True``: ``block_size`` stream tokens, and column ``next_id``, the stream's token after the
    block (-100 after a batch's last block), for :class:`nbkit.text.causal.CausalCollator`.

    Raises:
        ConfigError: ``block_size`` above a limit (:func:`check_length`) or below 3 (causal: 2), a tokenizer
            without a separator.
        DataError: a missing column, or too little text for one block.
    """
    check_length("block_size", block_size, tokenizer, max_position_embeddings, minimum=2 if causal else 3)
    source = words_column or text_column
    if source not in dataset.column_names:
        raise DataError(f"column {source!r} not in dataset columns {dataset.column_names}; pass text_column=...")
    sep, _ = document_separator(tokenizer)
    head, tail = ([], []) if causal else ([tokenizer.cls_token_id], [tokenizer.sep_token_id])
    chunk = block_size - len(head) - len(tail)

    def blocks(batch):
        if words_column:
            enc = tokenizer(batch[words_column], is_split_into_words=True, add_special_tokens=False, verbose=False)
        else:
            enc = tokenizer(batch[text_column], add_special_tokens=False, verbose=False)
        ids, wids, offset = [], [], 0
        for i, row in enumerate(enc["input_ids"]):
            if not row:
                continue
            ids.extend((*row, sep))
            if words_column:
                row_words = enc.word_ids(i)
                wids.extend(offset + w for w in row_words)
                offset += max(row_words) + 1
                wids.append(offset)   # the separator: a word of its own
                offset += 1
        starts = range(0, len(ids) // chunk * chunk, chunk)
        out = {"input_ids": [[*head, *ids[i:i + chunk], *tail] for i in starts]}
        if causal:
            out["next_id"] = [ids[i + chunk] if i + chunk < len(ids) else IGNORE_INDEX for i in starts]
        if words_column:   # renumbered so words count from 0 within the block
            out["word_ids"] = [[-1] * len(head) + [w - wids[i] for w in wids[i:i + chunk]] + [-1] * len(tail)
                               for i in starts]
        return out

    result = dataset.map(blocks, batched=True, batch_size=1000, remove_columns=dataset.column_names,
                         num_proc=num_proc, desc=f"{'causal' if causal else 'MLM'} blocks of {block_size}")
    if len(result) == 0:
        raise DataError(f"the corpus has fewer than {chunk} tokens per 1,000 texts, so no block of {block_size} "
                        "fits; use more text or a smaller block_size")
    return result


def pad_rows(rows: list, value: int, multiple: int | None = None) -> torch.Tensor:
    """``rows`` (sequences of ints) as (B, T) int64 padded on the right with ``value``, T the longest row rounded up
    to ``multiple``."""
    length = max(len(r) for r in rows)
    if multiple:
        length = -(-length // multiple) * multiple
    out = torch.full((len(rows), length), value, dtype=torch.long)  # (B, T)
    for i, row in enumerate(rows):
        out[i, :len(row)] = torch.as_tensor(row, dtype=torch.long)
    return out


class MLMCollator:
    """Pad blocks (dicts with ``input_ids`` and optionally ``word_ids``) and choose MLM targets.

    Returns ``input_ids``, ``attention_mask``, ``labels``: (B, T) int64, T the longest row rounded up to
    ``pad_to_multiple_of``; ``labels`` the original token at targets, -100 elsewhere. Padding and special tokens are
    never targets nor replacements, and every row with a real token has a target, so the loss is always defined.
    ``mlm_probability``: share (0-1) of real tokens (or, with ``whole_word`` and ``word_ids``, of words) chosen;
    ``mask_replace_prob``, ``random_replace_prob``: shares of targets set to ``[MASK]`` / a random token, the rest
    kept. ``seed``: of a private ``torch.Generator`` (None: torch's global RNG), offset per DataLoader worker; inside
    ``nbkit.rng.seed_scope(s)`` derived from ``(seed, s)``, so a batch's masks depend on the batch only.

    Raises:
        ConfigError: probabilities outside [0, 1] or summing above 1, or no ``[PAD]``/``[MASK]``.
    """

    def __init__(self, tokenizer, mlm_probability: float = 0.15, pad_to_multiple_of: int | None = None,
                 seed: int | None = None, mask_replace_prob: float = 0.8, random_replace_prob: float = 0.1,
                 whole_word: bool = True):
        if not 0.0 < mlm_probability <= 1.0:
            raise ConfigError(f"mlm_probability={mlm_probability} must be in (0, 1]; BERT uses 0.15")
        if min(mask_replace_prob, random_replace_prob) < 0 or mask_replace_prob + random_replace_prob > 1:
            raise ConfigError("mask_replace_prob and random_replace_prob must be >= 0 and sum to <= 1 (BERT: 0.8, 0.1)")
        if tokenizer.pad_token_id is None or tokenizer.mask_token_id is None:
            raise ConfigError("the tokenizer needs [PAD] and [MASK] tokens; use nbkit.text.tokenizer.train_wordpiece")
        self.mlm_probability = mlm_probability
        self.mask_replace_prob = mask_replace_prob
        self.random_replace_prob = random_replace_prob
        self.pad_to_multiple_of = pad_to_multiple_of
        self.whole_word = whole_word
        self.pad_id = tokenizer.pad_token_id
        self.mask_id = tokenizer.mask_token_id
        special = set(tokenizer.all_special_ids)
        self.special_ids = torch.tensor(sorted(special), dtype=torch.long)
        self.replacement_ids = torch.tensor([i for i in range(len(tokenizer)) if i not in special], dtype=torch.long)
        self.seed = seed
        self._generator = None
        self._worker = None
        self._scoped = None  # (nbkit.rng.Scope, the generator derived in it)

    def _gen(self):
        if self.seed is None:
            return None  # torch's global RNG, which isolated_rng seeds per batch
        scope = current_scope()
        if scope is not None:  # one fresh stream per scope entry, a function of (seed, scope seed)
            if self._scoped is None or self._scoped[0] is not scope:
                import numpy as np

                derived = int(np.random.SeedSequence([self.seed, scope.seed]).generate_state(1, np.uint64)[0] >> 1)
                self._scoped = (scope, torch.Generator().manual_seed(derived))
            return self._scoped[1]
        info = torch.utils.data.get_worker_info()  # the unscoped stream (left untouched by scoped calls)
        worker = info.id if info is not None else None
        if self._generator is None or worker != self._worker:
            self._generator = torch.Generator().manual_seed(self.seed + (worker or 0) * 100_003)
            self._worker = worker
        return self._generator

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        if not examples:
            raise DataError("MLMCollator got an empty batch")
        rows = [ex["input_ids"] for ex in examples]
        input_ids = pad_rows(rows, self.pad_id, self.pad_to_multiple_of)  # (B, T)
        attention_mask = pad_rows([[1] * len(r) for r in rows], 0, self.pad_to_multiple_of)  # (B, T)
        g = self._gen()
        candidates = attention_mask.bool() & ~torch.isin(input_ids, self.special_ids)  # (B, T)

        use_words = self.whole_word and "word_ids" in examples[0]
        if use_words:
            word_ids = pad_rows([ex["word_ids"] for ex in examples], -1, self.pad_to_multiple_of)  # (B, T), -1: no word
            u = torch.rand((len(rows), int(word_ids.max()) + 2), generator=g)  # (B, W+1) one draw per word
            chosen = u.gather(1, word_ids.clamp(min=0)) < self.mlm_probability  # (B, T)
        else:
            chosen = torch.rand(input_ids.shape, generator=g) < self.mlm_probability  # (B, T)
        targets = chosen & candidates

        # rows where the draw chose nothing: pick one real token uniformly
        empty = (targets.sum(1) == 0) & (candidates.sum(1) > 0)  # (B,)
        if empty.any():
            scores = torch.rand(input_ids.shape, generator=g).masked_fill(~candidates, -1.0)  # (B, T)
            pick = scores.argmax(1)  # (B,)
            rows_idx = empty.nonzero(as_tuple=True)[0]
            targets[rows_idx, pick[rows_idx]] = True
            if use_words:  # extend the pick to its whole word
                w = word_ids[rows_idx, pick[rows_idx]].unsqueeze(1)  # (E, 1)
                targets[rows_idx] |= (word_ids[rows_idx] == w) & candidates[rows_idx]

        labels = input_ids.masked_fill(~targets, IGNORE_INDEX)  # (B, T)
        r = torch.rand(input_ids.shape, generator=g)  # (B, T) one draw decides mask / random / keep
        to_mask = targets & (r < self.mask_replace_prob)
        to_random = targets & (r >= self.mask_replace_prob) & (r < self.mask_replace_prob + self.random_replace_prob)
        input_ids = input_ids.masked_fill(to_mask, self.mask_id)
        n_random = int(to_random.sum())
        if n_random:
            pick = torch.randint(len(self.replacement_ids), (n_random,), generator=g)
            input_ids[to_random] = self.replacement_ids[pick]
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def encode_classification(dataset, tokenizer, max_length: int, text_column: str = "text",
                          label_column: str = "label", num_proc: int | None = None):
    """``[CLS] text [SEP]`` per row, cut to ``max_length`` tokens (specials included, the head kept).

    Returns ``(dataset, report)``: unpadded ``input_ids``, ``attention_mask`` and int ``labels``; ``report``: ``n``,
    ``max_length``, ``n_truncated``, ``truncated_fraction`` (0-1), ``length_p50/p95/max`` (tokens before the cut).

    Raises:
        ConfigError: ``max_length`` above ``tokenizer.model_max_length`` or below 3.
        DataError: a missing column, non-integer labels, no rows, or missing/blank texts (rows named).
    """
    import numpy as np

    check_length("max_length", max_length, tokenizer)
    for col in (text_column, label_column):
        if col not in dataset.column_names:
            raise DataError(f"column {col!r} not in dataset columns {dataset.column_names}; "
                            "pass text_column=... / label_column=...")
    if len(dataset) == 0:
        raise DataError("encode_classification got an empty dataset")
    from nbkit.data.textrule import check_text

    invalid = [i for i, t in enumerate(dataset[text_column]) if check_text(t) is None]  # the loaders' text rule
    if invalid:
        raise DataError(f"{len(invalid)} of {len(dataset)} texts are missing or blank (only whitespace, zero-width or "
                        f"other invisible characters) at 0-based rows {invalid[:10]}; a model trained on them learns "
                        "noise. Load with nbkit.data.load_labeled_files (it drops them), or drop them: `from "
                        "nbkit.data.textrule import check_text; dataset = dataset.filter(lambda r: "
                        f"check_text(r[{text_column!r}]) is not None)`")
    first = dataset[0][label_column]
    if isinstance(first, bool) or not isinstance(first, int):
        raise DataError(f"labels in {label_column!r} must be class ids (int), got {first!r}; "
                        "map names to ids first, e.g. with LabeledData.label2id")
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id

    def encode(batch):
        enc = tokenizer(batch[text_column], add_special_tokens=False, verbose=False)["input_ids"]
        ids = [[cls_id, *row[:max_length - 2], sep_id] for row in enc]
        return {"input_ids": ids, "attention_mask": [[1] * len(r) for r in ids],
                "labels": [int(x) for x in batch[label_column]], "n_tokens": [len(r) + 2 for r in enc]}

    out = dataset.map(encode, batched=True, remove_columns=dataset.column_names, num_proc=num_proc,
                      desc="encode for classification")
    lengths = np.asarray(out["n_tokens"])
    out = out.remove_columns("n_tokens")
    n_trunc = int((lengths > max_length).sum())
    p50, p95 = np.percentile(lengths, [50, 95])
    report = {"n": len(out), "max_length": max_length, "n_truncated": n_trunc,
              "truncated_fraction": n_trunc / len(out), "length_p50": float(p50),
              "length_p95": float(p95), "length_max": int(lengths.max())}
    return out, report


def classification_collator(tokenizer, pad_to_multiple_of: int | None = None):
    """Pad :func:`encode_classification` rows per batch (``DataCollatorWithPadding``): ``input_ids``,
    ``attention_mask`` (B, T) and ``labels`` (B,), T the longest row."""
    from transformers import DataCollatorWithPadding

    return DataCollatorWithPadding(tokenizer, padding="longest", pad_to_multiple_of=pad_to_multiple_of,
                                   return_tensors="pt")
