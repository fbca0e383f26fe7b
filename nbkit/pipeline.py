"""Glue between the notebook steps: where each step finds the previous one's output.

Notebooks 01-03 and the ``nbkit.jobs`` scripts call these so that both follow
the same data flow: corpus -> tokenizer -> MLM blocks -> pretraining ->
checkpoint -> fine-tuning -> evaluation, with artifacts under
``runs/<scale>/`` (see :mod:`nbkit.runs`).
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

from nbkit import runs
from nbkit.scale import Scale


def tokenizer_dir(scale: Scale) -> Path:
    """``runs/<scale>/tokenizer``: where notebook 01 saves the tokenizer."""
    return runs.step_dir(scale.name, "tokenizer")


def train_tokenizer(scale: Scale):
    """Train the scale's WordPiece tokenizer on People's Daily, save it and its ``stats.json``.

    The same steps as notebook 01 (95/5 split by line, full alphabet). Returns
    ``(tokenizer, stats)``.
    """
    from nbkit import data, modeling, tokenization

    out = tokenizer_dir(scale)
    max_positions = modeling.build_config(scale.model, vocab_size=scale.vocab_size).max_position_embeddings
    splits = data.split_corpus(data.load_peoples_daily(max_lines=scale.corpus_lines),
                               eval_fraction=0.05, seed=scale.seed)
    tok = tokenization.train_wordpiece(splits["train"]["text"], vocab_size=scale.vocab_size,
                                       out_dir=out, model_max_length=max_positions)
    stats = tokenization.tokenizer_stats(tok, splits["validation"]["text"])
    tokenization.save_stats(stats, out)
    return tok, stats


def load_tokenizer(scale: Scale):
    """Load notebook 01's tokenizer for this scale; train it first (and say so) if missing.

    Returns a ``transformers.PreTrainedTokenizerFast``.
    """
    from transformers import AutoTokenizer

    path = tokenizer_dir(scale)
    if not (path / "tokenizer.json").exists():
        print(f"No tokenizer in {path} (notebook 01 not run at scale {scale.name!r}): training one now.")
        tok, _ = train_tokenizer(scale)
        return tok
    return AutoTokenizer.from_pretrained(path)


def pretrained_model_dir(scale: Scale) -> Path | None:
    """``runs/<scale>/mlm/model`` if notebook 02 saved a model there, else None."""
    path = runs.step_dir(scale.name, "mlm") / "model"
    return path if (path / "config.json").exists() else None


def steps_for_epochs(n_examples: int, batch_size: int, epochs: float) -> int:
    """Optimizer steps for ``epochs`` passes over ``n_examples`` (at least 1).

    Raises:
        ValueError: ``n_examples`` or ``batch_size`` is not positive.
    """
    if n_examples <= 0 or batch_size <= 0:
        raise ValueError(f"need n_examples > 0 and batch_size > 0, got {n_examples} and {batch_size}")
    return max(1, math.ceil(n_examples * epochs / batch_size))


def write_json(path: Path, payload: dict) -> dict:
    """Write ``payload`` as indented UTF-8 JSON atomically (temp file + rename); return it."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    tmp.replace(path)
    return payload


def predict(model, tokenizer, texts, max_length: int, batch_size: int = 64, id2label=None) -> dict:
    """Classify ``texts`` with a sequence-classification model.

    Returns ``{"label": list[int], "prob": list[float] (probability of the
    predicted class), "table": pandas.DataFrame}`` (``table`` only with
    ``id2label``). Runs in eval mode under ``torch.inference_mode`` on the
    model's device; truncates to ``max_length`` tokens.
    """
    import torch

    texts = list(texts)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    labels, probs = [], []
    with torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            enc = tokenizer(texts[i:i + batch_size], truncation=True, max_length=max_length,
                            padding=True, return_tensors="pt").to(device)
            p = model(**enc).logits.float().softmax(-1)      # (B, num_labels)
            conf, idx = p.max(-1)
            labels += idx.tolist()
            probs += conf.tolist()
    model.train(was_training)
    out = {"label": labels, "prob": probs}
    if id2label is not None:
        import pandas as pd

        out["table"] = pd.DataFrame({"review": texts, "prediction": [id2label[i] for i in labels],
                                     "confidence": [round(p, 3) for p in probs]})
    return out
