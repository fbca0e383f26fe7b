"""MLM pretraining as a script: ``[torchrun ...] python -m nbkit.jobs.pretrain [flags]``.

A thin argparse wrapper around :func:`nbkit.recipes.pretraining.run_pretraining` (notebook 02's recipe):
each flag left out keeps :meth:`~nbkit.recipes.pretraining.PretrainConfig.for_scale`'s value.
``--corpus PATH`` pretrains on the user's corpus through the prepared store (docs/corpus.md): rank 0
prepares it (or reads a prepared directory), the other ranks and nodes poll for its ``manifest.json``,
then every rank reads its share of the blocks. To check a launcher, a cluster or a multi-node
rendezvous, run it at ``--scale smoke --max-steps 6``: the real loop on a tiny BERT and the bundled
corpus (the tokenizer is trained on the way if notebook 01 has not run). Under torchrun
``--batch-size`` is per process; ``--seed`` also sets ``split_seed`` (as notebook 02's ``seed`` does).
The run goes to :func:`nbkit.recipes.pretraining.run_dir` (``runs/<scale>/mlm[-<store>][-<overrides>]``,
the folder notebook 02 names for the same settings) unless ``--output-dir`` says otherwise. With ``NBKIT_BLOCK_LOG=DIR`` each rank logs its training blocks
(:func:`nbkit.recipes.pretraining.blocks`).
"""
from __future__ import annotations

import sys


def parser():
    """The job's flags (:func:`nbkit.jobs.common.job_parser` plus ``--corpus``, ``--corpus-wait-s``,
    ``--dropout``): an ``argparse.ArgumentParser``."""
    from nbkit.jobs.common import job_parser

    p = job_parser("nbkit MLM pretraining (runs under torchrun)",
                   output_dir_help="where checkpoints, model/ and metrics.json go (default: runs/<scale>/mlm, "
                                   "runs/<scale>/mlm-<store name> with --corpus, plus -<overrides> such as "
                                   "-lr0.002-seed3: the folder notebook 02 names for the same settings; "
                                   "runs/ is $NBKIT_RUNS_DIR)")
    p.add_argument("--corpus", nargs="+", default=None,
                   help="a prepared corpus directory, or files/globs/folders to prepare on rank 0 (docs/corpus.md)")
    p.add_argument("--corpus-wait-s", type=float, default=6 * 3600.0,
                   help="how long ranks other than 0 wait for the prepared store (s)")
    p.add_argument("--dropout", type=float, default=None, help="hidden and attention dropout (default: 0.1)")
    return p


def parse_args(argv: list[str] | None = None):
    """The parsed flags (:func:`parser`). Raises ``SystemExit`` on a bad flag (argparse)."""
    return parser().parse_args(argv)


def config(a):
    """``(cfg, out_dir)`` for parsed flags ``a``: the :class:`~nbkit.recipes.pretraining.PretrainConfig`
    (``--seed`` also as ``split_seed``, as notebook 02) and ``--output-dir``, else
    :func:`nbkit.recipes.pretraining.run_dir` of that config (notebook 02's folder for the same settings).

    Raises:
        ConfigError: a bad ``--resume`` or scale (from the config).
    """
    from nbkit.jobs.common import loop_resume
    from nbkit.recipes.pretraining import PretrainConfig, run_dir

    corpus = None if not a.corpus else (a.corpus[0] if len(a.corpus) == 1 else list(a.corpus))
    cfg = PretrainConfig.for_scale(a.scale, max_steps=a.max_steps, batch_size=a.batch_size,
                                   grad_accum_steps=a.grad_accum, lr=a.lr, seed=a.seed, split_seed=a.seed,
                                   checkpoint_every=a.checkpoint_every, log_every=a.log_every, corpus=corpus,
                                   dropout=a.dropout).replace(resume=loop_resume(a.resume), progress=False)
    return cfg, a.output_dir or run_dir(cfg)


def main(argv: list[str] | None = None) -> int:
    """Run the job; returns the exit code: 0 done; 2 an nbkit error (ConfigError, DataError, ...: its message
    once and this job's flags for the names in it); 130 interrupted (Ctrl-C, or the launcher died: one line
    saying where it stopped and what the same command resumes from). See :mod:`nbkit.jobs.outcome`."""
    from nbkit.jobs.outcome import run_job

    return run_job("nbkit.jobs.pretrain", _run, argv, parser())


def _run(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    from nbkit.jobs.launch import MetricsPrinter
    from nbkit.recipes.pretraining import run_pretraining
    from nbkit.train.ddp.group import cleanup

    cfg, out_dir = config(a)
    try:
        run_pretraining(cfg, out_dir, callbacks=[MetricsPrinter()],
                        backend=a.backend, corpus_wait_s=a.corpus_wait_s)
    finally:
        cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
