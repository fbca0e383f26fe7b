"""Sentiment fine-tuning as a script: ``[torchrun ...] python -m nbkit.jobs.finetune [flags]``.

The same code path as notebook 03.
"""
from __future__ import annotations

import sys
from pathlib import Path

from nbkit.jobs.common import job_parser, resolve_resume


def run_finetune(scale, output_dir: Path, *, pretrained: str | Path | None = None,
                 max_steps: int | None = None, epochs: float | None = None,
                 batch_size: int | None = None, grad_accum: int | None = None, lr: float | None = None,
                 seed: int | None = None, checkpoint_every: int | None = None,
                 resume: Path | None = None, log_every: int = 10, backend: str | None = None) -> dict:
    """Fine-tune a sentiment classifier at ``scale`` and return ``metrics.json``'s dict.

    ``pretrained``: notebook 02's checkpoint directory, a local model, or ``None``
    (build from config). ``None`` arguments take the preset's value (``cls_epochs``,
    ``cls_batch_size`` per process, ``cls_lr``, ``seed``). Test accuracy and macro-F1
    are computed on rank 0 after ``barrier()``.

    Planned body: ``data.load_sentiment(seed, max_train=scale.sentiment_max_train)`` ->
    ``mlm.encode_classification`` -> ``modeling.build_classifier(pretrained, ...)`` ->
    ``train.Loop(...).fit()`` -> evaluation on the test split.

    Raises:
        NotImplementedError: until the integrator wires the merged modules in.
    """
    raise NotImplementedError(
        "nbkit.jobs.finetune needs nbkit.data/mlm/modeling/train (not merged yet)")


def main(argv: list[str] | None = None) -> int:
    p = job_parser("nbkit sentiment fine-tuning (runs under torchrun)")
    p.add_argument("--pretrained", default=None, help="checkpoint directory from pretraining, or a local model")
    p.add_argument("--epochs", type=float, default=None, help="passes over the training split")
    a = p.parse_args(argv)
    try:
        return _run(a)
    except NotImplementedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _run(a) -> int:
    from nbkit.runs import step_dir
    from nbkit.scale import get_scale

    scale = get_scale(a.scale)
    run_finetune(scale, a.output_dir or step_dir(scale.name, "sentiment"), pretrained=a.pretrained,
                 max_steps=a.max_steps, epochs=a.epochs, batch_size=a.batch_size,
                 grad_accum=a.grad_accum, lr=a.lr, seed=a.seed, checkpoint_every=a.checkpoint_every,
                 resume=resolve_resume(a.resume, a.output_dir), log_every=a.log_every, backend=a.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
