#!/usr/bin/env python3
"""Regenerate the "What to expect (measured)" blocks from recorded runs: the notebooks' run, the GPU session and
the "does pretraining pay off" benchmark.

Usage::

    NBKIT_SCALE=cpu scripts/run_notebooks.sh            # writes runs/cpu/...
    .venv/bin/python scripts/expect_table.py runs        # rewrites the blocks between their markers
    .venv/bin/python scripts/expect_table.py bench/results/notebooks_cpu_2026-12-02   # from the recorded copy
    .venv/bin/python scripts/expect_table.py runs --print   # only print the blocks

Writes: the notebooks' table (``expect-table``) and the GPU session's (``gpu-table``, ``scripts/gpu_table.py``) in
docs/running.md; the recorded ``bench/pretrain_value.py`` runs (``notebooks/data/pretrain_value.json`` and
``pretrain_value_gpu.json``) in docs/finetuning.md (``pretrain-value``, ``pretrain-value-gpu``); and one headline
line of each (``*-headline``) in both READMEs. ``--root`` names another checkout to rewrite.
Reads, under ``RUNS_DIR/<scale>/`` (``--scale``, default ``cpu``): ``tokenizer/stats.json``
(+ ``tokenizer/training.json``), ``mlm/metrics.json``, ``sentiment/metrics.json`` and,
when present, ``executed/timings.json`` (written by ``nbkit run-notebooks``: seconds per
notebook and the machine). Every number in the block comes from those files; a value
the run did not record shows as "n/a". The machine named is ``--machine``, else the one
``timings.json`` recorded, else the device in ``mlm/metrics.json``.

Exit status 2 with a one-line reason when a file or a block's markers are missing.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/gpu_table.py
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
sys.path.insert(0, str(ROOT))                             # nbkit, bench.pretrain_value_report
import gpu_table  # noqa: E402
from blocks import markers, num, print_or_rewrite  # noqa: E402

START, END = markers("expect-table", "expect_table.py")
HEAD_START, HEAD_END = markers("expect-headline", "expect_table.py")
NOTEBOOK_ORDER = ("00", "01", "02", "03", "04", "05", "06")
PV_START, PV_END = markers("pretrain-value", "expect_table.py")
PV_RECORDED = ROOT / "notebooks" / "data" / "pretrain_value.json"
PVG_START, PVG_END = markers("pretrain-value-gpu", "expect_table.py")
PV_GPU_RECORDED = ROOT / "notebooks" / "data" / "pretrain_value_gpu.json"
PVH_START, PVH_END = markers("pretrain-value-headline", "expect_table.py")
PV_MACHINES = ((PV_RECORDED, "a 2-core CPU"), (PV_GPU_RECORDED, "a GPU"))   # where a stats file names none


class Missing(Exception):
    """A file or marker the table needs is not there."""


def _load(path: Path, required: bool = True) -> dict:
    if not path.is_file():
        if required:
            raise Missing(f"{path} not found: run the notebooks at this scale first "
                          "(`NBKIT_SCALE=cpu scripts/run_notebooks.sh`)")
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def _pct(value, digits: int = 2) -> str:
    return "n/a" if value is None else f"{100 * value:.{digits}f} %"


def render(runs: Path, scale: str = "cpu", machine: str | None = None) -> str:
    """The Markdown block (intro line + table + cleaning line) for ``runs/<scale>``.

    Raises:
        Missing: a required JSON file is absent (the message names it).
    """
    base = runs / scale
    stats = _load(base / "tokenizer" / "stats.json")
    training = _load(base / "tokenizer" / "training.json", required=False)
    mlm = _load(base / "mlm" / "metrics.json")
    sent = _load(base / "sentiment" / "metrics.json")
    timings = _load(base / "executed" / "timings.json", required=False)
    machine = machine or timings.get("machine") or f"device {mlm.get('device', 'n/a')}"
    when = (mlm.get("written_at") or "")[:10] or "n/a"

    tok = (f"vocabulary {num(stats.get('vocab_size'))} (asked {num(training.get('vocab_size_requested'))}); "
           f"`[UNK]` rate {_pct(stats.get('unk_rate'), 3)} on held-out news"
           + (f", {_pct(stats.get('review_unk_rate'))} on the test reviews" if "review_unk_rate" in stats else "")
           + f"; {num(stats.get('chars_per_token'), '.2f')} characters per token")
    params = mlm.get("parameters")
    mlm_step = (f"02 MLM, BERT-{mlm.get('model', '?')} ({num(params and params / 1e6, '.1f')} M parameters), "
                f"{num(mlm.get('steps'))} steps × {num(mlm.get('batch_size'))} blocks of "
                f"{num(mlm.get('block_size'))} tokens" + (f", lr {mlm['lr']:g}" if mlm.get("lr") else ""))
    first = (f", {num(mlm.get('first_eval_loss'), '.2f')} at step {num(mlm.get('first_eval_step'))}"
             if mlm.get("first_eval_step") not in (None, mlm.get("steps")) else "")
    mlm_res = (f"held-out loss: untrained {num(mlm.get('untrained_eval_loss'), '.2f')}{first}, "
               f"{num(mlm.get('eval_loss'), '.2f')} at step {num(mlm.get('steps'))} "
               f"(perplexity {num(mlm.get('eval_perplexity'))}); {num(mlm.get('tokens_per_s'))} tokens/s "
               f"({mlm.get('precision', 'n/a')} on {mlm.get('device', 'n/a')})")
    train = sent.get("train") or {}
    cut = (sent.get("truncated_fraction") or {}).get("train")
    sent_step = (f"03 sentiment, {num(sent.get('n_train'))} training reviews, truncated at "
                 f"{num(sent.get('max_length'))} tokens ({_pct(cut, 0)} cut), {num(train.get('steps'))} steps")
    sent_res = (f"fine-tuned BERT: test accuracy {num(sent.get('test_accuracy'), '.3f')}, macro-F1 "
                f"{num(sent.get('test_macro_f1'), '.3f')}; TF-IDF char 1-3-gram + logistic regression on the same "
                f"split: accuracy {num(sent.get('baseline_accuracy'), '.3f')}, macro-F1 "
                f"{num(sent.get('baseline_macro_f1'), '.3f')}")
    rows = [("01 tokenizer", tok), (mlm_step, mlm_res), (sent_step, sent_res)]
    secs = timings.get("seconds") or {}
    if secs:
        parts = [f"{k} {secs[k]:.0f} s" for k in NOTEBOOK_ORDER if secs.get(k) is not None]
        rows.append(("time", ", ".join(parts) + f": {sum(v for v in secs.values() if v) / 60:.1f} minutes for all"))
    try:   # a recorded copy in the repository is named by its path there
        where = f"{Path(runs).resolve().relative_to(ROOT)}/{scale}/"
    except ValueError:
        where = f"runs/{scale}/"
    lines = [f"On {machine}, `NBKIT_SCALE={scale}`, run of {when} (generated by `scripts/expect_table.py` "
             f"from `{where}`):", "", "| step | result |", "|---|---|"]
    lines += [f"| {a} | {b} |" for a, b in rows]
    lines += ["", f"Data cleaning dropped {num(sent.get('n_duplicates_dropped'))} duplicate reviews and "
                  f"{num(sent.get('n_conflicts_dropped'))} texts labelled both ways."]
    return "\n".join(lines)


def render_pretrain_value(path: Path = PV_RECORDED, machine: str = "the 2-core CPU machine (no GPU)") -> str:
    """docs/finetuning.md's "does pretraining pay off" table from ``bench/pretrain_value.py``'s recorded ``stats.json``.

    The machine is the one the stats file records (``report --machine``), else ``machine``.

    Raises:
        Missing: the file is absent.
    """
    from bench.pretrain_value_report import markdown_table

    stats = _load(path)
    lengths = ", ".join(str(n) for n in sorted({e["max_length"] for e in stats["table"]}))
    return (f"`bench/pretrain_value.py` on {stats.get('machine') or machine}, run of {stats.get('written_at', 'n/a')[:10]} "
            f"(`{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}`; {stats.get('n_test', 'n/a')} test "
            f"reviews, seeds per row in parentheses, mean pooling, max_length {lengths}; pretraining minutes are wall "
            "time on a machine shared with other jobs):\n\n" + markdown_table(stats))


def headline(runs: Path, scale: str = "cpu", machine: str | None = None) -> str:
    """The front page's line: how long the notebooks took at ``scale`` and where (raises as :func:`render`)."""
    base = runs / scale
    timings = _load(base / "executed" / "timings.json", required=False)
    mlm = _load(base / "mlm" / "metrics.json")
    secs = {k: v for k, v in (timings.get("seconds") or {}).items() if v is not None}
    machine = machine or timings.get("machine") or f"device {mlm.get('device', 'n/a')}"
    when = (mlm.get("written_at") or "")[:10] or "n/a"
    took = (f"notebooks {min(secs)}-{max(secs)} ran in **{sum(secs.values()) / 60:.1f} minutes**" if secs
            else "the notebooks ran (times not recorded)")
    return f"`NBKIT_SCALE={scale}` on {machine}: {took}, run of {when}."


def pretrain_value_headlines() -> str:
    """The front page's lines: what nbkit's own MLM pretraining bought the sentiment classifier, on the recorded
    CPU and GPU runs (raises as :func:`render_pretrain_value`)."""
    from nbkit.evaluate.pretrain_value import headline as pv_headline

    return "\n\n".join(f"Pretraining first, on {pv_headline(_load(p), machine=m)}" for p, m in PV_MACHINES)


def blocks(runs: Path, scale: str = "cpu", machine: str | None = None, root: Path = ROOT) -> list[tuple]:
    """Every block this script writes, as (block, files, start, end) under the checkout ``root``.

    Raises:
        Missing: a recorded file is absent.
    """
    from nbkit.evaluate.pretrain_value import headline as pv_headline

    readmes = [root / "README.md", root / "README.zh-CN.md"]
    running, finetuning = [root / "docs" / "running.md"], [root / "docs" / "finetuning.md"]
    try:
        session = gpu_table.latest_session()
    except FileNotFoundError as exc:
        raise Missing(str(exc)) from exc
    pv = [pv_headline(_load(p), machine=m) + "\n\n" + render_pretrain_value(p) for p, m in PV_MACHINES]
    return [(render(runs, scale, machine), running, START, END),
            (headline(runs, scale, machine), readmes, HEAD_START, HEAD_END),
            (gpu_table.render(session), running, gpu_table.START, gpu_table.END),
            (gpu_table.headline(session), readmes, gpu_table.HEAD_START, gpu_table.HEAD_END),
            (pv[0], finetuning, PV_START, PV_END),
            (pv[1], finetuning, PVG_START, PVG_END),
            (pretrain_value_headlines(), readmes, PVH_START, PVH_END)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs_dir", type=Path, help="the runs directory of a recorded run (NBKIT_RUNS_DIR)")
    p.add_argument("--scale", default="cpu")
    p.add_argument("--machine", default=None, help='e.g. "the 2-core CI machine (no GPU)"')
    p.add_argument("--root", type=Path, default=ROOT, help="the checkout whose README and docs/ to rewrite")
    p.add_argument("--print", action="store_true", help="print the blocks instead of rewriting the files")
    a = p.parse_args(argv)
    try:
        return print_or_rewrite(["--print"] if a.print else [], blocks(a.runs_dir, a.scale, a.machine, a.root))
    except (Missing, ValueError) as exc:
        print(f"expect_table.py: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
