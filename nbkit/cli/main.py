"""Command line: ``nbkit doctor`` and ``nbkit run-notebooks``.

Each sub-command lives in the module of its concern; this file only parses
arguments and dispatches, so ``nbkit doctor`` works even when torch is broken.
Exit codes: 0 success, 1 a FAIL line / a failed notebook, 2 bad input (one
line on stderr naming the fix, no traceback).
"""
from __future__ import annotations

import argparse
import sys


def _doctor(args: argparse.Namespace) -> int:
    from nbkit.env import doctor as env

    return env.doctor_main(as_json=args.json, cuda=args.cuda)


def _run_notebooks(args: argparse.Namespace) -> int:
    from nbkit.cli import run_notebooks as notebooks
    from nbkit.errors import ConfigError

    try:
        return notebooks.run_all(scale=args.scale, only=args.only, timeout=args.timeout)
    except ConfigError as exc:  # bad input: one line, like argparse's own errors
        print(f"nbkit run-notebooks: error: {exc}", file=sys.stderr)
        return 2


def _seconds(text: str) -> int:
    """argparse type: a whole number of seconds > 0."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number of seconds")
    return value


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``nbkit`` command; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="nbkit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("doctor", help="layered environment report (exit 1 on FAIL)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--cuda", action="store_true",
                   help="also create a CUDA context and run a tiny kernel")
    p.set_defaults(func=_doctor)

    p = sub.add_parser("run-notebooks", help="execute the notebooks in order, headless")
    p.add_argument("--scale", default=None, help="smoke, cpu or gpu (default: $NBKIT_SCALE)")
    p.add_argument("--only", nargs="+", default=None, help="notebook name prefixes, e.g. 01 02")
    p.add_argument("--timeout", type=_seconds, default=3600,
                   help="seconds allowed per cell (default 3600)")
    p.set_defaults(func=_run_notebooks)

    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
