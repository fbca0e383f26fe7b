"""C07: each notebook's ``parameters`` cell holds plain literals, so papermill overrides take effect.

Papermill injects overrides as a cell right after the one tagged ``parameters``; a value computed inside that
cell would never see them. The next cell builds the recipe's config from them by the same names
(``Config.for_scale(scale, seed=seed, ...)``) and prints its table.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _code_cells(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def _parameters(source: str) -> dict:
    """name -> literal value of each assignment; fails on anything that is not `name = literal`."""
    out = {}
    for node in ast.parse(source).body:
        assert isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name), (
            f"parameters cell: only `name = literal` lines, got {ast.unparse(node)!r}")
        out[node.targets[0].id] = ast.literal_eval(node.value)  # ValueError: not a plain literal
    return out


#: parameters that steer a notebook's own cells, not a recipe (notebook 00's live monitor)
NOT_CONFIG = {"monitor_interval", "watch_seconds",
              "prompt", "max_new_tokens", "temperature", "top_k", "top_p",      # notebook 06's generation step
              "repetition_penalty", "no_repeat_ngram_size"}

#: notebook -> the recipe config its parameters cell feeds (``module:Class``). A new notebook adds its line here,
#: and then every field of its config is one of its parameters or in NOT_PARAMETERS with the reason.
CONFIGS = {
    "00_environment_check": "nbkit.recipes.profiling:ProfileConfig",
    "01_tokenizing": "nbkit.recipes.tokenizer:TokenizerConfig",
    "02_bert_mlm_pretraining": "nbkit.recipes.pretraining:PretrainConfig",
    "03_sentiment_finetuning": "nbkit.recipes.finetuning:FinetuneConfig",
    "04_gpu_profiling": "nbkit.recipes.profiling:ProfileConfig",
    "05_your_own_data": "nbkit.recipes.own_data:OwnDataConfig",
    "06_chinese_gpt": "nbkit.recipes.pretraining:PretrainConfig",
    "07_named_entities": "nbkit.recipes.finetuning:FinetuneConfig",
}
#: config fields a notebook's parameters cell leaves out, each with its reason; ``"*"`` (as a notebook): the fields
#: of any recipe that change how a run shows or resumes, not what it trains; ``"*"`` (as a field): every field left.
LORA = dict.fromkeys(("lora", "lora_r", "lora_alpha", "lora_dropout", "lora_targets", "lora_lr", "lora_export"),
                    "LoRA instead of full fine-tuning is the job's --lora yes and run_finetuning's; the notebooks "
                    "show full fine-tuning (their cells pass loop.model, not the peft model, to evaluate and export)")
NOT_PARAMETERS = {
    "*": {"scale": "the parameter every notebook has (checked apart)",
          "progress": "the notebook shows its tqdm bar; a headless job turns it off (--no-progress)",
          "progress_every_s": "plain progress lines for a headless log (jobs); the notebook shows the bar",
          "log_every": "the log interval (about 20 lines a run); the loop's history keeps every line either way",
          "report_to": "TensorBoard events are written for every notebook run (tensorboard --logdir runs/)",
          "num_workers": "DataLoader processes: the scale's value suits the kernel; jobs set it per machine",
          "checkpoint_minutes": "crash safety for long headless jobs; in a notebook Ctrl-C saves at the step",
          "allow_unk": "a refusal names it: it only lets a run go on past a tokenizer that reads over 5 % of the "
                       "corpus as [UNK] (PretrainConfig(allow_unk=True), --allow-unk)",
          "resume": "a notebook resumes its run folder by design (rerun = continue); other settings are another "
                    "folder (run_dir), and a fresh start in the same one is the job's --no-resume"},
    "00_environment_check": {"*": "notebook 00 runs only the matmul benchmark (bench_sizes); ProfileConfig's other "
                                  "fields are notebook 04's, whose parameters cell has them"},
    "02_bert_mlm_pretraining": {"split_seed": "the notebook passes seed as split_seed too: notebook 03, with the "
                                              "same seed, tests on reviews that were never pretrained on",
                                "objective": "notebook 02 is the masked LM (its fill-mask and plateau probes are "
                                             "MLM's); causal pretraining is notebook 06's and the job's --objective "
                                             "causal"},
    "06_chinese_gpt": {"split_seed": "as notebook 02: seed is passed as split_seed too",
                       "objective": "notebook 06 is the causal LM (set in its config cell); MLM is notebook 02's",
                       **dict.fromkeys(("mlm_probability", "whole_word"),
                                       "masking is MLM's; a causal LM predicts every next token")},
    "03_sentiment_finetuning": {
        "task": "notebook 03 is the bundled review task (its cells show the review split); news: "
                "python -m nbkit.jobs.finetune --task news, your files: notebook 05",
        **dict.fromkeys(("train_file", "validation_file", "test_file", "text_column", "label_column"),
                        "task own's files: notebook 05 takes them (its parameters cell has them)"),
        **dict.fromkeys(("stride", "corpus_lines", "n_boot", "span_offsets"), "task ner's: notebook 07 takes them"),
        **LORA},
    "07_named_entities": {
        "task": "notebook 07 is task ner (People's Daily, or your tagged train_file)",
        "pooling": "no pooling per token: each token's state feeds the head",
        "class_weights": "per-token labels: the loop weights classes per text only",
        **dict.fromkeys(("text_column", "label_column"), "tagged files carry their tokens and tags"), **LORA},
}


def _config_class(spec: str):
    import importlib

    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("stem", sorted(CONFIGS))
def test_every_field_a_user_may_set_is_in_the_parameters_cell(stem):
    """Issue 39.5: `budget_minutes` was a PretrainConfig field but not in notebook 02's parameters cell, so
    `papermill -p budget_minutes 10` set a variable nothing read."""
    import dataclasses

    cls = _config_class(CONFIGS[stem])
    fields = [f.name for f in dataclasses.fields(cls)]
    params = _parameters(_code_cells(ROOT / "notebooks" / f"{stem}.ipynb")[0])
    own = NOT_PARAMETERS.get(stem, {})
    skip = {**NOT_PARAMETERS["*"], **own}
    missing = [] if "*" in own else [f for f in fields if f not in params and f not in skip]
    assert not missing, (f"{stem}'s parameters cell lacks {cls.__name__} fields {missing}: add each as `name = None  "
                         f"# meaning` and pass it as name=name to {cls.__name__}.for_scale(...), or list it in "
                         "NOT_PARAMETERS with the reason")
    stale = [f for f in own if f != "*" and (f in params or f not in fields)]
    assert not stale, f"NOT_PARAMETERS[{stem!r}] names {stale}, which are parameters or not {cls.__name__} fields"
    assert not set(params) - set(fields) - NOT_CONFIG, f"{stem}: parameters that are no {cls.__name__} field"


def test_every_notebook_names_its_config():
    assert sorted(p.stem for p in NOTEBOOKS if p.stem not in CONFIGS) == [], (
        "add each new notebook to CONFIGS (notebook -> its recipe config) in tests/test_parameters.py")


@pytest.mark.parametrize("ipynb", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_are_plain_literals_passed_by_name_to_the_recipe_config(ipynb):
    cells = _code_cells(ipynb)
    params = _parameters(cells[0])
    assert params.get("scale", "missing") is None, "the scale is a parameter, by name (None: $NBKIT_SCALE)"
    build = re.search(r"\w+Config\.for_scale\(scale(.*?)\)[ \t]*(?:#[^\n]*)?\n", cells[1], re.S)
    assert build, "the cell after the parameters builds the recipe config: Config.for_scale(scale, ...)"
    passed = dict(re.findall(r"(\w+)=(\w+)", build.group(1)))
    for name in set(params) - {"scale"} - NOT_CONFIG:
        assert passed.get(name) == name, f"parameter {name!r} is not passed as {name}={name}: one name per setting"
    later = "\n".join(cells[1:])
    for name in params:
        assert re.search(rf"\b{name}\b", later), f"parameter {name!r} is never read: an override would be ignored"
    assert "get_scale(" not in later and "knob(" not in later and "run_tag(scale" not in later


def test_seed_is_a_parameter_wherever_a_notebook_uses_a_seed():
    for ipynb in NOTEBOOKS:
        cells = _code_cells(ipynb)
        if re.search(r"\bseed\b", "\n".join(cells[1:])):
            assert "seed" in _parameters(cells[0]), f"{ipynb.name} uses a seed but has no seed parameter"
    assert "seed" in _parameters(_code_cells(ROOT / "notebooks" / "03_sentiment_finetuning.ipynb")[0])


@pytest.mark.parametrize("ipynb", NOTEBOOKS[1:], ids=lambda p: p.stem)
def test_a_run_with_overrides_writes_to_its_own_folder(ipynb):
    """`-p seed 3` on notebook 03 must not resume (or overwrite) the preset's finished run in runs/<scale>/sentiment:
    every notebook writes to its config's run folder, which the overrides name."""
    later = "\n".join(_code_cells(ipynb)[1:])
    assert re.search(r"out_dir = (cfg\.run_dir\(\)|(ft|pt)\.run_dir\(cfg\))", later)


@pytest.mark.slow
def test_papermill_overrides_take_effect(tmp_path):
    """`papermill 01_tokenizing.ipynb out.ipynb -p scale cpu -p seed 3 ...` runs, and the values are used."""
    pytest.importorskip("papermill")
    runs = tmp_path / "runs"
    out = tmp_path / "out.ipynb"
    cmd = [sys.executable, "-m", "papermill", str(ROOT / "notebooks" / "01_tokenizing.ipynb"), str(out),
           "-p", "scale", "cpu", "-p", "seed", "3", "-p", "corpus_lines", "300", "-p", "vocab_size", "700",
           "-k", "python3", "--cwd", str(ROOT / "notebooks")]
    env = {**__import__("os").environ, "NBKIT_RUNS_DIR": str(runs), "NBKIT_SCALE": "smoke"}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    tokenizer_dir = runs / "cpu" / "tokenizer-corpus_lines300-seed3-vocab_size700"   # cpu beat NBKIT_SCALE=smoke
    training = json.loads((tokenizer_dir / "training.json").read_text())
    assert training["vocab_size_requested"] == 700 and training["model_max_length"] == 128  # narrow: 128 positions
    from nbkit.data import load_sentiment

    n_reviews = len(load_sentiment(seed=3).splits["train"])
    assert training["n_texts"] == 285 + n_reviews  # 300 lines, 95 % for training, + the seed-3 training reviews
    assert not (runs / "smoke").exists() and not (runs / "cpu" / "tokenizer").exists()  # the preset's run untouched
    # seed 3 picked the held-out lines: stats.json was measured on seed 3's validation split, not seed 0's
    from transformers import AutoTokenizer

    from nbkit.data.corpora import load_peoples_daily, split_corpus
    from nbkit.text.tokenizer import tokenizer_stats

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    corpus = load_peoples_daily(max_lines=300)
    held_out = {seed: split_corpus(corpus, eval_fraction=0.05, seed=seed)["validation"]["text"] for seed in (0, 3)}
    assert held_out[0] != held_out[3]
    saved = json.loads((tokenizer_dir / "stats.json").read_text())
    saved.pop("review_unk_rate")
    assert saved == json.loads(json.dumps(tokenizer_stats(tok, held_out[3])))


# --- D18: papermill sees every parameter the notebook applies (no false "unknown parameter")


def _papermill_warnings(ipynb: Path, parameters: dict, caplog) -> list[str]:
    """Warnings papermill logs while parameterizing ``ipynb`` (prepare_only: nothing runs, nothing saved)."""
    import logging

    import papermill

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="papermill"):
        papermill.execute_notebook(str(ipynb), None, parameters=parameters, prepare_only=True, progress_bar=False)
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("ipynb", NOTEBOOKS, ids=lambda p: p.stem)
def test_papermill_knows_every_parameter_the_notebook_applies(ipynb, caplog):
    """papermill parses the tagged cell with a regex of its own: a second '=' on a line (e.g. in a
    comment, 'None = ...') hides that parameter, and `-p` then warns "Passed unknown parameter" though
    the override is applied. Write comments as 'None: ...' (no '=')."""
    papermill = pytest.importorskip("papermill")
    applied = _parameters(_code_cells(ipynb)[0])
    seen = [p["name"] for p in papermill.inspect_notebook(str(ipynb)).values()]
    assert seen == list(applied), (f"papermill does not see {sorted(set(applied) - set(seen))} in {ipynb.name}'s "
                                   "parameters cell: keep one '=' per line (comments say 'None: ...')")
    warnings = _papermill_warnings(ipynb, applied, caplog)
    assert not warnings, warnings


def test_the_readmes_papermill_parameters_exist(caplog):
    pytest.importorskip("papermill")
    calls = re.findall(r"papermill (notebooks/\S+\.ipynb) \S+((?: -p \w+ \S+)+)", (ROOT / "README.md").read_text())
    assert calls, "README.md shows no papermill call"
    for path, flags in calls:
        names = re.findall(r"-p (\w+)", flags)
        assert set(names) <= set(_parameters(_code_cells(ROOT / path)[0])), (path, names)
        assert not _papermill_warnings(ROOT / path, dict.fromkeys(names, 1), caplog)


def test_the_papermill_check_sees_a_hidden_parameter(tmp_path, caplog):
    pytest.importorskip("papermill")
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python",
                                                            "display_name": "Python 3"}})
    nb.cells = [nbformat.v4.new_code_cell("a = 1  # ok\nb = None  # None = hidden from papermill\n",
                                          metadata={"tags": ["parameters"]})]
    nbformat.write(nb, tmp_path / "x.ipynb")
    assert "Passed unknown parameter: b" in _papermill_warnings(tmp_path / "x.ipynb", {"a": 2, "b": 3}, caplog)
