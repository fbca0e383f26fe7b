"""Sentiment fine-tuning as a script: ``[torchrun ...] python -m nbkit.jobs.finetune [flags]``.

A thin argparse wrapper around :func:`nbkit.recipes.finetuning.run_finetuning` (notebook 03's recipe):
each flag left out keeps :meth:`~nbkit.recipes.finetuning.FinetuneConfig.for_scale`'s value.
Under torchrun ``--batch-size`` is per process and the steps come from the global batch.

Data: ``--task reviews|news`` (bundled), or your own labelled files as notebook 05 reads them
(``--train-file [--validation-file] [--test-file] --text-column --label-column``:
:func:`nbkit.data.load_labeled_files`, seeded, so every torchrun rank draws the same splits).
At the end rank 0 prints the test scores beside the TF-IDF baseline and where the outputs are.
"""
from __future__ import annotations

import sys
from pathlib import Path


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
    which = p.add_mutually_exclusive_group()
    which.add_argument("--task", default="reviews", choices=("reviews", "news"),
                       help="a bundled labelled task (default: reviews); or --train-file for your own")
    which.add_argument("--train-file", type=Path, default=None,
                       help="your labelled texts (.csv/.tsv/.jsonl/.json, as notebook 05's train_file)")
    own = p.add_argument_group("your own labelled files (with --train-file)")
    own.add_argument("--validation-file", type=Path, default=None,
                     help="default: 10%% drawn from --train-file (by unique text, stratified)")
    own.add_argument("--test-file", type=Path, default=None,
                     help="default: 10%% drawn from --train-file (by unique text, stratified)")
    own.add_argument("--text-column", default=None, help="the text column / JSON key (default: text)")
    own.add_argument("--label-column", default=None,
                     help="the label column / JSON key, strings or integers (default: label)")
    p.add_argument("--export", action="store_true", help="also write OUTPUT_DIR/model (plain transformers loads it)")
    return p


def parse_args(argv: list[str] | None = None):
    """The parsed flags (:func:`parser`), with ``--text-column``/``--label-column`` defaulted to
    ``text``/``label`` (:func:`nbkit.data.load_labeled_files`'s). Raises ``SystemExit`` (exit 2, argparse's
    usage line) on a bad flag: ``--task`` with ``--train-file``, or a file/column flag without ``--train-file``."""
    p = parser()
    a = p.parse_args(argv)
    if a.train_file is None:
        given = [f for f, v in (("--validation-file", a.validation_file), ("--test-file", a.test_file),
                                ("--text-column", a.text_column), ("--label-column", a.label_column)) if v is not None]
        if given:
            p.error(f"{', '.join(given)} describe your own labelled files: add --train-file PATH")
    a.text_column, a.label_column = a.text_column or "text", a.label_column or "label"
    return a


def own_data(a, seed: int = 0):
    """The user's :class:`~nbkit.data.labeled.LabeledData` for parsed flags ``a`` (``--train-file`` ...), split
    with ``seed`` (the config's: the same splits in every process). Raises ConfigError/DataError from
    :func:`nbkit.data.load_labeled_files` (a missing file or column, one class, ...: the message says which)."""
    from nbkit.data import load_labeled_files

    return load_labeled_files(a.train_file, validation=a.validation_file, test=a.test_file,
                              text_column=a.text_column, label_column=a.label_column, seed=seed)


def data_step(a) -> str:
    """The run folder's step for parsed flags ``a``: ``sentiment`` for a bundled task (``news``: the
    recipe's own defaults tag it), ``sentiment-own-<train file stem>-<hash>`` for your files (``<hash>``:
    6 hex of the absolute paths of all three files and both column names,
    :func:`nbkit.runs.path_tag`), so runs on other files never share checkpoints."""
    from nbkit.runs import path_tag

    if a.train_file is None:
        return "sentiment"
    where = lambda f: None if f is None else str(Path(f).expanduser().resolve())  # noqa: E731
    key = repr((where(a.train_file), where(a.validation_file), where(a.test_file), a.text_column, a.label_column))
    return "sentiment-own-" + path_tag(Path(a.train_file).stem, key, 6, fallback="data")


def config(a):
    """``(cfg, out_dir)`` for parsed flags ``a``: the :class:`~nbkit.recipes.finetuning.FinetuneConfig`
    and ``--output-dir``, else :func:`nbkit.recipes.finetuning.run_dir` of that config and ``--pretrained``
    (notebook 03's folder for the same settings, so runs with other settings or encoders never share one).

    Raises:
        ConfigError: a bad ``--resume``, scale or task (from the config).
    """
    from nbkit.jobs.common import loop_resume
    from nbkit.recipes.finetuning import FinetuneConfig, run_dir

    cfg = FinetuneConfig.for_scale(a.scale, task="reviews" if a.train_file else a.task, max_steps=a.max_steps, epochs=a.epochs,
                                   batch_size=a.batch_size, grad_accum_steps=a.grad_accum, lr=a.lr, seed=a.seed,
                                   checkpoint_every=a.checkpoint_every, log_every=a.log_every)
    cfg = cfg.replace(resume=loop_resume(a.resume), progress=False)
    return cfg, a.output_dir or run_dir(cfg, a.pretrained, step=data_step(a))


def summary(metrics: dict, out_dir, export_dir=None) -> str:
    """The job's last words (rank 0): the test split's accuracy / macro-F1 beside the TF-IDF baseline, full
    text and the same cut (``metrics["table"]``, :func:`nbkit.evaluate.metrics.compare_reports`, as notebooks
    03 and 05 show it), the output folder, the export folder (``export_dir``, if any) and ``metrics["warnings"]``
    (e.g. a degenerate classifier that predicts one class)."""
    where = f"-> {out_dir} (metrics.json)" + (f"; exported model: {export_dir}" if export_dir else "")
    return "\n".join([metrics["table"].to_string(), where,
                      *(f"warning: {w}" for w in metrics.get("warnings") or ())])


def main(argv: list[str] | None = None) -> int:
    """Run the job; returns the exit code: 0 done; 2 an nbkit error (ConfigError, DataError, ...: its message
    once and this job's flags for the names in it); 130 interrupted (Ctrl-C, or the launcher died: one line
    saying where it stopped and what the same command resumes from). See :mod:`nbkit.jobs.outcome`."""
    from nbkit.jobs.outcome import run_job

    return run_job("nbkit.jobs.finetune", _run, argv, parser())


def _run(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    from nbkit.recipes.finetuning import run_finetuning, tokenizer_for
    from nbkit.recipes.scale import get_scale
    from nbkit.recipes.tokenizer import pretrained_model_dir
    from nbkit.train.ddp import group as D

    cfg, out_dir = config(a)
    scale = get_scale(a.scale)
    info = D.init_distributed(a.backend)
    try:
        pretrained = a.pretrained or pretrained_model_dir(scale)      # None: random weights
        tokenizer = tokenizer_for(cfg, pretrained) if info.is_main else None   # rank 0 trains notebook 01's if missing
        D.barrier()
        tokenizer = tokenizer or tokenizer_for(cfg, pretrained)   # the encoder's own, as notebook 03
        from nbkit.jobs.launch import MetricsPrinter

        task = own_data(a, cfg.seed) if a.train_file else a.task
        metrics = run_finetuning(cfg, out_dir, pretrained=pretrained, task=task, tokenizer=tokenizer,
                                 callbacks=[MetricsPrinter()], export_model=a.export)
        D.barrier()
        if info.is_main:
            print(summary(metrics, out_dir, Path(out_dir) / "model" if a.export else None), flush=True)
    finally:
        D.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
