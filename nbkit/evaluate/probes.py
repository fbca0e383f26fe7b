"""MLM probes: fill-mask on a few sentences (does the model use context?) and the unigram plateau check.

A model that learnt only token frequencies gives the same top fillers whatever the sentence, and a
held-out MLM loss at the entropy of the token frequencies.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

#: Sentences with one masked character whose answer depends on context (answers in comments).
DEFAULT_SENTENCES = (
    "北京是中国的首[MASK]。",      # 都
    "今天天气很[MASK]。",          # 好
    "这本书的质量非常[MASK]。",    # 好
    "我们明天去公[MASK]散步。",    # 园
    "他每天早上喝一杯牛[MASK]。",  # 奶
)


@dataclass
class FillMaskReport:
    """Top-k fillers per sentence, and whether they depend on the sentence.

    Attributes:
        sentences: the inputs, one ``[MASK]`` each.
        top: per sentence, ``(token, probability 0-1)`` best first.
        top_overlap: mean share (0-1) of top-k fillers two sentences have in common, over all pairs;
            near 1 means frequencies learnt, not context.
    """

    sentences: list[str]
    top: list[list[tuple[str, float]]]
    top_overlap: float = field(init=False)

    def __post_init__(self):
        sets = [frozenset(t for t, _ in row) for row in self.top]
        pairs = [(a, b) for i, a in enumerate(sets) for b in sets[i + 1:]]
        self.top_overlap = (sum(len(a & b) / max(len(a), len(b), 1) for a, b in pairs) / len(pairs)
                            if pairs else 0.0)

    @property
    def uses_context(self) -> bool:
        """Two sentences share under half of their top-k fillers on average."""
        return self.top_overlap < 0.5

    def verdict(self) -> str:
        """One sentence on what the table shows."""
        k = len(self.top[0]) if self.top else 0
        if not self.uses_context:
            return (f"Two sentences share {self.top_overlap:.0%} of their top {k} on average: the model learnt "
                    "which tokens are frequent, not how context constrains them (train longer or on more text).")
        return f"The top {k} change with the sentence: the model uses context to fill the [MASK]."

    def table(self):
        """One ``DataFrame`` row per sentence with its fillers and probabilities."""
        import pandas as pd

        return pd.DataFrame({"sentence": self.sentences,
                             "top": [" ".join(f"{t}({p:.2f})" for t, p in row) for row in self.top]})


def fill_mask(model, tokenizer, sentences=DEFAULT_SENTENCES, top_k: int = 5) -> FillMaskReport:
    """Fill each sentence's one ``[MASK]`` with ``transformers.pipeline("fill-mask")`` (``top_k`` fillers),
    on the model's device in eval mode. ``model``/``tokenizer``: objects or saved directories.

    Raises:
        nbkit.errors.DataError: a sentence without exactly one ``[MASK]`` (named).
        nbkit.errors.ConfigError: a causal LM (GPT-2 / Llama), which predicts the next token, not a masked one:
            use :func:`nbkit.evaluate.generation.generate`.
    """
    from transformers import pipeline

    from nbkit.errors import ConfigError, DataError
    from nbkit.models.causal import MODEL_TYPES
    from nbkit.models.loading import saved_config

    kind = ((saved_config(model) or {}).get("model_type") if isinstance(model, str)
            else getattr(getattr(model, "config", None), "model_type", None))
    if kind in MODEL_TYPES:
        raise ConfigError(f"fill_mask needs a masked LM (BERT); this is a {kind} causal LM, which writes the next "
                          "token instead: use nbkit.evaluate.generation.generate(model, tokenizer, prompt), or a "
                          "PretrainConfig(objective='mlm') model for fill-mask")

    sentences = [sentences] if isinstance(sentences, str) else list(sentences)
    for s in sentences:
        if s.count("[MASK]") != 1:
            raise DataError(f"fill_mask needs exactly one [MASK] per sentence; {s!r} has {s.count('[MASK]')}")
    if not isinstance(tokenizer, str) and tokenizer.mask_token != "[MASK]":
        sentences = [s.replace("[MASK]", tokenizer.mask_token) for s in sentences]
    device = None if isinstance(model, str) else next(model.parameters()).device
    was_training = getattr(model, "training", False)
    try:
        fill = pipeline("fill-mask", model=model, tokenizer=tokenizer, device=device, top_k=top_k)
        top = [[(r["token_str"].replace(" ", ""), float(r["score"])) for r in fill(s)] for s in sentences]
    finally:
        if was_training:
            model.train()
    return FillMaskReport([s.replace(getattr(tokenizer, "mask_token", "[MASK]"), "[MASK]") for s in sentences], top)


def unigram_entropy(token_ids: Iterable[Sequence[int]], ignore_ids: Iterable[int] = ()) -> float:
    """Entropy (nats) of the token frequencies in ``token_ids`` (id rows), ``ignore_ids`` left out: the MLM
    loss of a model that predicts frequencies only.

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
    """Held-out MLM loss vs the unigram entropy (nats): ``above`` it, ``stuck`` within ``margin``, or below.

    ``scored``: the targets ``eval_loss`` covers, ``"[MASK]"`` or ``"all"`` (which mixes in unchanged
    targets a model can copy from its input, so it falls below the entropy without context);
    ``all_loss``, ``kept_loss`` (nats or None) are shown beside it.
    """

    eval_loss: float
    unigram_entropy: float
    margin: float
    scored: str = "all"
    all_loss: float | None = None
    kept_loss: float | None = None

    @property
    def gap(self) -> float:
        """Nats below the unigram entropy."""
        return self.unigram_entropy - self.eval_loss

    @property
    def stuck(self) -> bool:
        """Within ``margin`` of the entropy: the unigram plateau."""
        return abs(self.gap) < self.margin

    @property
    def above(self) -> bool:
        """More than ``margin`` above the entropy: not even frequencies learnt yet."""
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
    """Compare a held-out MLM loss (nats) with the unigram entropy of ``token_ids`` (training blocks: rows,
    a Dataset, or a corpus store's 10,000 sampled blocks), ``tokenizer``'s special ids left out.

    ``eval_loss``: ``evaluate()``'s metrics (its ``eval_mask_loss`` when present, where only context
    helps) or a float over all targets. ``margin``: nats below the entropy that count as off the plateau.

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
