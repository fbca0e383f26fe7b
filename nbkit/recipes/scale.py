"""Scale presets: one visible block of knobs per scale.

``NBKIT_SCALE`` picks a preset (``smoke``, ``cpu`` or ``gpu``); without it the
default is ``gpu`` when CUDA is usable, else ``cpu``. Notebooks read the preset
in their ``parameters`` cell, so papermill can override any field.

- ``smoke``: CI. The five notebooks together in under 3 minutes on 2 cores;
  tiny model and data subset, yet every code path runs.
- ``cpu``: meaningful results on a 2-core laptop, five notebooks in < 15 min.
- ``gpu``: the cpu recipe with more of everything (wider model, more steps, 128-token
  reviews) in bf16; sized for the ~1 M tokens of in-domain text (docs/pretraining.md).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from nbkit.settings import SCALES, scale_name  # the names, defined once (env checks them too)


@dataclass(frozen=True)
class Scale:
    """Every size knob the notebooks use, for one scale.

    Counts are lines/examples/steps; ``None`` means "all of it".
    """

    name: str
    # --- corpus and tokenizer (notebook 01)
    corpus_lines: int | None      # People's Daily lines used (19,484 in all)
    vocab_size: int               # WordPiece target vocabulary size
    # --- MLM pretraining (notebook 02)
    model: str                    # preset in nbkit.models.bert.PRESETS
    block_size: int               # tokens per MLM block (<= max_position_embeddings)
    mlm_batch_size: int           # sequences per optimizer micro-batch
    mlm_grad_accum: int           # micro-batches per optimizer step
    mlm_steps: int                # optimizer steps
    mlm_lr: float
    mlm_eval_every: int           # steps between held-out evaluations
    # --- sentiment fine-tuning (notebook 03)
    sentiment_max_train: int | None   # training examples used (after dedup/split)
    cls_max_length: int           # tokens per review (longer ones are truncated)
    cls_batch_size: int
    cls_epochs: float
    cls_lr: float
    # --- profiling (notebook 04)
    profile_steps: int            # active profiler steps
    bench_sizes: tuple[int, ...]  # square matmul sizes for the TFLOP/s table
    # --- shared
    num_workers: int = 0
    seed: int = 0
    # --- pretraining corpus (notebooks 01-02): (source, repeat weight) pairs, see nbkit.recipes.pretrain_corpus
    mlm_mix: tuple[tuple[str, float], ...] = (("peoples_daily", 1.0),)
    mlm_patience: int | None = None   # stop MLM after this many evaluations without a lower held-out loss
    cls_pooling: str = "mean"         # classifier head input: "mean" of token states or BERT's "cls" pooler
    # --- notebook 03's optional second task: news sentiment (nbkit[news], nbkit.pipeline.second_task)
    news_max_train: int | None = None  # training documents used (5,284 after cleaning)
    news_max_length: int = 128         # tokens per document (median ~730 characters: most are cut)
    news_epochs: float = 1.0           # passes over the news training documents

    def replace(self, **changes) -> "Scale":
        """Return a copy with some fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)


PRESETS: dict[str, Scale] = {
    "smoke": Scale(
        name="smoke", corpus_lines=1500, vocab_size=2000,
        model="tiny", block_size=64, mlm_batch_size=16, mlm_grad_accum=1,
        mlm_steps=30, mlm_lr=1e-3, mlm_eval_every=15,
        sentiment_max_train=800, cls_max_length=64, cls_batch_size=32,
        cls_epochs=1.0, cls_lr=1e-3,
        profile_steps=2, bench_sizes=(64, 128),
        mlm_mix=(("peoples_daily", 1.0), ("reviews", 1.0)),   # both code paths, tiny
        news_max_train=300, news_max_length=64, news_epochs=1.0,
    ),
    "cpu": Scale(
        name="cpu", corpus_lines=None, vocab_size=8000,
        # bench/pretrain_value.py's recipe (docs/pretraining.md): domain-adaptive MLM on the training
        # reviews, BERT L4/H128, 1,000 steps x 64 x 64 = 4.1 M tokens at lr 1e-3; mean pooling, 2 epochs.
        model="narrow", block_size=64, mlm_batch_size=64, mlm_grad_accum=1,
        mlm_steps=1000, mlm_lr=1e-3, mlm_eval_every=250,
        sentiment_max_train=None, cls_max_length=64, cls_batch_size=32,
        cls_epochs=2.0, cls_lr=5e-4,
        profile_steps=5, bench_sizes=(256, 512, 1024),
        mlm_mix=(("reviews", 1.0),),
        news_max_train=None, news_max_length=128, news_epochs=1.0,   # ~2 min on 2 cores
    ),
    "gpu": Scale(
        name="gpu", corpus_lines=None, vocab_size=8000,
        # The cpu recipe with more of everything (docs/pretraining.md, "On a GPU"): domain-adaptive MLM on
        # the training reviews (~1 M tokens; a bigger model would only memorise them), BERT L4/H256 at lr 1e-3,
        # 3,000 steps x 128 x 128 = 49 M tokens, stopped early when the held-out loss stalls; fine-tuning
        # sees 128 tokens per review (p95 is ~190 characters). BERT-base at lr 5e-4 stayed on the unigram
        # plateau (held-out loss 6.50 from step 500 to 2,000 on an H200), and fine-tuning from it scored 0.52.
        model="mini", block_size=128, mlm_batch_size=128, mlm_grad_accum=1,
        mlm_steps=3000, mlm_lr=1e-3, mlm_eval_every=500,
        sentiment_max_train=None, cls_max_length=128, cls_batch_size=32,
        cls_epochs=2.0, cls_lr=5e-4,
        profile_steps=10, bench_sizes=(1024, 2048, 4096, 8192),
        num_workers=4,
        mlm_mix=(("reviews", 1.0),), mlm_patience=3,
        news_max_train=None, news_max_length=256, news_epochs=2.0,
    ),
}


def cuda_usable() -> bool:
    """True when torch imports and reports at least one CUDA device.

    Uses ``torch.cuda.is_available()``, which does not create a CUDA context.
    Returns False (never raises) when torch itself is broken.
    """
    try:
        import torch
    except Exception:  # a broken torch install must not break the notebooks
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def get_scale(name: str | None = None) -> Scale:
    """Return the preset named ``name``, else ``$NBKIT_SCALE``, else the default.

    The default is ``gpu`` when CUDA is usable and ``cpu`` otherwise.

    Raises:
        ValueError: the name is not one of ``smoke``, ``cpu``, ``gpu``.
    """
    name = name or os.environ.get("NBKIT_SCALE") or ("gpu" if cuda_usable() else "cpu")
    name = scale_name(name)
    if name not in PRESETS:
        raise ValueError(
            f"unknown scale {name!r}; set NBKIT_SCALE to one of {', '.join(SCALES)}"
        )
    return PRESETS[name]
