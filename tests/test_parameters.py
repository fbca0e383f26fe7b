"""C07: each notebook's ``parameters`` cell holds plain literals, so papermill overrides take effect.

Papermill injects overrides as a cell right after the one tagged ``parameters``; a value
computed inside that cell from the preset would never see them (and ``-p scale cpu``
used to crash on ``'str' object has no attribute 'name'``). The next cell resolves the
scale by name with :func:`nbkit.recipes.params.resolve_scale`.
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
from nbkit.recipes.params import knob, overrides_of, resolve_scale, run_tag
from nbkit.recipes.scale import PRESETS

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


@pytest.mark.parametrize("ipynb", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_are_plain_literals_resolved_in_the_next_cell(ipynb):
    cells = _code_cells(ipynb)
    params = _parameters(cells[0])
    assert params.get("scale", "missing") is None, "the scale is a parameter, by name (None: $NBKIT_SCALE)"
    later = "\n".join(cells[1:])
    resolve = re.search(r"(?:resolve_scale|\.for_scale)\(scale(.*?)\)[ \t]*(?:#[^\n]*)?\n", cells[1], re.S)
    assert resolve, ("the cell after the parameters resolves them: scale = resolve_scale(scale, ...) or a "
                     "recipe's Config.for_scale(scale, ...)")
    assert "get_scale(" not in later, "read the scale only through the parameters"
    for name in params:
        assert re.search(rf"\b{name}\b", later), f"parameter {name!r} is never read: an override would be ignored"
    # every preset field the notebook reads directly can be overridden by a parameter
    overridable = set(re.findall(r"(\w+)=\w+", resolve.group(1))) | {"name"}
    read = {m for line in later.splitlines() if "knob(" not in line for m in re.findall(r"\bscale\.(\w+)", line)}
    assert read <= overridable, f"scale fields read without a parameter: {sorted(read - overridable)}"


def test_seed_is_a_parameter_wherever_a_notebook_uses_a_seed():
    for ipynb in NOTEBOOKS:
        cells = _code_cells(ipynb)
        if re.search(r"\bseed\b", "\n".join(cells[1:])):
            assert "seed" in _parameters(cells[0]), f"{ipynb.name} uses a seed but has no seed parameter"
    assert "seed" in _parameters(_code_cells(ROOT / "notebooks" / "03_sentiment_finetuning.ipynb")[0])


def test_resolve_scale_by_name_with_overrides():
    s = resolve_scale("CPU", seed=3, vocab_size=500.0, corpus_lines="all", bench_sizes="[64, 128]", mlm_lr=1,
                      model=None)
    assert s.name == "cpu" and s.seed == 3 and s.vocab_size == 500 and isinstance(s.vocab_size, int)
    assert s.corpus_lines is None and s.bench_sizes == (64, 128) and s.mlm_lr == 1.0 and s.model == PRESETS["cpu"].model
    assert overrides_of(s) == {"seed": 3, "vocab_size": 500, "bench_sizes": (64, 128), "mlm_lr": 1.0}
    assert resolve_scale(s) is s and resolve_scale(s, seed=None) is s  # rerunning the cell changes nothing
    assert resolve_scale("smoke") is PRESETS["smoke"] and overrides_of(PRESETS["smoke"]) == {}
    assert resolve_scale(None).name == "smoke"  # NBKIT_SCALE=smoke in the tests
    assert knob(None, 4) == 4 and knob(0, 4) == 0
    assert run_tag(PRESETS["cpu"]) == "" and run_tag(s) == "-bench_sizes64x128-mlm_lr1-seed3-vocab_size500"
    assert run_tag(resolve_scale("smoke", sentiment_max_train="all")) == "-sentiment_max_trainall"


@pytest.mark.parametrize("ipynb", NOTEBOOKS[1:], ids=lambda p: p.stem)
def test_a_run_with_overrides_writes_to_its_own_folder(ipynb):
    """`-p seed 3` on notebook 03 must not resume (or overwrite) the preset's finished run in runs/<scale>/sentiment."""
    later = "\n".join(_code_cells(ipynb)[1:])
    direct = r"step_dir\((scale\.name|cfg\.scale), \"\w+\" \+ ((pipeline\.)?run_tag\(scale\)|cfg\.run_tag\(\))\)"
    named = (r"(\w+) = \"\w+\" \+ .*cfg\.run_tag\(\)", r"step_dir\((scale\.name|cfg\.scale), {}\)")  # name = "mlm" + ...
    recipe = r"= (ft\.run_dir\(cfg, pretrained\)|pt\.run_dir\(cfg\))"   # notebooks 03/02: the recipes' run_dir
    m = re.search(named[0], later)
    assert re.search(direct, later) or re.search(recipe, later) or (m and re.search(named[1].format(m.group(1)), later))


@pytest.mark.parametrize("kwargs, match", [
    (dict(scale="large"), r"scale='large' is not a scale.*smoke, cpu, gpu"),
    (dict(scale=3), r"scale=3: give the scale's name"),
    (dict(seeds=3), r"'seeds' is not a scale knob; known: .*seed"),
    (dict(vocab_size="big"), r"vocab_size='big': expected a whole number \(the 'smoke' scale uses 2000\)"),
    (dict(seed=True), r"seed=True: expected a whole number"),
    (dict(bench_sizes=[64, "x"]), r"bench_sizes=\[64, 'x'\]: expected a list of whole numbers"),
])
def test_resolve_scale_names_a_bad_value_and_the_fix(kwargs, match):
    scale = kwargs.pop("scale", "smoke")
    with pytest.raises(ConfigError, match=match):
        resolve_scale(scale, **kwargs)


@pytest.mark.slow
def test_papermill_overrides_take_effect(tmp_path):
    """`papermill 01_tokenizing.ipynb out.ipynb -p scale cpu -p seed 3 ...` runs, and the values are used."""
    pytest.importorskip("papermill")
    runs = tmp_path / "runs"
    out = tmp_path / "out.ipynb"
    cmd = [sys.executable, "-m", "papermill", str(ROOT / "notebooks" / "01_tokenizing.ipynb"), str(out),
           "-p", "scale", "cpu", "-p", "seed", "3", "-p", "corpus_lines", "300", "-p", "vocab_size", "700",
           "-p", "max_length", "48", "-k", "python3", "--cwd", str(ROOT / "notebooks")]
    env = {**__import__("os").environ, "NBKIT_RUNS_DIR": str(runs), "NBKIT_SCALE": "smoke"}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    printed = "".join(o.get("text", "") for c in nbformat.read(out, as_version=4).cells
                      if c.cell_type == "code" for o in c.get("outputs", []))
    assert "scale=cpu  seed=3  corpus_lines=300  vocab_size=700" in printed  # the name beat NBKIT_SCALE=smoke
    assert "max_length=48" in printed or "longer than 48" in printed
    tokenizer_dir = runs / "cpu" / "tokenizer-cls_max_length48-corpus_lines300-seed3-vocab_size700"
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
