"""Command line: ``nbkit doctor``, ``nbkit run-notebooks`` and ``nbkit prepare-corpus``.

Only parses and dispatches (``nbkit doctor`` works with a broken torch). Exit codes: 0 success, 1 a FAIL
line or a failed notebook, 2 bad input (one line on stderr naming the fix).
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


#: API spellings in the writer's messages that are no ``name=value`` of a flag (a setting named as the store
#: records it, ``setting exclude_texts: ...``, keeps its name: it is the manifest's key)
CLI_LITERALS = {"overwrite=True": "--overwrite", "strip_markup=False": "--no-strip-markup", "out_dir": "--out"}


def _flags(message: str, flags: dict[str, str]) -> str:
    """A writer's message in the command line's words: ``vocab_size=5000`` -> ``--vocab-size 5000``,
    ``errors='skip'`` -> ``--errors skip``, ``overwrite=True`` -> ``--overwrite``, ``out_dir`` -> ``--out``
    (``flags``: ``{api_name: flag}`` of the subcommand)."""
    import re

    for literal, flag in CLI_LITERALS.items():
        message = re.sub(rf"\b{re.escape(literal)}\b", flag, message)
    names = "|".join(sorted((n for n in flags if n not in ("out", "overwrite")), key=len, reverse=True))
    return re.sub(rf"\b({names})=(['\"]?)(\S+?)\2(?=[,:;) ]|$)", lambda g: f"{flags[g[1]]} {g[3]}", message)


def _prepare_corpus(args: argparse.Namespace) -> int:
    import warnings

    from nbkit.corpus.prepare import prepare_corpus
    from nbkit.errors import NbkitError

    settings = {k: v for k, v in vars(args).items()
                if k not in ("command", "func", "flags", "inputs", "out", "num_workers", "overwrite", "exclude",
                             "exclude_text_field") and v is not None}
    try:
        if args.exclude:
            from nbkit.corpus.worker import iter_texts

            field = args.exclude_text_field or args.text_field or "text"
            settings["exclude_texts"] = list(iter_texts(args.exclude, field))
        with warnings.catch_warnings(record=True) as caught:   # shown as one line each, like the errors
            warnings.simplefilter("always", UserWarning)
            prepare_corpus(args.inputs, args.out, num_workers=args.num_workers, overwrite=args.overwrite,
                               **settings)
        for w in caught:
            print(f"nbkit prepare-corpus: warning: {_flags(str(w.message), args.flags)}", file=sys.stderr)
    except NbkitError as exc:  # bad input, changed store, disk full: one line naming the fix, in the flags' words
        print(f"nbkit prepare-corpus: error: {_flags(str(exc), args.flags)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        from pathlib import Path

        done = len(list((Path(args.out) / "shards").glob("*.done.json")))
        print(f"nbkit prepare-corpus: interrupted; {done} complete part(s) kept in {args.out}. Run the same "
              "command again to continue from there (the result is byte-identical to an uninterrupted run).",
              file=sys.stderr)
        return 130
    # prepare_corpus printed its report (nbkit.corpus.report.report_lines): per file what it lost, where, the fix
    return 0


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

    p = sub.add_parser("prepare-corpus", help="files/globs/folders of text -> a token store (docs/corpus.md)")
    p.add_argument("inputs", nargs="+", help=".txt/.jsonl/.json/.parquet files (optionally .gz/.zst; other files by "
                   "content), globs, folders")
    p.add_argument("--out", required=True, help="the store's folder (reused when complete, continued when partial)")
    p.add_argument("--text-field", help="JSON key / parquet column of the text (default text)")
    p.add_argument("--tokenizer", help="a tokenizer folder to use (default: train one on a sample)")
    p.add_argument("--vocab-size", type=int, help="WordPiece size when training (default 21128)")
    p.add_argument("--sample-mb", type=float, help="MB of text the tokenizer is trained on (default 16)")
    p.add_argument("--num-workers", type=int, default=None, help="processes (default: the usable cores)")
    p.add_argument("--errors", choices=("skip", "raise"), help="bad lines: count and skip (default) or stop")
    p.add_argument("--min-chars", type=int, help="drop texts with fewer visible characters (default 5)")
    p.add_argument("--min-cjk-share", type=lambda v: v if v == "auto" else float(v),
                   help="drop texts with a smaller share of CJK characters (default auto: 0.1 for a Wikipedia "
                   "dump's texts, off for others; 0: off)")
    p.add_argument("--no-strip-markup", dest="strip_markup", action="store_false", default=None,
                   help="keep MediaWiki markup (default: stripped, docs/corpus.md)")
    p.add_argument("--heldout-share", type=float, help="share of texts held out by hash (default 0.005)")
    p.add_argument("--max-chars", type=int, help="cut longer texts at sentence ends into pieces of at most this "
                   "(default 20000)")
    p.add_argument("--exclude", nargs="+", metavar="PATH", help="files whose texts are never stored, e.g. your "
                   "evaluation set (same formats; equal after the same cut, rule and NFKC-form hash)")
    p.add_argument("--exclude-text-field",
                   help="JSON key / parquet column of --exclude's texts (default: --text-field)")
    p.add_argument("--shard-tokens", type=int, help="tokens per train shard, about (default 33554432)")
    p.add_argument("--segmenter", choices=("auto", "rjieba", "jieba", "none"),
                   help="word segmenter (default auto; none: the tokenizer's own words, no whole Chinese words)")
    p.add_argument("--overwrite", action="store_true", help="replace a store of other input or settings, or a "
                   "damaged one (deletes only nbkit's files there)")
    # {api_name: flag}, as nbkit.jobs.outcome.job_flags gives a job's (cli may not import jobs: docs/architecture.md)
    p.set_defaults(func=_prepare_corpus, flags={a.dest: max(a.option_strings, key=len) for a in p._actions
                                                if a.option_strings and a.dest != "help"})
    said = p.error

    def error(message: str):   # --exclude's list takes every path after it, the inputs too
        if "inputs" in message and "--exclude" in (sys.argv if argv is None else argv):
            message += ("; --exclude takes every path after it, so put it after the inputs (nbkit prepare-corpus "
                        "INPUT... --out DIR --exclude PATH...), or end its paths with -- and put the inputs last "
                        "(... --out DIR --exclude PATH... -- INPUT...)")
        said(message)
    p.error = error

    args = parser.parse_args(argv)
    from nbkit.caches import ensure_writable_caches

    ensure_writable_caches()   # HOME's cache unwritable: HF, matplotlib, jieba caches to a temp folder, said on stderr
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
