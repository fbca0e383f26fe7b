"""Look inside a pretrained masked LM: ``transformers.pipeline("fill-mask")`` on a few sentences.

The held-out MLM loss says *how much* a model learnt; filling a ``[MASK]`` shows *what*. A model that
only learnt how frequent each token is (the unigram plateau) gives the same top guesses (，的。是不 for
Chinese) whatever the sentence; a model that uses context changes its guesses with the sentence.
:func:`fill_mask` runs the standard pipeline (the call a user would make on the saved checkpoint) and
:class:`FillMaskReport` says which of the two it saw.
"""
from __future__ import annotations

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
        sentences: the inputs, each with exactly one ``[MASK]``.
        top: per sentence, the ``top_k`` fillers as ``(token, probability 0-1)``, best first.
        top_overlap: mean share (0-1) of top-k fillers two sentences have in common, over every pair;
            near 1.0 means the guesses hardly depend on the sentence: frequencies learnt, not context.
            (A share of pairs, not "how many sets are identical": one filler swapped at rank 5 keeps
            four in common, and a frequency-only model often differs just there.)
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
        """True when two sentences share under half of their top-k fillers on average."""
        return self.top_overlap < 0.5

    def verdict(self) -> str:
        """One plain sentence on what the table shows."""
        k = len(self.top[0]) if self.top else 0
        if not self.uses_context:
            return (f"Two sentences share {self.top_overlap:.0%} of their top {k} on average: the model learnt "
                    "which tokens are frequent, not how context constrains them (train longer or on more text).")
        return f"The top {k} change with the sentence: the model uses context to fill the [MASK]."

    def table(self):
        """A ``pandas.DataFrame``: one row per sentence, the fillers with their probabilities."""
        import pandas as pd

        return pd.DataFrame({"sentence": self.sentences,
                             "top": [" ".join(f"{t}({p:.2f})" for t, p in row) for row in self.top]})


def fill_mask(model, tokenizer, sentences=DEFAULT_SENTENCES, top_k: int = 5) -> FillMaskReport:
    """Fill the ``[MASK]`` of each sentence with ``transformers.pipeline("fill-mask")``.

    Args:
        model: a masked-LM model (``BertForMaskedLM`` or nbkit's sparse-head subclass) or a saved
            model directory.
        tokenizer: its tokenizer (or directory); ``[MASK]`` in the sentences is its mask token.
        sentences: each with exactly one ``[MASK]``.
        top_k: fillers kept per sentence.

    Returns a :class:`FillMaskReport`. Runs on the model's device in eval mode; cost: one forward
    pass per sentence.

    Raises:
        nbkit.errors.DataError: a sentence without exactly one ``[MASK]`` (the message names it).
    """
    from transformers import pipeline

    from nbkit.errors import DataError

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
