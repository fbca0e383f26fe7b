"""Fine-tuning as a script (sentiment, named entities): ``[torchrun ...] python -m nbkit.jobs.finetune [flags]``.

A wrapper around :func:`nbkit.recipes.finetuning.run_finetuning`: one flag per
:class:`~nbkit.recipes.finetuning.FinetuneConfig` field, each left out keeping the scale's recipe. Data:
``--task reviews|news`` (bundled), or your labelled files as notebook 05 reads them (``--train-file
[--validation-file] [--test-file] --text-column --label-column``: task ``own``, seeded, so every rank draws the
same splits). Named entities: ``--task ner`` (People's Daily 1998), or ``--task ner --train-file x.conll
[--validation-file] [--test-file]`` on your tagged files (CoNLL ``char<TAB>tag``, BIO or BIOES, or JSON lines with
spans), scored by entity-level F1 beside a CRF. ``--init`` names the encoder (default: notebook 02's model at this scale, else random weights).
LoRA instead of full fine-tuning: ``--lora yes`` (``--lora-r``, ``--lora-alpha``, ``--lora-dropout``,
``--lora-targets query value``, ``--lora-lr``; with ``--export``, ``--lora-export merged|adapter|both``).
Under torchrun ``--batch-size`` is per process and the steps come from the global batch. At the end rank 0
prints the test scores beside the TF-IDF baseline and where the outputs are.
"""
from __future__ import annotations

import sys
from pathlib import Path

SKIP = ("progress",)


def parser():
    """The job's flags: an ``argparse.ArgumentParser`` (:func:`nbkit.jobs.common.job_parser`, ``--export``)."""
    from nbkit.jobs.common import job_parser
    from nbkit.recipes.finetuning import FinetuneConfig

    p = job_parser("nbkit fine-tuning: sentiment or named entities (runs under torchrun)", FinetuneConfig, skip=SKIP,
                   output_dir_help="where checkpoints, metrics.json (and model/ with --export) go (default: "
                                   "runs/<scale>/sentiment, plus -<overrides> such as -lr0.002-seed3 and "
                                   "-from-<encoder>-<hash> with --init: notebook 03's folder for the same "
                                   "settings; runs/ is $NBKIT_RUNS_DIR)")
    p.add_argument("--export", action="store_true", help="also write OUTPUT_DIR/model (plain transformers loads it)")
    return p


def config(a):
    """``(cfg, out_dir)`` for parsed flags ``a``: the :class:`~nbkit.recipes.finetuning.FinetuneConfig` (task
    ``own`` when ``--train-file`` is given) and ``--output-dir``, else its run_dir.

    Raises:
        ConfigError: a bad scale or value, ``--train-file`` with a bundled ``--task``, or a file/column flag
        without ``--train-file``.
    """
    from nbkit import tasks
    from nbkit.errors import ConfigError
    from nbkit.jobs.common import config_of
    from nbkit.recipes.finetuning import FinetuneConfig

    own = [f"--{k.replace('_', '-')}" for k in ("validation_file", "test_file", "text_column", "label_column")
           if getattr(a, k) is not None]
    if a.task is None and a.train_file is not None:
        a.task = "own"
    task = tasks.get(a.task or FinetuneConfig.task)
    if a.train_file is not None and task.files is None:
        raise ConfigError(f"--task {a.task} is a bundled task; --train-file trains on your own files (task own): "
                          "give one of them")
    if a.train_file is None and own:
        raise ConfigError(f"{', '.join(own)} describe your own {task.files or 'labelled'} files: "
                          "add --train-file PATH")
    cfg = config_of(FinetuneConfig, a, skip=SKIP, progress=False)
    return cfg, a.output_dir or cfg.run_dir()


def summary(metrics: dict, out_dir, export_dir=None) -> str:
    """The job's last words (rank 0): the test scores beside the baseline (``metrics["table"]``), the
    output folder, the export folder (if any; a LoRA run's merged model and adapter folder as
    ``metrics["lora"]["export"]`` says), the saved CRF (task ner) and ``metrics["warnings"]`` (e.g. one class
    always predicted)."""
    lora_export = (metrics.get("lora") or {}).get("export", "merged")
    exported = ""
    if export_dir and lora_export in ("merged", "both"):
        exported += f"; exported model: {export_dir}" + (" (LoRA merged)" if metrics.get("lora") else "")
    if export_dir and metrics.get("lora") and lora_export in ("adapter", "both"):
        exported += f"; LoRA adapter: {Path(export_dir) / 'adapter'} (peft.PeftModel.from_pretrained(base, folder))"
    where = (f"-> {out_dir} (metrics.json)" + exported
             + (f"; CRF baseline: {metrics['baseline_model']} (CrfTagger.load(...).predict(text))"
                if metrics.get("baseline_model") else ""))
    return "\n".join([metrics["table"].to_string(), where,
                      *(f"warning: {w}" for w in metrics.get("warnings") or ())])


def main(argv: list[str] | None = None) -> int:
    """Run the job; its exit code as :func:`nbkit.jobs.outcome.run_job` gives it (0 done, 2 an nbkit error, 130
    interrupted, 143 stopped by SIGTERM)."""
    from nbkit.jobs.outcome import run_job

    return run_job("nbkit.jobs.finetune", _run, argv, parser())


def _run(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    from nbkit.jobs.launch import MetricsPrinter
    from nbkit.recipes import finetuning as ft
    from nbkit.train.ddp import group as D

    cfg, out_dir = config(a)
    info = D.init_distributed(a.backend)
    try:
        tok = ft.tokenizer(cfg) if info.is_main else None   # rank 0 trains notebook 01's if missing
        D.barrier()
        tok = tok or ft.tokenizer(cfg)
        metrics = ft.run_finetuning(cfg, out_dir, tokenizer=tok, callbacks=[MetricsPrinter()],
                                    export_model=a.export)
        D.barrier()
        if info.is_main:
            print(summary(metrics, out_dir, Path(out_dir) / "model" if a.export else None), flush=True)
    finally:
        D.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
