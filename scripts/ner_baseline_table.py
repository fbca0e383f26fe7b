#!/usr/bin/env python3
"""The CRF baseline's People's Daily NER scores, from the newest ``bench/results/ner_baseline_*.json``.

``bench/ner_baseline.py`` records the run; the block goes between the ``ner-baseline`` markers of
:data:`FILES` (a test checks it is current).

    .venv/bin/python scripts/ner_baseline_table.py           # rewrite the files
    .venv/bin/python scripts/ner_baseline_table.py --print   # only print the block
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from blocks import markers, newest, print_or_rewrite, rel  # noqa: E402

START, END = markers("ner-baseline", "ner_baseline_table.py")
FILES = [ROOT / "docs" / "ner.md"]


def render(path: Path | None = None) -> str:
    """One paragraph (run, machine, fit time) and a table: micro and per-type P/R/F1 per split."""
    path = Path(path or newest("ner_baseline_*.json", missing="run bench/ner_baseline.py"))
    d = json.loads(path.read_text(encoding="utf-8"))
    s = d["settings"]
    lines = [f"`bench/ner_baseline.py`, {d['date']}, {d['machine']} (`{rel(path)}`): sklearn-crfsuite "
             f"{d['versions']['sklearn-crfsuite']}, c1 = {s['c1']}, c2 = {s['c2']}, {d['iterations_run']} L-BFGS "
             f"iterations (at most {s['max_iter']}), split seed {s['seed']}; fit on the "
             f"{d['data']['n_train']:,} training sentences ({d['data']['characters']['train']:,} characters) in "
             f"{d['fit_s'] / 60:.1f} min; tagging {d['test']['chars_per_s']:,.0f} characters/s. Entity-level "
             f"scores (seqeval, default mode), F1 with its 95 % bootstrap interval over {d['test']['n_boot']} "
             "resamples of the sentences:", "",
             "| split | entities | precision | recall | F1 [95 % interval] | PER F1 | LOC F1 | ORG F1 |",
             "|---|---|---|---|---|---|---|---|"]
    for split in ("validation", "test"):
        r = d[split]
        per = r["per_type"]
        lines.append(f"| {split} | {r['n_gold']:,} | {r['precision']:.3f} | {r['recall']:.3f} | "
                     f"{r['f1']:.3f} [{r['f1_low']:.3f}, {r['f1_high']:.3f}] | "
                     + " | ".join(f"{per[t]['f1']:.3f}" if t in per else "n/a" for t in ("PER", "LOC", "ORG")) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return print_or_rewrite(argv, [(render(), FILES, START, END)])


if __name__ == "__main__":
    sys.exit(main())
