"""Docs drift: the "What to expect (measured)" blocks (docs/running.md, docs/finetuning.md, docs/corpus.md,
docs/pretraining.md) and their headline lines on both front pages are generated from recorded runs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _load import load_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "expect_table.py"
expect_table = load_script(SCRIPT, "expect_table")  # puts scripts/ and scripts/lib/ on sys.path
import blocks  # noqa: E402
import continued_table  # noqa: E402
import corpus_table  # noqa: E402
import gpu_table  # noqa: E402

READMES = [ROOT / "README.md", ROOT / "README.zh-CN.md"]
MACHINE = "the project's 2-core development machine"   # named with --machine when the notebooks' block was written


def _inside(path: Path, start: str, end: str) -> str:
    return blocks.inside(path.read_text(encoding="utf-8"), start, end)


def test_newest_is_by_the_date_that_ends_the_name(tmp_path):
    results = tmp_path / "bench" / "results"
    for name in ("ner_cpu_2026-12-05.json", "ner_cpu_2026-11-30.json", "gpu_h200_2026-11-30/session.json",
                 "gpu_a100_2026-12-01/session.json"):
        (results / name).parent.mkdir(parents=True, exist_ok=True)
        (results / name).write_text("{}")
    assert blocks.newest("ner_cpu_*.json", tmp_path).name == "ner_cpu_2026-12-05.json"
    assert blocks.newest("gpu_*/session.json", tmp_path).parent.name == "gpu_a100_2026-12-01"   # not by name
    assert blocks.newest("sentiment_*.json", tmp_path) is None
    with pytest.raises(FileNotFoundError, match=r"no bench/results/sentiment_\*\.json: run it"):
        blocks.newest("sentiment_*.json", tmp_path, missing="run it")


def test_gpu_block_comes_from_the_recorded_session(tmp_path):
    session = gpu_table.latest_session()
    block = gpu_table.render(session)
    d = json.loads(session.read_text(encoding="utf-8"))
    eager = d["gpu_check"]["bert_eager"]
    assert f"{eager['tokens_per_s']:,.0f} tokens/s, MFU {100 * eager['mfu']:.1f} %" in block
    assert f"{d['pytest_gpu']['passed']} passed" in block and d["machine"] in block
    d["gpu_check"]["bert_eager"]["tokens_per_s"] = 123.0  # the block follows the file, nothing typed by hand
    other = tmp_path / "session.json"
    other.write_text(json.dumps(d), encoding="utf-8")
    assert "123 tokens/s" in gpu_table.render(other)
    assert "SDPA + fused AdamW, timed on profiling's own side step, not the loop's, eager" in block  # old record
    d["gpu_check"]["bert_eager"]["mlm_head"] = "masked"                  # gpu_check.py now times Loop.train_step
    other.write_text(json.dumps(d), encoding="utf-8")
    assert "`Loop.train_step` (MLM head: masked), eager" in gpu_table.render(other)
    assert "BERT-base MLM at **123 tokens/s" in gpu_table.headline(other)


def test_gpu_blocks_in_the_docs_and_on_the_front_pages_are_current():
    session = gpu_table.latest_session()
    assert _inside(ROOT / "docs" / "running.md", gpu_table.START, gpu_table.END) == gpu_table.render(session)
    for readme in READMES:
        assert _inside(readme, gpu_table.HEAD_START, gpu_table.HEAD_END) == gpu_table.headline(session), readme.name


def _write(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload), encoding="utf-8")


@pytest.fixture
def recorded_run(tmp_path):
    """A small fixture run: the files notebooks 01-03 and `nbkit run-notebooks` write (made-up values)."""
    base = tmp_path / "runs" / "cpu"
    _write(base / "tokenizer" / "stats.json", {"vocab_size": 5123, "unk_rate": 0.00031, "chars_per_token": 1.013,
                                               "review_unk_rate": 0.0044})
    _write(base / "tokenizer" / "training.json", {"vocab_size_requested": 8000})
    _write(base / "mlm" / "metrics.json", {
        "model": "mini", "parameters": 4_812_345, "steps": 300, "batch_size": 32, "block_size": 64, "lr": 3e-4,
        "untrained_eval_loss": 8.693, "first_eval_loss": 6.661, "first_eval_step": 100, "eval_loss": 6.512,
        "eval_perplexity": 673.4, "tokens_per_s": 3771.2, "precision": "fp32", "device": "cpu",
        "written_at": "2026-11-30T12:00:00"})
    _write(base / "sentiment" / "metrics.json", {
        "n_train": 13889, "max_length": 64, "truncated_fraction": {"train": 0.371}, "train": {"steps": 435},
        "test_accuracy": 0.7634, "test_macro_f1": 0.7591, "baseline_accuracy": 0.8451, "baseline_macro_f1": 0.8442,
        "n_duplicates_dropped": 17715, "n_conflicts_dropped": 47})
    _write(base / "executed" / "timings.json", {"seconds": {"00": 7.2, "01": 27.0, "02": 228.4, "03": 227.0,
                                                            "04": 149.1}, "machine": "Linux x86_64, 2 CPUs, no GPU"})
    return tmp_path / "runs"


def test_renders_every_number_from_the_json(recorded_run):
    block = expect_table.render(recorded_run, "cpu")
    assert block.startswith("On Linux x86_64, 2 CPUs, no GPU, `NBKIT_SCALE=cpu`, run of 2026-11-30")
    assert "| step | result |" in block
    for text in ("vocabulary 5,123 (asked 8,000)", "0.031 % on held-out news", "0.44 % on the test reviews",
                 "1.01 characters per token", "BERT-mini (4.8 M parameters), 300 steps × 32 blocks of 64 tokens, lr 0.0003",
                 "untrained 8.69, 6.66 at step 100, 6.51 at step 300 (perplexity 673)", "3,771 tokens/s",
                 "13,889 training reviews, truncated at 64 tokens (37 % cut), 435 steps",
                 "test accuracy 0.763, macro-F1 0.759", "accuracy 0.845, macro-F1 0.844",
                 "00 7 s, 01 27 s, 02 228 s, 03 227 s, 04 149 s: 10.6 minutes for all",
                 "dropped 17,715 duplicate reviews and 47 texts"):
        assert text in block, text
    assert "n/a" not in block
    assert "on a named box" in expect_table.render(recorded_run, "cpu", machine="on a named box")
    assert expect_table.headline(recorded_run, "cpu") == ("`NBKIT_SCALE=cpu` on Linux x86_64, 2 CPUs, no GPU: notebooks "
                                                          "00-04 ran in **10.6 minutes**, run of 2026-11-30.")


def test_missing_values_show_as_na_and_missing_files_are_named(recorded_run, tmp_path):
    (recorded_run / "cpu" / "executed" / "timings.json").unlink()
    _write(recorded_run / "cpu" / "mlm" / "metrics.json", {"eval_loss": None, "device": "cpu", "steps": 10})
    block = expect_table.render(recorded_run, "cpu")
    assert "On device cpu" in block and "n/a at step 10" in block and "| time |" not in block
    run = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "nothing"), "--print"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "tokenizer/stats.json not found" in run.stderr


def test_rewrites_only_the_blocks_between_the_markers(recorded_run, tmp_path):
    root = tmp_path / "checkout"
    pairs = {"README.md": [(expect_table.HEAD_START, expect_table.HEAD_END), (gpu_table.HEAD_START, gpu_table.HEAD_END),
                           (expect_table.PVH_START, expect_table.PVH_END)],
             "docs/running.md": [(expect_table.START, expect_table.END), (gpu_table.START, gpu_table.END)],
             "docs/finetuning.md": [(expect_table.PV_START, expect_table.PV_END),
                                    (expect_table.PVG_START, expect_table.PVG_END)]}
    pairs["README.zh-CN.md"] = pairs["README.md"]
    for name, marks in pairs.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("# x\nbefore\n" + "".join(f"{a}\nold\n{b}\nbetween\n" for a, b in marks),
                                 encoding="utf-8")
    run = subprocess.run([sys.executable, str(SCRIPT), str(recorded_run), "--root", str(root)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    texts = {name: (root / name).read_text(encoding="utf-8") for name in pairs}
    for name, text in texts.items():
        assert text.startswith("# x\nbefore\n") and text.endswith("between\n") and "\nold\n" not in text, name
    assert "test accuracy 0.763" in texts["docs/running.md"] and "`pytest -m gpu` |" in texts["docs/running.md"]
    assert "Δ test vs random init [95 % CI]" in texts["docs/finetuning.md"] and "max_length 128" in texts["docs/finetuning.md"]
    assert "ran in **10.6 minutes**" in texts["README.md"] and "tokens/s, MFU" in texts["README.zh-CN.md"]
    assert "Pretraining first, on" in texts["README.md"]
    (root / "README.zh-CN.md").write_text("no markers", encoding="utf-8")
    run = subprocess.run([sys.executable, str(SCRIPT), str(recorded_run), "--root", str(root)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "exactly one" in run.stderr
    with pytest.raises(ValueError, match="exactly one"):
        blocks.replace_block("no markers", "B", expect_table.START, expect_table.END)


def test_the_notebooks_table_sits_under_its_heading():
    text = (ROOT / "docs" / "running.md").read_text(encoding="utf-8")
    assert text.count(expect_table.START) == 1 and text.count(expect_table.END) == 1
    assert text.index("## What to expect (measured)") < text.index(expect_table.START) < text.index(expect_table.END)


def test_the_notebooks_table_and_headline_are_the_rendering_of_the_recorded_run():
    """Every row of docs/running.md's block comes from the run kept in bench/results/ (the intro names the machine),
    and so does the headline line on both front pages."""
    [recorded] = sorted((ROOT / "bench" / "results").glob("notebooks_cpu_*"))[-1:]
    inside = _inside(ROOT / "docs" / "running.md", expect_table.START, expect_table.END)
    intro, rows = inside.split("\n", 1)
    rendered_intro, rendered_rows = expect_table.render(recorded, "cpu").split("\n", 1)
    assert rows == rendered_rows, "docs/running.md's table is stale: run scripts/expect_table.py on the recorded run"
    assert intro.endswith(rendered_intro.split("`NBKIT_SCALE=cpu`", 1)[1]) and recorded.name in intro
    machine = intro.removeprefix("On ").split(", `NBKIT_SCALE=cpu`", 1)[0]
    assert machine.startswith(MACHINE)
    for readme in READMES:
        assert _inside(readme, expect_table.HEAD_START, expect_table.HEAD_END) == \
            expect_table.headline(recorded, "cpu", machine), f"{readme.name}: run scripts/expect_table.py"


def test_the_pretraining_value_blocks_are_the_rendering_of_the_recorded_runs():
    finetuning = ROOT / "docs" / "finetuning.md"
    for path, start, end in ((expect_table.PV_RECORDED, expect_table.PV_START, expect_table.PV_END),
                             (expect_table.PV_GPU_RECORDED, expect_table.PVG_START, expect_table.PVG_END)):
        block = _inside(finetuning, start, end)
        assert block.endswith(expect_table.render_pretrain_value(path)), f"{start}: run scripts/expect_table.py"
    headlines = expect_table.pretrain_value_headlines()
    for readme in READMES:
        assert _inside(readme, expect_table.PVH_START, expect_table.PVH_END) == headlines, readme.name


def test_corpus_block_is_the_rendering_of_the_recorded_benchmark(tmp_path):
    run = corpus_table.newest("corpus_scale_*.json")
    block = corpus_table.render(run)
    for path in corpus_table.FILES:
        assert _inside(path, corpus_table.START, corpus_table.END) == block, \
            f"{path.name}'s corpus table is stale: run .venv/bin/python scripts/corpus_table.py"
    for readme in READMES:
        assert _inside(readme, corpus_table.HEAD_START, corpus_table.HEAD_END) == corpus_table.headline(run), readme.name
    d = json.loads(run.read_text(encoding="utf-8"))
    d["runs"]["nbkit_20mb"]["peak_rss_mib"] = 4321                # the block follows the file
    d["runs"]["nbkit_2000mb"]["seconds"] = 600.0
    other = tmp_path / "corpus_scale_x.json"
    other.write_text(json.dumps(d), encoding="utf-8")
    assert "| 4,321 MiB |" in corpus_table.render(other)
    assert "in **10.0 min**" in corpus_table.headline(other)
    d["runs"].pop("hf_200mb")
    other.write_text(json.dumps(d), encoding="utf-8")
    assert "HF's recipe was not recorded at 200 MB" in corpus_table.render(other)


def test_corpus_table_says_which_nbkit_rows_predate_the_store_following_its_tokenizer(tmp_path):
    d = json.loads(corpus_table.newest("corpus_scale_*.json").read_text(encoding="utf-8"))
    assert "20 MB, 200 MB, 2000 MB were measured the store NFKC-normalised" in corpus_table.render(corpus_table.newest("corpus_scale_*.json"))
    for key in d["runs"]:
        if key.startswith("nbkit_") and key != "nbkit_20mb":
            d["runs"][key]["store_text"] = "the tokenizer's own normalisation"
    (tmp_path / "r.json").write_text(json.dumps(d), encoding="utf-8")
    assert "rows at 20 MB were measured" in corpus_table.render(tmp_path / "r.json")
    d["runs"]["nbkit_20mb"]["store_text"] = "the tokenizer's own normalisation"
    (tmp_path / "r.json").write_text(json.dumps(d), encoding="utf-8")
    assert "NFKC-normalised" not in corpus_table.render(tmp_path / "r.json")


def test_continued_block_is_the_rendering_of_the_recorded_benchmarks(tmp_path):
    block = continued_table.render()
    for path in continued_table.FILES:
        assert _inside(path, continued_table.START, continued_table.END) == block, \
            f"{path.name}'s block is stale: run .venv/bin/python scripts/continued_table.py"
    for readme in READMES:
        assert _inside(readme, continued_table.HEAD_START, continued_table.HEAD_END) == continued_table.headline(), \
            readme.name
    d = json.loads(continued_table.newest("continued_pretraining_*.json").read_text(encoding="utf-8"))
    d["median"]["trainer"]["tokens_per_s"] = 1234.5                 # the block follows the file
    d["ratio_nbkit_over_trainer"]["tokens_per_s_per_round"] = [0.5, 2.0]
    other = tmp_path / "continued_pretraining_cpu_2099-01-01.json"
    other.write_text(json.dumps(d), encoding="utf-8")
    text = continued_table.render(other)
    assert "| 1,234.5 |" in text and "per round x0.50, x2.00" in text
    d["ratio_nbkit_over_trainer"]["tokens_per_s"] = 2.5
    other.write_text(json.dumps(d), encoding="utf-8")
    assert "at x2.50 the tokens/s" in continued_table.headline(other)


def test_corpus_block_carries_the_rows_by_tokenizer_and_word_starts(tmp_path):
    run = corpus_table.newest("prepare_tokenizers_*.json")
    assert run is not None, "no bench/results/prepare_tokenizers_*.json: run bench/prepare_tokenizers.py"
    block = corpus_table.render(corpus_table.newest("corpus_scale_*.json"))
    d = json.loads(run.read_text(encoding="utf-8"))
    for key, arm in d["arms"].items():
        if key.endswith("_this"):
            assert f"| {arm['mb_per_s']:.2f} | {arm['tokens_per_s']:,.0f} |" in block
    assert "bert-base-chinese layout (21,128 tokens)" in block and "interleaved rounds" in block
    assert ("MB/s before" in block) == any(k.endswith("_baseline") for k in d["arms"])   # only a baseline run
    d["arms"]["bert_nowords_this"]["mb_per_s"] = 98.76                 # the rows follow the file
    d["arms"].pop("own_nowords_baseline", None)
    d["baseline"] = "main"
    d["arms"]["own_words_baseline"] = dict(d["arms"]["own_words_this"], code="baseline", mb_per_s=1.11)
    other = tmp_path / "prepare_tokenizers_x.json"
    other.write_text(json.dumps(d), encoding="utf-8")
    rendered = corpus_table.render(corpus_table.newest("corpus_scale_*.json"), tokenizers=other)
    assert "| 98.76 |" in rendered and "| 1.11 |" in rendered and "n/a |" in rendered   # none without words
    assert "By tokenizer" not in corpus_table.render(corpus_table.newest("corpus_scale_*.json"), tokenizers=None)


def test_corpus_block_renders_the_wiki_tree_row_and_where_the_time_goes(tmp_path):
    d = json.loads(corpus_table.newest("prepare_tokenizers_*.json").read_text(encoding="utf-8"))
    arm = dict(d["arms"]["bert_words_this"], mb_per_s=1.234, layout="wiki",
               cpu={"main_s": 10.0, "workers_s": 30.0, "workers_busy_share": 0.75},
               breakdown={"mb": 10.0, "mb_per_s_one_core": 3.21,
                          "share": {"segmenter": 0.5, "tokenizer": 0.3, "doc_key": 0.2, "read": 0.0}})
    d["arms"]["bert_words_wiki_this"] = arm
    other = tmp_path / "prepare_tokenizers_x.json"
    other.write_text(json.dumps(d), encoding="utf-8")
    block = corpus_table.render_tokenizers(other)
    assert "| wiki_zh tree (JSON lines in folders) | 1.23 |" in block
    assert ("the same on the wiki_zh tree: rjieba 50 %, token ids 30 %, dedup key (NFKC + hash) 20 % (3.21 MB/s on "
            "one core; the workers were busy 75 % of the preparation)") in block
    assert "reading 0 %" not in block                     # stages under 3 % are left out
