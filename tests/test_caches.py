"""Writable caches when HOME is not writable (nbkit.env.caches; case D08)."""
import os
import subprocess
import sys
from pathlib import Path

from nbkit.env.caches import cache_root, ensure_writable_caches

ROOT = Path(__file__).resolve().parents[1]


def test_writable_home_changes_nothing(tmp_path):
    env = {"HOME": str(tmp_path)}
    assert ensure_writable_caches(env) == {}
    assert env == {"HOME": str(tmp_path)}
    assert cache_root(env) == (tmp_path / ".cache", False)


def test_unwritable_home_moves_unset_caches_and_keeps_set_ones(tmp_path):
    (tmp_path / "blocker").write_text("")               # a file's child: no folder can be made there, even by root
    env = {"HOME": str(tmp_path / "blocker" / "home"), "TMPDIR": str(tmp_path / "t"), "MPLCONFIGDIR": "/mine"}
    changed = ensure_writable_caches(env)
    root = tmp_path / "t" / f"nbkit-cache-{os.getuid()}"
    assert changed == {"XDG_CACHE_HOME": str(root), "HF_HOME": str(root / "huggingface"),
                       "HF_MODULES_CACHE": str(root / "huggingface" / "modules"),
                       "NBKIT_JIEBA_CACHE": str(root / "jieba")}
    assert env["MPLCONFIGDIR"] == "/mine" and root.is_dir()


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
    (tmp_path / "blocker").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "XDG_", "MPLCONFIGDIR", "NBKIT_JIEBA"))}
    env.update(HOME=str(tmp_path / "blocker" / "home"), TMPDIR=str(tmp_path), HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-1500:]
    assert run.stdout.strip().splitlines()[-1] in ("neg", "pos")
    assert (tmp_path / f"nbkit-cache-{os.getuid()}" / "huggingface" / "modules").is_dir()
