"""MLM pretraining as a script: ``[torchrun ...] python -m nbkit.jobs.pretrain [flags]``.

The same code path as notebook 02. ``--synthetic`` runs the tiny built-in job
(``nbkit.jobs.synthetic``) instead, to check a launcher, a cluster or a
multi-node rendezvous in seconds without any corpus or tokenizer.
"""
from __future__ import annotations

import sys
from pathlib import Path

from nbkit.jobs.common import job_parser, resolve_resume


def run_pretrain(scale, output_dir: Path, *, max_steps: int | None = None, batch_size: int | None = None,
                 grad_accum: int | None = None, lr: float | None = None, seed: int | None = None,
                 checkpoint_every: int | None = None, resume: Path | None = None,
                 log_every: int = 10, backend: str | None = None) -> dict:
    """Pretrain a BERT MLM at ``scale`` (``nbkit.scale.Scale``) and return ``metrics.json``'s dict.

    ``None`` arguments take the preset's value (``mlm_steps``, ``mlm_batch_size`` per
    process, ``mlm_grad_accum``, ``mlm_lr``, ``seed``, ``mlm_eval_every``). Under
    torchrun every rank calls this; only rank 0 writes ``output_dir``.

    Planned body (the integrator wires it once ``data``, ``tokenization``, ``mlm``,
    ``modeling`` and ``train`` are merged): ``data.load_peoples_daily(scale.corpus_lines)``
    -> ``data.split_corpus`` -> tokenizer from the runs directory (notebook 01's output)
    -> ``mlm.make_blocks`` -> ``modeling.build_mlm_model`` -> ``train.Loop(...).fit()``
    with a ``TrainConfig`` built from these arguments; the loop calls ``nbkit.distributed``.

    Raises:
        NotImplementedError: until that wiring lands; use ``--synthetic``.
    """
    raise NotImplementedError(
        "nbkit.jobs.pretrain needs nbkit.train/mlm/modeling (not merged yet); "
        "run with --synthetic to exercise the launcher and DDP")


def main(argv: list[str] | None = None) -> int:
    p = job_parser("nbkit MLM pretraining (runs under torchrun)")
    p.add_argument("--synthetic", action="store_true", help="tiny built-in job, no corpus needed")
    p.add_argument("--num-samples", type=int, default=64, help="(--synthetic) dataset size")
    p.add_argument("--step-sleep", type=float, default=0.0, help="(--synthetic) seconds to sleep per step")
    a = p.parse_args(argv)
    try:
        return _run(a)
    except NotImplementedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _run(a) -> int:
    resume = resolve_resume(a.resume, a.output_dir)
    if a.synthetic:
        from nbkit.jobs.synthetic import run_synthetic
        from nbkit.runs import runs_dir

        out = a.output_dir or runs_dir() / "synthetic"
        run_synthetic(out, max_steps=a.max_steps or 6, batch_size=a.batch_size or 4,
                      grad_accum=a.grad_accum or 2, lr=a.lr or 0.2, seed=a.seed or 0,
                      checkpoint_every=a.checkpoint_every, resume=resume, log_every=a.log_every,
                      num_samples=a.num_samples, step_sleep=a.step_sleep, backend=a.backend)
        return 0
    from nbkit.runs import step_dir
    from nbkit.scale import get_scale

    scale = get_scale(a.scale)
    run_pretrain(scale, a.output_dir or step_dir(scale.name, "mlm"), max_steps=a.max_steps,
                 batch_size=a.batch_size, grad_accum=a.grad_accum, lr=a.lr, seed=a.seed,
                 checkpoint_every=a.checkpoint_every, resume=resume, log_every=a.log_every,
                 backend=a.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
