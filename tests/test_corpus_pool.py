"""Worker processes for corpus preparation start, or the work runs in this process with a warning."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_script_read_from_stdin_prepares_in_one_process_instead_of_hanging(tmp_path):
    """spawn re-imports __main__ from '<stdin>', so every worker died and Pool replaced it forever."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"第{i}条评论，物流很快，包装很好，质量不错。\n" for i in range(300)), encoding="utf-8")
    script = textwrap.dedent(f"""
        import warnings
        from nbkit.corpus import prepare_corpus
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            m = prepare_corpus([{str(corpus)!r}], {str(tmp_path / "store")!r}, num_workers=2, vocab_size=300,
                               progress=False)
        print("KEPT", m["counts"]["n_texts_kept"])
        print("WARNED", any("standard input" in str(w.message) for w in seen))
    """)
    got = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=240,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
                                        "TOKENIZERS_PARALLELISM": "false", "PATH": "/usr/bin:/bin"})
    assert got.returncode == 0, got.stderr[-2000:]
    assert "KEPT 300" in got.stdout and "WARNED True" in got.stdout, got.stdout + got.stderr[-1000:]


def test_a_script_without_a_main_guard_fails_naming_the_fix_instead_of_hanging(tmp_path):
    """A spawned worker re-runs the script; calling prepare_corpus there waited on the parent's store lock
    forever (both processes silent). Now the worker raises, naming the guard, and the parent stops."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"第{i}条评论，物流很快，包装很好，质量不错。\n" for i in range(300)), encoding="utf-8")
    script = tmp_path / "no_guard.py"
    script.write_text(textwrap.dedent(f"""
        from nbkit.corpus import prepare_corpus
        prepare_corpus([{str(corpus)!r}], {str(tmp_path / "store")!r}, num_workers=2, vocab_size=300, progress=False)
        print("DONE")
    """), encoding="utf-8")
    got = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, cwd=tmp_path,
                         env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                              "PATH": "/usr/bin:/bin"})
    assert got.returncode != 0 and "DONE" not in got.stdout, got.stdout + got.stderr[-2000:]
    assert 'if __name__ == "__main__":' in got.stderr, got.stderr[-2000:]
    assert "exited with code 1" in got.stderr and "fewer workers" not in got.stderr, got.stderr[-2000:]


def test_a_kernel_or_a_file_script_can_spawn():
    from nbkit.corpus.pool import spawn_blocker

    assert spawn_blocker() is None            # pytest's __main__ is a real file
