"""How a training job ends when it does not finish: one line each, no traceback.

* Ctrl-C (``KeyboardInterrupt``; torchrun forwards it to its workers as SIGINT) or a launcher that
  died (``nbkit.train.ddp.launcher_watch``): rank 0 says at which step the run stopped, which complete
  checkpoint the same command resumes from (``--resume auto`` is the default), exit code 130; SIGTERM
  during training (``timeout``, SLURM, Kubernetes, ``docker stop``): the same after the loop's checkpoint,
  exit code 143 (128 + 15, what a shell reports for a process SIGTERM killed).
* an nbkit error (``ConfigError``, ``DataError``, ``CheckpointError``, ...: ``nbkit.errors.NbkitError``):
  its message once, then a line mapping the API names in it to this job's flags
  (``resume=False -> --resume none``), exit code 2; warnings that name API settings get the same line.
* under torchrun a failing rank > 0 prints its error too (rank 0 may never speak), once per node and run
  (:func:`first_to_say`).
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import sys
import tempfile
import warnings
from pathlib import Path

INTERRUPTED = 130
TERMINATED = 143
BAD_INPUT = 2
LITERALS = {"resume=False": "--resume none", "resume=True": "--resume auto"}


def job_flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    """``{api_name: flag}`` for every flag of ``parser`` (``grad_accum_steps -> --grad-accum-steps``)."""
    return {a.dest: max(a.option_strings, key=len) for a in parser._actions if a.option_strings and a.dest != "help"}


def flag_hint(text: str, flags: dict[str, str]) -> str | None:
    """One line naming this job's flag for each API spelling in ``text``, in order of appearance; None
    when there is none. A name with ``_`` counts anywhere as a word (``output_dir``); a plain word only
    as an assignment (``lr=``, ``seed=``), so prose ("the same seed") does not."""
    found: list[tuple[int, str, str]] = [(text.find(lit), lit, flag) for lit, flag in LITERALS.items() if lit in text]
    for name, flag in flags.items():
        if name == "resume" and found:   # resume=False / resume=True: named above with their value
            continue
        m = re.search(rf"\b{re.escape(name)}\b" if "_" in name else rf"\b{re.escape(name)}=", text)
        if m:
            found.append((m.start(), name, flag))
    if not found:
        return None
    return "in this job's flags: " + ", ".join(f"{name} -> {flag}" for _, name, flag in sorted(found))


def _rank() -> int:
    try:
        return int(os.environ.get("RANK") or 0)
    except ValueError:
        return 0


def first_to_say(text: str) -> bool:
    """True in one process alone; under a launcher, True for the first process on this node that says
    ``text`` in this run (an empty marker file in the temp folder), so N ranks failing alike print once."""
    if int(os.environ.get("WORLD_SIZE") or 1) <= 1:
        return True
    # the launcher's pid too: torchrun without --standalone names every run "none", so the run id alone
    # would silence the same error in every later run on this node
    run = (f"{os.getppid()}:{os.environ.get('TORCHELASTIC_RUN_ID')}:"
           f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}")
    key = hashlib.sha1(f"{run}\n{text}".encode()).hexdigest()[:16]
    try:
        os.close(os.open(os.path.join(tempfile.gettempdir(), f"nbkit-said-{key}"), os.O_CREAT | os.O_EXCL, 0o644))
    except OSError as err:   # said already; any other error (no temp folder): say it
        return not isinstance(err, FileExistsError)
    return True


def _say(line: str | None) -> None:
    if line is None:   # no flag hint
        return
    with contextlib.suppress(OSError, ValueError):   # the launcher's pipe may be gone with it
        print(line, file=sys.stderr, flush=True)


def stop_line(prog: str, stopped: dict | None, orphan: bool) -> str:
    """The one line an interrupted job prints: where it stopped and what the same command resumes from.

    ``stopped``: ``Loop.fit``'s ``exc.nbkit_stopped`` (step, max_steps, output_dir, signal, seconds: a SIGTERM's
    time to the saved checkpoint, said so the grace period can be checked), or None when the job stopped before
    training began."""
    from nbkit.train.checkpoint import checkpoints_dir, list_checkpoints

    why = ("its launcher is gone (torchrun killed?), so it stopped" if orphan
           else "stopped by SIGTERM" if stopped and stopped.get("signal") == "SIGTERM" else "interrupted")
    if not stopped:
        return (f"{prog}: {why} before training started. Run the same command again to start it (--resume auto, "
                "the default, continues from the newest complete checkpoint in --output-dir, if any).")
    where = f"at step {stopped['step']} of {stopped['max_steps']}"
    out = stopped.get("output_dir")
    ckpts = list_checkpoints(out, warn=False) if out is not None else []
    if not ckpts:
        kept = f"no complete checkpoint in {checkpoints_dir(out)}" if out is not None else "no checkpoints (no output dir)"
        return (f"{prog}: {why} {where}; {kept}, so the same command starts again from step 0 "
                "(--checkpoint-every N saves more often).")
    last = ckpts[-1]
    took = f", {stopped['seconds']:.1f} s after the signal" if stopped.get("seconds") is not None else ""
    return (f"{prog}: {why} {where}; newest complete checkpoint: {last.path} (step {last.step}{took}). Run the "
            "same command again to resume from it (--resume auto is the default); --resume none starts over.")


def run_folders() -> set[Path]:
    """The folders of the runs directory (``$NBKIT_RUNS_DIR``) as they are now: the root, each scale and each
    run (``runs/<scale>/<run>``); empty when there is no runs directory."""
    from nbkit.runs import step_path

    root = step_path()
    if not root.is_dir():
        return set()
    found = {root}
    for scale in (p for p in root.iterdir() if p.is_dir()):
        found |= {scale, *(p for p in scale.iterdir() if p.is_dir())}
    return found


def remove_empty_new(before: set[Path]) -> list[Path]:
    """Remove the folders of the runs directory that are not in ``before`` (:func:`run_folders`) and are empty,
    deepest first (a run's, then its scale's, then the root); returns them. A folder with anything in it stays."""
    removed = []
    for path in sorted(run_folders() - before, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):               # empty only: OSError where anything was written
            path.rmdir()
            removed.append(path)
    return removed


def run_job(prog: str, body, argv, parser: argparse.ArgumentParser) -> int:
    """Call ``body(argv)`` and turn how it ends into an exit code (see the module docstring).

    Returns ``body``'s int (0 when it returns None), 130 after an interrupt or a launcher's death, 143 after a
    SIGTERM the loop held, 2 after an nbkit error. Other exceptions propagate unchanged (a traceback: a bug to report).
    """
    from nbkit.caches import ensure_writable_caches
    from nbkit.errors import NbkitError
    from nbkit.train.ddp.launcher_watch import orphaned

    flags = job_flags(parser)
    show = warnings.showwarning

    def show_with_flags(message, category, filename, lineno, file=None, line=None):
        show(message, category, filename, lineno, file, line)
        _say(flag_hint(str(message), flags))

    warnings.showwarning = show_with_flags
    before = run_folders()
    try:
        ensure_writable_caches()   # HOME's cache unwritable: HF, matplotlib, jieba caches to a temp folder (warned)
        rc = body(argv)
        return rc if isinstance(rc, int) else 0
    except KeyboardInterrupt as exc:
        stopped = getattr(exc, "nbkit_stopped", None)
        if _rank() == 0:
            _say(stop_line(prog, stopped, orphaned()))
        return TERMINATED if stopped and stopped.get("signal") == "SIGTERM" else INTERRUPTED
    except NbkitError as exc:
        if _rank() == 0:
            remove_empty_new(before)    # a run refused for its input leaves no empty folder behind
        text = f"{prog}: error: {exc}"
        if first_to_say(text):
            _say(text if _rank() == 0 else f"[rank {_rank()}] {text}")
            _say(flag_hint(str(exc), flags))
        return BAD_INPUT
    except Exception as exc:
        if not orphaned():
            raise
        if _rank() == 0:  # a collective failed because a peer stopped with the launcher: not a bug
            _say(stop_line(prog, getattr(exc, "nbkit_stopped", None), True))
        return INTERRUPTED
    finally:
        warnings.showwarning = show
