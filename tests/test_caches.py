"""Writable caches when HOME is not writable (nbkit.caches; case D08): set by the entry points and the
mean-pooling export, never by ``import nbkit``."""
import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nbkit.caches import cache_root, ensure_writable_caches

ROOT = Path(__file__).resolve().parents[1]
VARIABLES = ("XDG_CACHE_HOME", "HF_HOME", "HF_MODULES_CACHE", "MPLCONFIGDIR", "NBKIT_JIEBA_CACHE")


def _unwritable_home_env(tmp_path) -> dict:
    """This process's environment without cache variables, HOME a file's child (no folder can be made there,
    even by root), TMPDIR in tmp_path."""
    (tmp_path / "blocker").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "XDG_", "MPLCONFIGDIR", "NBKIT_JIEBA"))}
    env.update(HOME=str(tmp_path / "blocker" / "home"), TMPDIR=str(tmp_path), HF_HUB_OFFLINE="1",
               PYTHONPATH=str(ROOT))
    return env


@pytest.fixture
def unwritable_home(tmp_path, monkeypatch):
    """os.environ as :func:`_unwritable_home_env`, restored afterwards (variables set by the code too)."""
    for name in VARIABLES:
        monkeypatch.setenv(name, "x")      # recorded, so whatever the code sets is undone
        monkeypatch.delenv(name)
    (tmp_path / "blocker").write_text("")
    monkeypatch.setenv("HOME", str(tmp_path / "blocker" / "home"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    return tmp_path / f"nbkit-cache-{os.getuid()}"


def test_writable_home_changes_nothing(tmp_path):
    env = {"HOME": str(tmp_path)}
    assert ensure_writable_caches(env) == {}
    assert env == {"HOME": str(tmp_path)}
    assert cache_root(env) == (tmp_path / ".cache", False)


def test_unwritable_home_moves_unset_caches_keeps_set_ones_and_says_so(tmp_path):
    (tmp_path / "blocker").write_text("")
    env = {"HOME": str(tmp_path / "blocker" / "home"), "TMPDIR": str(tmp_path / "t"), "MPLCONFIGDIR": "/mine"}
    with pytest.warns(UserWarning, match="not writable: caches go to .*nbkit-cache-.*HF_MODULES_CACHE"):
        changed = ensure_writable_caches(env)
    root = tmp_path / "t" / f"nbkit-cache-{os.getuid()}"
    assert changed == {"XDG_CACHE_HOME": str(root), "HF_HOME": str(root / "huggingface"),
                       "HF_MODULES_CACHE": str(root / "huggingface" / "modules"),
                       "NBKIT_JIEBA_CACHE": str(root / "jieba")}
    assert env["MPLCONFIGDIR"] == "/mine" and root.is_dir()
    assert ensure_writable_caches(env) == {}      # the second call finds them set: nothing more, no warning


def test_import_nbkit_leaves_the_environment_alone(tmp_path):
    code = ("import os; before = dict(os.environ); import nbkit; from nbkit import data, env, gpu, models, text; "
            "print(sorted(k for k in os.environ if os.environ.get(k) != before.get(k)))")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_unwritable_home_env(tmp_path),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-1500:]
    assert run.stdout.strip() == "[]"


def test_the_cli_and_the_jobs_set_the_caches_first(unwritable_home, capsys):
    from nbkit.cli.main import main

    with pytest.warns(UserWarning, match="HOME's cache folder is not writable"):
        assert main(["run-notebooks", "--only", "no-such-notebook"]) == 2    # bad input, after the caches
    assert os.environ["HF_MODULES_CACHE"] == str(unwritable_home / "huggingface" / "modules")
    assert "no notebook matches" in capsys.readouterr().err

    from nbkit.jobs.outcome import run_job

    for name in VARIABLES:      # a fresh process again
        del os.environ[name]
    seen = {}
    with pytest.warns(UserWarning, match="HF_MODULES_CACHE"):
        assert run_job("nbkit.jobs.x", lambda argv: seen.update(os.environ), [], argparse.ArgumentParser()) == 0
    assert seen["HF_MODULES_CACHE"] == str(unwritable_home / "huggingface" / "modules")


def test_mean_pooling_export_loads_when_transformers_came_first_and_home_is_unwritable(tmp_path):
    """The D08 pattern: `import transformers` before nbkit, no cache variable set, HOME unwritable."""
    code = """
import sys, transformers
from nbkit import models, text
texts = ["质量很好，很满意", "太差了，不推荐", "还可以吧", "非常好用"] * 10
tok = text.train_wordpiece(texts, 40, "tok", 32)
clf, _ = models.build_classifier(None, 2, {0: "neg", 1: "pos"}, tokenizer=tok, preset="tiny", pooling="mean")
models.export_classifier(clf, tok, "export")
p = transformers.pipeline("text-classification", model="export", trust_remote_code=True, truncation=True, device="cpu")
print(p("很好")[0]["label"])
"""
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_unwritable_home_env(tmp_path),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-1500:]
    assert run.stdout.strip().splitlines()[-1] in ("neg", "pos")
    assert "HOME's cache folder is not writable" in run.stderr          # said, not silent
    assert (tmp_path / f"nbkit-cache-{os.getuid()}" / "huggingface" / "modules").is_dir()
