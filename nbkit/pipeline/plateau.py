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
    """Held-out MLM loss vs the unigram entropy (both nats): ``above`` it, ``stuck`` within ``margin``, or below.

    ``eval_loss`` is the loss compared; ``scored`` says over which targets: ``"[MASK]"`` (the targets
    the collator replaced by ``[MASK]``: evaluate()'s ``eval_mask_loss``) or ``"all"`` (``eval_loss``,
    which mixes in the unchanged and random-replaced targets). ``all_loss`` / ``kept_loss`` (nats or
    None) are shown beside it: a model can copy an unchanged target from its input, so the loss over
    all targets falls below the entropy before the model uses any context (case D14: 0.47 nats
    below it while the ``[MASK]`` targets sat on it).
    """

    eval_loss: float
    unigram_entropy: float
    margin: float
    scored: str = "all"
    all_loss: float | None = None
    kept_loss: float | None = None

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
        what = "at the [MASK] targets" if self.scored == "[MASK]" else "over all targets"
        head = (f"held-out MLM loss {what} {self.eval_loss:.2f} nats vs unigram entropy {self.unigram_entropy:.2f} "
                f"nats (perplexity {math.exp(self.eval_loss):,.0f} vs {math.exp(self.unigram_entropy):,.0f})")
        aside = []
        if self.all_loss is not None and self.scored == "[MASK]":
            aside.append(f"all targets {self.all_loss:.2f}")
        if self.kept_loss is not None:
            aside.append(f"unchanged targets {self.kept_loss:.2f}, which the model can copy from its input")
        if aside:
            head += f" [{'; '.join(aside)}]"
        if self.scored != "[MASK]":
            head += (" (this mixes in unchanged targets a model can copy: pass evaluate()'s metrics dict to "
                     "judge by the [MASK] targets)")
        if self.above:
            return (f"{head}: still above the unigram plateau, so the model has not even learnt token frequencies "
                    "yet (a smoke-sized run); train for more steps before fine-tuning from it.")
        if not self.stuck:
            return f"{head}: {self.gap:.2f} nats below the plateau, the model uses context."
        return (f"{head}: STUCK on the unigram plateau. The model predicts token frequencies only; fine-tuning "
                "from it will not beat random weights. Fix: a lower learning rate with a longer warm-up (post-LN "
                "BERT-base: 1e-4 and 10 % warm-up), a smaller model (the gpu preset's L4/H256 leaves the plateau "
                "at lr 1e-3 within 750 steps), or more steps.")


def plateau_check(eval_loss, token_ids, tokenizer=None, margin: float = 0.3) -> PlateauCheck:
    """Compare a held-out MLM loss (nats) with the unigram entropy of ``token_ids`` (the training blocks).

    ``eval_loss``: evaluate()'s metrics dict (or a loop history entry): its ``eval_mask_loss`` (the
    targets replaced by ``[MASK]``, where only context helps) is compared when present, else its
    ``eval_loss``; or a float, taken as the loss over all targets. ``tokenizer`` (optional) supplies
    the special-token ids to leave out. ``margin`` (nats) is how far below the entropy a loss must be
    to count as off the plateau; 0.3 is about a quarter of the drop the cpu recipe reaches (1 nat by
    1,000 steps, README "What to expect").

    Raises:
        ValueError: the loss compared is missing or not finite, or there are no tokens.
    """
    extra = {}
    if isinstance(eval_loss, dict):
        metrics = eval_loss
        mask_loss = metrics.get("eval_mask_loss")
        if mask_loss is not None and math.isfinite(mask_loss):
            extra = {"scored": "[MASK]", "all_loss": metrics.get("eval_loss")}
            eval_loss = mask_loss
        else:
            eval_loss = metrics.get("eval_loss")
        kept = metrics.get("eval_kept_loss")
        if kept is not None and math.isfinite(kept):
            extra["kept_loss"] = kept
    if eval_loss is None or not math.isfinite(eval_loss):
        raise ValueError(f"eval_loss={eval_loss!r}: evaluate first (loop.evaluate())")
    if hasattr(token_ids, "column_names"):  # a datasets.Dataset of blocks
        token_ids = token_ids["input_ids"]
    elif hasattr(token_ids, "sample_blocks"):  # a corpus store (nbkit.corpus.StoreMLMDataset): 10,000 blocks
        token_ids = token_ids.sample_blocks(10_000)
    ignore = list(getattr(tokenizer, "all_special_ids", None) or [])
    return PlateauCheck(float(eval_loss), unigram_entropy(token_ids, ignore), margin, **extra)
