"""What `nbkit run-notebooks` prints: progress while a notebook runs, its headline, the final table.

Two tests run a real kernel on a tiny notebook (one as a log file sees it, one as a
terminal does); the rest drive nbkit.cli.run_notebooks' progress and summary directly.
"""
from __future__ import annotations

import io
import json
import math
import os
import re
import sys
import time

import nbformat
import pytest
from waiting import wait_until

from nbkit.cli import run_notebooks
from nbkit.cli.run_notebooks import NotebookProgress, Row, code_cells, headline, table
from nbkit.units import fmt_duration


def _write(path, cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# title")] + [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


# A stand-in for notebook 01: it writes the tokenizer's stats.json, with a long cell in between.
TOKENIZER_NB = [
    "import json, os, pathlib\n"
    "d = pathlib.Path(os.environ['NBKIT_RUNS_DIR'], os.environ['NBKIT_SCALE'], 'tokenizer')\n"
    "d.mkdir(parents=True, exist_ok=True)",
    "import time\ntime.sleep(2.5)  # a long cell",
    "(d / 'stats.json').write_text(json.dumps({'unk_rate': 0.0125, 'vocab_size': 5000}))",
]


@pytest.fixture
def tiny(tmp_path, monkeypatch, runs_tmp):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    _write(nbdir / "01_tok.ipynb", TOKENIZER_NB)
    monkeypatch.setenv("NBKIT_NOTEBOOKS_DIR", str(nbdir))
    return nbdir


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.slow
def test_log_output_has_a_line_per_cell_heartbeats_the_headline_and_the_table(tiny, capsys):
    assert run_notebooks.run_all(scale="smoke", timeout=60, heartbeat_s=0.3) == 0   # ~8 beats in the 2.5 s cell
    out = capsys.readouterr().out
    assert "\r" not in out, "no carriage returns in a log"
    lines = out.splitlines()
    assert "[01_tok] start: 3 code cells" in lines
    assert any(ln.startswith("[01_tok] 0/3 done, ") and ln.endswith("running cell 2: import json, os, pathlib")
               for ln in lines), out
    assert any(ln.startswith("[01_tok] 1/3 done, ") and ln.endswith("running cell 3: import time") for ln in lines)
    beats = [ln for ln in lines if "still running cell 3: import time (" in ln]
    assert len(beats) >= 2, f"a heartbeat every 0.3 s during the 2.5 s cell (2 asked: a busy machine delays them):\n{out}"
    done = [ln for ln in lines if ln.startswith("[01_tok] done in ")]
    assert len(done) == 1 and done[0].endswith(": [UNK] rate 1.250% on held-out text (vocabulary 5,000)"), out
    row = next(ln for ln in lines if ln.startswith("01_tok "))
    assert row.split()[1] == "ok" and row.endswith("[UNK] rate 1.250% on held-out text (vocabulary 5,000)")
    assert lines[-2].startswith("total ") and lines[-1].startswith("executed copies: ")


@pytest.mark.slow
def test_terminal_output_renders_a_bar_that_redraws_in_place(tiny, monkeypatch):
    term = FakeTerminal()
    monkeypatch.setattr(sys, "stdout", term)
    assert run_notebooks.run_all(scale="smoke", timeout=60) == 0
    out = term.getvalue()
    assert "\r01_tok 1/3 cells |" in out and ", cell 3: import time" in out
    assert "[01_tok] done in " in out and "still running" not in out  # the bar's clock replaces heartbeats
    assert out.rstrip().splitlines()[-1].startswith("executed copies: ")


@pytest.mark.slow
def test_a_failing_notebook_gets_its_row_and_the_cell_it_stopped_in(tmp_path, monkeypatch, runs_tmp, capsys):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    _write(nbdir / "00_ok.ipynb", ["1"])
    _write(nbdir / "01_bad.ipynb", ["x = 1", "raise KeyError('col')"])
    _write(nbdir / "02_never.ipynb", ["1"])
    monkeypatch.setenv("NBKIT_NOTEBOOKS_DIR", str(nbdir))
    assert run_notebooks.run_all(scale="smoke", timeout=60) == 1
    out = capsys.readouterr().out.splitlines()
    assert any(ln.startswith("[01_bad] FAILED after ") and ln.endswith("""in cell 3 ("raise KeyError('col')")""")
               for ln in out), out
    status = {ln.split()[0]: ln.split()[1] for ln in out if ln.startswith(("00_ok ", "01_bad ", "02_never "))}
    assert status == {"00_ok": "ok", "01_bad": "FAILED", "02_never": "not"}  # "not run"


# --- the progress object without a kernel


class Cell(dict):
    def __init__(self, source):
        super().__init__(source=source, cell_type="code", metadata={})
        self.source, self.cell_type = source, "code"


def test_plain_heartbeat_during_a_long_cell():
    out = io.StringIO()
    beats = lambda: sum("still running cell 5: train(model)  # long (" in ln for ln in out.getvalue().splitlines())  # noqa: E731
    with NotebookProgress("02_x", 2, stream=out, heartbeat_s=0.2) as p:
        p.cell_started(Cell("\n\ntrain(model)  # long"), 4)
        wait_until(lambda: beats() >= 2, what="two heartbeats")     # every 0.2 s; later on a busy machine
        p.cell_finished(Cell(""), 4)
    lines = out.getvalue().splitlines()
    assert lines[0] == "[02_x] start: 2 code cells"
    assert re.match(r"\[02_x\] 0/2 done, \d+ s  running cell 5: train\(model\)  # long", lines[1]), lines[1]
    assert p.finish(ok=True, headline="ppl 9") >= 0.4                # at least two heartbeat periods
    assert re.match(r"\[02_x\] done in \d+ s: ppl 9", out.getvalue().splitlines()[-1])


def test_code_cells_counts_what_nbclient_executes():
    nb = nbformat.v4.new_notebook()
    skipped = nbformat.v4.new_code_cell("1")
    skipped.metadata["tags"] = ["skip-execution"]
    nb.cells = [nbformat.v4.new_code_cell("1"), nbformat.v4.new_code_cell("  \n"), skipped,
                nbformat.v4.new_markdown_cell("x")]
    assert code_cells(nb) == 1


def test_fmt_duration():
    assert [fmt_duration(s) for s in (0.4, 42, 185, 3725)] == ["0 s", "42 s", "3 min 05 s", "1 h 02 min"]


# --- headline metrics from the notebooks' own files


def _put(scale_dir, rel, payload):
    path = scale_dir / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))


def test_headlines_of_each_notebook(tmp_path):
    _put(tmp_path, "tokenizer/stats.json", {"unk_rate": 0.00031, "vocab_size": 5786})
    _put(tmp_path, "mlm/metrics.json", {"eval_perplexity": 123.456, "steps": 1200})
    _put(tmp_path, "sentiment/metrics.json", {"test_accuracy": 0.8712, "baseline_accuracy": 0.857})
    _put(tmp_path, "profiling/results.json", {"device": "cuda", "step": {"mfu": 0.412, "tokens_per_s": 98765.4}})
    assert headline("00_environment_check.ipynb", tmp_path) is None
    assert headline("01_tokenizing.ipynb", tmp_path) == "[UNK] rate 0.031% on held-out text (vocabulary 5,786)"
    assert headline("02_bert_mlm_pretraining.ipynb", tmp_path) == "held-out perplexity 123.5 after 1,200 steps"
    assert headline("03_sentiment_finetuning.ipynb", tmp_path) == \
        "test accuracy 0.871 vs TF-IDF baseline 0.857 (+1.4 points)"
    assert headline("04_gpu_profiling.ipynb", tmp_path) == "MFU 41.2%, 98,765 tokens/s"
    _put(tmp_path, "causal/baselines.json", {"rows": [{"model": "GPT (gpt2-narrow)", "eval_perplexity": 90.25},
                                                      {"model": "2-gram KN", "eval_perplexity": 120.0}]})
    assert headline("06_chinese_gpt.ipynb", tmp_path) == "held-out perplexity 90.2 vs 2-gram KN 120.0"
    _put(tmp_path, "sft/scores.json", {"eval_loss_before": 7.88, "eval_loss_after": 3.1, "rows": [
        {"model": "after SFT", "task": "sentiment", "value": 0.55}, {"model": "TF-IDF / CRF", "task": "sentiment",
                                                                     "value": 0.8}]})
    assert headline("08_instruction_tuning.ipynb", tmp_path) == \
        "answer loss 7.880 -> 3.100; sentiment accuracy 0.550 vs TF-IDF / CRF 0.800"


def test_headlines_say_what_is_missing_instead_of_raising(tmp_path):
    assert headline("02_bert_mlm_pretraining.ipynb", tmp_path) == "no mlm/metrics.json written"
    _put(tmp_path, "mlm/metrics.json", {"eval_perplexity": None})
    assert headline("02_b.ipynb", tmp_path) == "held-out perplexity not recorded"
    # notebook 04 writes with default=str: an unknown MFU can arrive as null, "None" or NaN
    for mfu in (None, "None", math.nan):
        (tmp_path / "profiling").mkdir(exist_ok=True)
        (tmp_path / "profiling/results.json").write_text(json.dumps({"device": "cpu", "step": {"mfu": mfu}}))
        assert headline("04_p.ipynb", tmp_path) == "MFU n/a (no known peak FLOP/s for cpu)"
    (tmp_path / "sentiment").mkdir()
    (tmp_path / "sentiment/metrics.json").write_text("{not json")
    assert headline("03_s.ipynb", tmp_path) == "sentiment/metrics.json unreadable (JSONDecodeError)"


def test_a_file_from_an_earlier_run_is_reported_stale_not_shown(tmp_path):
    _put(tmp_path, "tokenizer/stats.json", {"unk_rate": 0.5})
    old = time.time() - 3600
    os.utime(tmp_path / "tokenizer/stats.json", (old, old))
    assert headline("01_t.ipynb", tmp_path, since=time.time()) == "tokenizer/stats.json not rewritten by this run (stale)"


def test_table_aligns_and_totals():
    text = table([Row("01_tokenizing", "ok", 42.0, "[UNK] rate 0.031%"), Row("02_bert", "FAILED", 185.0),
                  Row("03_sentiment", "not run")])
    lines = text.splitlines()
    assert lines[0].split() == ["notebook", "status", "wall", "time", "headline"]
    assert lines[2] == "01_tokenizing  ok             42 s  [UNK] rate 0.031%"
    assert lines[3] == "02_bert        FAILED   3 min 05 s"
    assert lines[4] == "03_sentiment   not run           -"
    assert lines[-1] == "total                   3 min 47 s"
    assert set(lines[1]) == {"-"} and len(lines[1]) == max(len(ln) for ln in lines)
