"""Has MLM pretraining left the unigram plateau? A check against the corpus's unigram entropy.

A masked-LM that has learnt no context still gets its held-out loss down to the entropy of the
token-frequency distribution (it predicts every masked token with the corpus's unigram
probabilities), and then stalls there. Fine-tuning from such an encoder is no better than from
random weights, and can be much worse: on an H200, BERT-base at lr 5e-4 sat at 6.50 nats from
step 500 to 2,000 (the unigram entropy of that corpus is about 6.5) and its fine-tuned classifier
predicted one class for every review (accuracy 0.52; ``bench/results/gpu_h200_2026-11-30``).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def unigram_entropy(token_ids: Iterable[Sequence[int]], ignore_ids: Iterable[int] = ()) -> float:
    """Entropy (nats) of the token-frequency distribution of ``token_ids``, a sequence of id rows.

    ``ignore_ids`` (``[CLS]``, ``[SEP]``, ``[PAD]``: never masked) are left out. This is the
    held-out MLM loss of a model that predicts token frequencies only.

    Raises:
        ValueError: no token left to count.
    """
    import numpy as np

    rows = [np.asarray(row, dtype=np.int64) for row in token_ids]
    ids = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    ignore = np.asarray(sorted(set(ignore_ids)), dtype=np.int64)
    if ignore.size:
        ids = ids[~np.isin(ids, ignore)]
    if ids.size == 0:
        raise ValueError("no tokens to count: pass the training blocks' input_ids")
    counts = np.bincount(ids).astype(np.float64)
    p = counts[counts > 0] / ids.size
    return float(-(p * np.log(p)).sum())


@dataclass(frozen=True)
class PlateauCheck:
    """Held-out MLM loss vs the unigram entropy (both nats): ``above`` it, ``stuck`` within ``margin``, or below."""

    eval_loss: float
    unigram_entropy: float
    margin: float

    @property
    def gap(self) -> float:
        """Nats below the unigram entropy (positive: the model uses context)."""
        return self.unigram_entropy - self.eval_loss

    @property
    def stuck(self) -> bool:
        """Within ``margin`` of the entropy: frequencies learnt, context not (the unigram plateau)."""
        return abs(self.gap) < self.margin

    @property
    def above(self) -> bool:
        """More than ``margin`` above the entropy: not even token frequencies learnt yet (too few steps)."""
        return self.gap <= -self.margin

    def text(self) -> str:
        head = (f"held-out MLM loss {self.eval_loss:.2f} nats vs unigram entropy {self.unigram_entropy:.2f} nats "
                f"(perplexity {math.exp(self.eval_loss):,.0f} vs {math.exp(self.unigram_entropy):,.0f})")
        if self.above:
            return (f"{head}: still above the unigram plateau, so the model has not even learnt token frequencies "
                    "yet (a smoke-sized run); train for more steps before fine-tuning from it.")
        if not self.stuck:
            return f"{head}: {self.gap:.2f} nats below the plateau, the model uses context."
        return (f"{head}: STUCK on the unigram plateau. The model predicts token frequencies only; fine-tuning "
                "from it will not beat random weights. Fix: a lower learning rate with a longer warm-up (post-LN "
                "BERT-base: 1e-4 and 10 % warm-up), a smaller model (the gpu preset's L4/H256 leaves the plateau "
                "at lr 1e-3 within 750 steps), or more steps.")


def plateau_check(eval_loss: float, token_ids, tokenizer=None, margin: float = 0.3) -> PlateauCheck:
    """Compare a held-out MLM loss (nats) with the unigram entropy of ``token_ids`` (the training blocks).

    ``tokenizer`` (optional) supplies the special-token ids to leave out. ``margin`` (nats) is how far
    below the entropy a loss must be to count as off the plateau; 0.3 is about a quarter of the drop the
    cpu recipe reaches (1 nat by 1,000 steps, README "What to expect").

    Raises:
        ValueError: ``eval_loss`` is not finite, or there are no tokens.
    """
    if eval_loss is None or not math.isfinite(eval_loss):
        raise ValueError(f"eval_loss={eval_loss!r}: evaluate first (loop.evaluate())")
    if hasattr(token_ids, "column_names"):  # a datasets.Dataset of blocks
        token_ids = token_ids["input_ids"]
    elif hasattr(token_ids, "sample_blocks"):  # a corpus store (nbkit.corpus.StoreMLMDataset): 10,000 blocks
        token_ids = token_ids.sample_blocks(10_000)
    ignore = list(getattr(tokenizer, "all_special_ids", None) or [])
    return PlateauCheck(float(eval_loss), unigram_entropy(token_ids, ignore), margin)
