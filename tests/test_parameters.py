"""C07: each notebook's ``parameters`` cell holds plain literals, so papermill overrides take effect.

Papermill injects overrides as a cell right after the one tagged ``parameters``; a value computed inside that
cell would never see them. The cell names the handful of values a user changes (scale, model, steps, corpus,
init, the task's own) and holds one ``overrides = {}`` dict for every other field of the recipe's config. The
next cell builds the config from them by the same names (``Config.for_scale(scale, seed=seed, ..., **overrides)``),
so a misspelt name in either stops there with a ConfigError naming the close fields.
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

from nbkit.errors import ConfigError

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


#: parameters that steer a notebook's own cells, not a recipe (notebook 00's live monitor, notebook 06's generation, notebook 08's scoring and chat)
NOT_CONFIG = {"monitor_interval", "watch_seconds",
              "prompt", "max_new_tokens", "temperature", "top_k", "top_p",
              "repetition_penalty", "no_repeat_ngram_size",
              "per_task", "chat_turns"}

#: notebook -> the recipe config its parameters cell feeds (``module:Class``). A new notebook adds its line here.
CONFIGS = {
    "00_environment_check": "nbkit.recipes.profiling:ProfileConfig",
    "01_tokenizing": "nbkit.recipes.tokenizer:TokenizerConfig",
    "02_bert_mlm_pretraining": "nbkit.recipes.pretraining:PretrainConfig",
    "03_sentiment_finetuning": "nbkit.recipes.finetuning:FinetuneConfig",
    "04_gpu_profiling": "nbkit.recipes.profiling:ProfileConfig",
    "05_your_own_data": "nbkit.recipes.own_data:OwnDataConfig",
    "06_chinese_gpt": "nbkit.recipes.pretraining:PretrainConfig",
    "07_named_entities": "nbkit.recipes.finetuning:FinetuneConfig",
    "08_instruction_tuning": "nbkit.recipes.pretraining:PretrainConfig",
}
#: notebooks whose one config setting is named (notebook 00 times the matmul benchmark only): no ``overrides``
NO_OVERRIDES = {"00_environment_check"}
#: notebook -> a field its parameters cell does not name, and a value: set through ``overrides``, it must reach
#: the config
OVERRIDE = {"01_tokenizing": ("eval_fraction", 0.1), "02_bert_mlm_pretraining": ("weight_decay", 0.0),
            "03_sentiment_finetuning": ("weight_decay", 0.0), "04_gpu_profiling": ("timing_steps", 7),
            "05_your_own_data": ("max_passes", 3.0), "06_chinese_gpt": ("weight_decay", 0.0),
            "07_named_entities": ("span_offsets", "utf16"), "08_instruction_tuning": ("overflow", "truncate")}


def _config_class(spec: str):
    import importlib

    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("stem", sorted(CONFIGS))
def test_every_named_parameter_is_a_config_field_and_the_rest_go_in_overrides(stem):
    """A named parameter that is no field would be a variable nothing reads (issue 39.5's budget_minutes was the
    reverse: a field papermill could not set). Every field is reachable: by name, or in ``overrides``."""
    import dataclasses

    cls = _config_class(CONFIGS[stem])
    fields = {f.name for f in dataclasses.fields(cls)}
    params = _parameters(_code_cells(ROOT / "notebooks" / f"{stem}.ipynb")[0])
    named = set(params) - NOT_CONFIG - {"overrides"}
    assert named <= fields, f"{stem}: parameters {sorted(named - fields)} are no {cls.__name__} field"
    if stem in NO_OVERRIDES:
        assert "overrides" not in params
        return
    assert params.get("overrides") == {}, f"{stem}: the parameters cell ends with `overrides = {{}}` (papermill: -y)"
    assert len(named) <= 14, f"{stem} names {len(named)} fields: name the few a user changes, the rest go in overrides"


def _config_statement(stem: str, **parameters):
    """The config cell's imports and its ``cfg = ...for_scale(...)`` line, run with the parameters cell's values
    and ``parameters`` on top, as papermill injects them; returns the built config."""
    cells = _code_cells(ROOT / "notebooks" / f"{stem}.ipynb")
    ns: dict = {}
    exec(cells[0], ns)
    ns.update(parameters)
    tree = ast.parse(cells[1])
    keep = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
            or (isinstance(n, ast.Assign) and "for_scale" in ast.unparse(n.value) and ast.unparse(n.targets[0]) == "cfg")]
    assert keep and isinstance(keep[-1], ast.Assign), f"{stem}: the cell after the parameters builds cfg"
    exec(compile(ast.Module(body=keep, type_ignores=[]), stem, "exec"), ns)
    return ns["cfg"]


@pytest.mark.parametrize("stem", sorted(OVERRIDE))
def test_an_override_reaches_the_config_and_a_misspelt_one_names_the_field(stem):
    name, value = OVERRIDE[stem]
    cfg = _config_statement(stem, scale="smoke", overrides={name: value})
    assert getattr(cfg, name) == value and name in cfg.given()
    assert cfg.table().loc[name, "from"].startswith("override")
    with pytest.raises(ConfigError, match=rf"{name[:-1]} \(did you mean {name}\b.*\): not a \w+Config field"):
        _config_statement(stem, scale="smoke", overrides={name[:-1]: value})


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
    if "overrides" in params:
        assert build.group(1).rstrip().endswith("**overrides"), "the config takes overrides last: **overrides"
    for name in set(params) - {"scale", "overrides"} - NOT_CONFIG:
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
