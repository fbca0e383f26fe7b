"""Flags shared by the job scripts, and the checkpoint-directory convention they use."""
from __future__ import annotations

import argparse
import re
from pathlib import Path


def job_parser(description: str) -> argparse.ArgumentParser:
    """An ``argparse`` parser with the flags every job takes.

    ``None`` means "the scale preset's value" (``nbkit.pipeline.scale.get_scale``).
    ``--resume`` takes ``auto`` (newest complete checkpoint in ``--output-dir``, if any),
    ``none`` (start fresh) or a checkpoint directory, possibly written under
    another world size (see ``nbkit.train.ddp_sampler``).
    """
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--scale", default=None, help="smoke | cpu | gpu (default: $NBKIT_SCALE, else by hardware)")
    p.add_argument("--output-dir", type=Path, default=None, help="where checkpoints and metrics.json go")
    p.add_argument("--max-steps", type=int, default=None, help="optimizer steps in all")
    p.add_argument("--batch-size", type=int, default=None, help="sequences per micro-batch PER PROCESS")
    p.add_argument("--grad-accum", type=int, default=None, help="micro-batches per optimizer step")
    p.add_argument("--lr", type=float, default=None, help="peak learning rate")
    p.add_argument("--seed", type=int, default=None, help="data order and init seed (same on every rank)")
    p.add_argument("--checkpoint-every", type=int, default=None, help="steps between checkpoints")
    p.add_argument("--log-every", type=int, default=None,
                   help="steps between NBKIT_METRICS lines (default: the preset's; --synthetic: 1)")
    p.add_argument("--resume", default="auto",
                   help="auto | none (--synthetic also: PATH to a checkpoint directory)")
    p.add_argument("--backend", default=None, choices=("nccl", "gloo"),
                   help="process-group backend (default: nccl on CUDA, gloo on CPU)")
    return p


_CKPT = re.compile(r"^checkpoint-(\d+)$")


def checkpoint_name(step: int) -> str:
    """Directory name of the checkpoint after optimizer step ``step``."""
    return f"checkpoint-{step:07d}"


def resolve_resume(resume: str | Path | None, output_dir: Path | None) -> Path | None:
    """Turn ``--resume`` into a checkpoint directory or ``None`` (start fresh).

    ``auto`` picks the complete checkpoint with the highest step in ``output_dir``
    (incomplete ones are written under a ``.tmp`` name and never match).

    Raises:
        nbkit.errors.CheckpointError: an explicit path does not exist.
    """
    from nbkit.errors import CheckpointError

    if resume is None or str(resume).lower() in ("none", "no", "false", ""):
        return None
    if str(resume).lower() == "auto":
        if output_dir is None or not Path(output_dir).is_dir():
            return None
        found = [(int(m.group(1)), d) for d in Path(output_dir).iterdir()
                 if d.is_dir() and (m := _CKPT.match(d.name))]
        return max(found)[1] if found else None
    path = Path(resume)
    if not path.is_dir():
        raise CheckpointError(f"no checkpoint directory at {path}; pass --resume auto, none, "
                              "or an existing checkpoint-NNNNNNN directory")
    return path


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
