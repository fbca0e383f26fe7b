"""Flags shared by the job scripts and how their ``--resume`` maps onto the loop."""
from __future__ import annotations

import argparse
from pathlib import Path


def job_parser(description: str, output_dir_help: str = "where checkpoints and metrics.json go"
               ) -> argparse.ArgumentParser:
    """An ``argparse`` parser with the flags every job takes.

    ``None`` means "the scale preset's value" (``nbkit.recipes.scale.get_scale``).
    ``--resume`` takes ``auto`` (newest complete checkpoint under ``--output-dir``, if any,
    possibly written under another world size: ``nbkit.train.ddp.sampler``) or ``none``
    (start fresh); see :func:`loop_resume`. ``output_dir_help``: ``--output-dir``'s help, which should
    name the job's default folder.
    """
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--scale", default=None, help="smoke | cpu | gpu (default: $NBKIT_SCALE, else by hardware)")
    p.add_argument("--output-dir", type=Path, default=None, help=output_dir_help)
    p.add_argument("--max-steps", type=int, default=None, help="optimizer steps in all")
    p.add_argument("--batch-size", type=int, default=None, help="sequences per micro-batch PER PROCESS")
    p.add_argument("--grad-accum", type=int, default=None, help="micro-batches per optimizer step")
    p.add_argument("--lr", type=float, default=None, help="peak learning rate")
    p.add_argument("--seed", type=int, default=None, help="data order and init seed (same on every rank)")
    p.add_argument("--checkpoint-every", type=int, default=None, help="steps between checkpoints")
    p.add_argument("--log-every", type=int, default=None,
                   help="steps between NBKIT_METRICS lines (default: the preset's)")
    p.add_argument("--resume", default="auto",
                   help="auto (newest complete checkpoint under --output-dir) | none")
    p.add_argument("--backend", default=None, choices=("nccl", "gloo"),
                   help="process-group backend (default: nccl on CUDA, gloo on CPU)")
    return p


def loop_resume(resume: str | None) -> bool:
    """``--resume`` for the ``nbkit.train.loop.Loop`` jobs: ``auto`` -> True, ``none`` -> False.

    The loop resumes from the newest complete checkpoint under its ``--output-dir``
    (``checkpoints/step-NNNNNN``), so a path is not accepted.

    Raises:
        nbkit.errors.ConfigError: anything else, naming the two accepted values.
    """
    from nbkit.errors import ConfigError

    value = "none" if resume is None else str(resume).lower()
    if value in ("auto", "yes", "true"):
        return True
    if value in ("none", "no", "false", ""):
        return False
    raise ConfigError(f"--resume {resume!r}: the pretraining and fine-tuning jobs take 'auto' (newest "
                      "checkpoint under --output-dir) or 'none'; point --output-dir at the run to resume")
