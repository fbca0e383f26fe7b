"""Command line: ``nbkit doctor`` and ``nbkit run-notebooks``.

Each sub-command lives in the module of its concern; this file only parses
arguments and dispatches, so ``nbkit doctor`` works even when torch is broken.
"""
from __future__ import annotations

import argparse
import sys


def _doctor(args: argparse.Namespace) -> int:
    from nbkit import env

    return env.doctor_main(as_json=args.json, cuda=args.cuda)


def _run_notebooks(args: argparse.Namespace) -> int:
    from nbkit import notebooks

    return notebooks.run_all(scale=args.scale, only=args.only, timeout=args.timeout)


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
    p.add_argument("--only", nargs="*", default=None, help="notebook name prefixes, e.g. 01 02")
    p.add_argument("--timeout", type=int, default=3600, help="seconds per cell")
    p.set_defaults(func=_run_notebooks)

    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
