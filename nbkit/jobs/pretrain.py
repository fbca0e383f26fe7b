"""MLM or causal pretraining as a script: ``[torchrun ...] python -m nbkit.jobs.pretrain [flags]``.

A wrapper around :func:`nbkit.recipes.pretraining.run_pretraining`: one flag per
:class:`~nbkit.recipes.pretraining.PretrainConfig` field (``--grad-accum-steps``, ``--corpus``, ...), each left
out keeping the scale's recipe. ``--corpus PATH`` pretrains on your corpus through the prepared store
(docs/corpus.md): rank 0 prepares it, the other ranks and nodes poll for its manifest. To check a launcher or a
multi-node rendezvous: ``--scale smoke --max-steps 6``. Under torchrun ``--batch-size`` is per process;
``--seed`` also sets ``split_seed``. The run goes to notebook 02's folder for the same settings
(:func:`~nbkit.recipes.pretraining.run_dir`) unless ``--output-dir``. ``--objective causal`` pretrains a GPT
(``--model gpt2-narrow`` / ``llama-narrow``, ``--init uer/gpt2-chinese-cluecorpussmall``) into ``runs/<scale>/causal...``.
"""
from __future__ import annotations

import sys
from pathlib import Path

SKIP = ("mix", "progress")   # the bundled mix is the scale's; a job logs lines instead of a bar


def parser():
    """The job's flags: an ``argparse.ArgumentParser`` (:func:`nbkit.jobs.common.job_parser`, ``--corpus-wait-s``)."""
    from nbkit.jobs.common import job_parser
    from nbkit.recipes.pretraining import PretrainConfig

    p = job_parser("nbkit pretraining, masked (mlm) or causal, and SFT on conversations (sft) (runs under torchrun)",
                   PretrainConfig, skip=SKIP,
                   output_dir_help="where checkpoints, model/ and metrics.json go (default: runs/<scale>/mlm, causal "
                                   "with --objective causal, runs/<scale>/sft with --objective sft, runs/<scale>/mlm-"
                                   "<store name> with --corpus, plus -<overrides> such as -lr0.002-seed3: notebook "
                                   "02's folder for the same settings; runs/ is $NBKIT_RUNS_DIR)")
    p.add_argument("--corpus-wait-s", type=float, default=6 * 3600.0,
                   help="how long ranks other than 0 wait for the prepared store (s)")
    return p


def config(a):
    """``(cfg, out_dir)`` for parsed flags ``a``: the :class:`~nbkit.recipes.pretraining.PretrainConfig`
    (``--seed`` also as ``split_seed``, as notebook 02) and ``--output-dir``, else its run_dir.

    Raises:
        ConfigError: a bad scale or value (from the config).
    """
    from nbkit.jobs.common import config_of
    from nbkit.recipes.pretraining import PretrainConfig

    cfg = config_of(PretrainConfig, a, skip=SKIP, progress=False,
                    **({"split_seed": a.seed} if a.seed is not None and a.split_seed is None else {}))
    return cfg, a.output_dir or cfg.run_dir()


def main(argv: list[str] | None = None) -> int:
    """Run the job; its exit code as :func:`nbkit.jobs.outcome.run_job` gives it (0 done, 2 an nbkit error, 130
    interrupted, 143 stopped by SIGTERM)."""
    from nbkit.jobs.outcome import run_job

    return run_job("nbkit.jobs.pretrain", _run, argv, parser())


def _run(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    from nbkit.jobs.launch import MetricsPrinter
    from nbkit.recipes.pretraining import run_pretraining
    from nbkit.train.ddp.group import cleanup

    cfg, out_dir = config(a)
    try:
        metrics = run_pretraining(cfg, out_dir, callbacks=[MetricsPrinter()], backend=a.backend,
                                  corpus_wait_s=a.corpus_wait_s)
    finally:
        cleanup()
    if metrics and "model_dir" in metrics:   # rank 0, which saved
        print(f"-> {Path(metrics['model_dir']).parent} (metrics.json); model: {metrics['model_dir']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
