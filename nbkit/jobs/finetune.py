"""Sentiment fine-tuning as a script: ``[torchrun ...] python -m nbkit.jobs.finetune [flags]``.

A thin argparse wrapper around :func:`nbkit.recipes.finetuning.run_finetuning` (notebook 03's recipe):
each flag left out keeps :meth:`~nbkit.recipes.finetune_config.FinetuneConfig.for_scale`'s value.
Under torchrun ``--batch-size`` is per process and the steps come from the global batch.
"""
from __future__ import annotations

import sys


def parser():
    """The job's flags (:func:`nbkit.jobs.common.job_parser` plus ``--pretrained``, ``--epochs``, ``--task``,
    ``--export``): an ``argparse.ArgumentParser``."""
    from nbkit.jobs.common import job_parser

    p = job_parser("nbkit sentiment fine-tuning (runs under torchrun)",
                   output_dir_help="where checkpoints, metrics.json (and model/ with --export) go (default: "
                                   "runs/<scale>/sentiment, plus -<overrides> such as -lr0.002-seed3 and "
                                   "-from-<encoder>-<hash> with --pretrained: the folder notebook 03 names for "
                                   "the same settings; runs/ is $NBKIT_RUNS_DIR)")
    p.add_argument("--pretrained", default=None,
                   help="checkpoint or model directory to start from (default: notebook 02's model, else random)")
    p.add_argument("--epochs", type=float, default=None, help="passes over the training split")
    p.add_argument("--task", default="reviews", choices=("reviews", "news"), help="the labelled task")
    p.add_argument("--export", action="store_true", help="also write OUTPUT_DIR/model (plain transformers loads it)")
    return p


def parse_args(argv: list[str] | None = None):
    """The parsed flags (:func:`parser`). Raises ``SystemExit`` on a bad flag (argparse)."""
    return parser().parse_args(argv)


def config(a):
    """``(cfg, out_dir)`` for parsed flags ``a``: the :class:`~nbkit.recipes.finetune_config.FinetuneConfig`
    and ``--output-dir``, else :func:`nbkit.recipes.finetuning.run_dir` of that config and ``--pretrained``
    (notebook 03's folder for the same settings, so runs with other settings or encoders never share one).

    Raises:
        ConfigError: a bad ``--resume``, scale or task (from the config).
    """
    from nbkit.jobs.common import loop_resume
    from nbkit.recipes.finetuning import FinetuneConfig, run_dir

    cfg = FinetuneConfig.for_scale(a.scale, task=a.task, max_steps=a.max_steps, epochs=a.epochs,
                                   batch_size=a.batch_size, grad_accum_steps=a.grad_accum, lr=a.lr, seed=a.seed,
                                   checkpoint_every=a.checkpoint_every, log_every=a.log_every)
    cfg = cfg.replace(resume=loop_resume(a.resume), progress=False)
    return cfg, a.output_dir or run_dir(cfg, a.pretrained)


def main(argv: list[str] | None = None) -> int:
    """Run the job; returns the exit code: 0 done; 2 an nbkit error (ConfigError, DataError, ...: its message
    once and this job's flags for the names in it); 130 interrupted (Ctrl-C, or the launcher died: one line
    saying where it stopped and what the same command resumes from). See :mod:`nbkit.jobs.outcome`."""
    from nbkit.jobs.outcome import run_job

    return run_job("nbkit.jobs.finetune", _run, argv, parser())


def _run(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    from nbkit.pipeline.artifacts import pretrained_model_dir
    from nbkit.pipeline.scale import get_scale
    from nbkit.recipes.finetuning import run_finetuning, tokenizer_for
    from nbkit.train import distributed as D

    cfg, out_dir = config(a)
    scale = get_scale(a.scale)
    info = D.init_distributed(a.backend)
    try:
        pretrained = a.pretrained or pretrained_model_dir(scale)      # None: random weights
        tokenizer = tokenizer_for(cfg, pretrained) if info.is_main else None   # rank 0 trains notebook 01's if missing
        D.barrier()
        tokenizer = tokenizer or tokenizer_for(cfg, pretrained)   # the encoder's own, as notebook 03
        from nbkit.train.metrics_stream import MetricsPrinter

        run_finetuning(cfg, out_dir, pretrained=pretrained, task=a.task, tokenizer=tokenizer,
                       callbacks=[MetricsPrinter()], export_model=a.export)
        D.barrier()
    finally:
        D.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
