"""Call ``module:function`` with string arguments: ``python -m nbkit.jobs.call pkg.mod:fn [args...]``.

This is how ``nbkit.jobs.launch`` runs a *function* under torchrun: each worker imports
the module and calls ``fn(*args)``; a non-zero int return becomes the exit code. A process
group the function joined is destroyed after it returns (``nbkit.train.ddp.group.cleanup``).
"""
from __future__ import annotations

import importlib
import sys


def main(argv: list[str] | None = None) -> int:
    """Import and call the target; exit code 2 with a hint when it cannot be found."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or ":" not in argv[0]:
        print("usage: python -m nbkit.jobs.call package.module:function [args...]", file=sys.stderr)
        return 2
    mod_name, _, qual = argv[0].partition(":")
    try:
        obj = importlib.import_module(mod_name)
        for part in qual.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        print(f"cannot find {argv[0]}: {e}; is its directory on PYTHONPATH?", file=sys.stderr)
        return 2
    from nbkit.train.ddp.group import cleanup

    try:
        rc = obj(*argv[1:])
    finally:
        cleanup()  # a process group the function joined is freed now, not at interpreter exit
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
