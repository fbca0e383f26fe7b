"""README's "Your own data" pipeline runs as written, with smaller sizes, on small files made here."""
import re
from pathlib import Path

import pytest

from tests._corpus import texts

README = Path(__file__).resolve().parents[1] / "README.md"


def _own_data_block() -> str:
    section = README.read_text(encoding="utf-8").split("## Your own data", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    pipeline_blocks = [b for b in blocks if "Loop(" in b]
    assert len(pipeline_blocks) == 1, "README's own-data pipeline block not found"
    return pipeline_blocks[0]


@pytest.mark.slow
def test_readme_own_data_pipeline_runs(tmp_path, monkeypatch, capsys):
    code = _own_data_block()
    sizes = 'preset, block_size, steps = "narrow", 64, 1000'
    assert sizes in code                           # the test shrinks exactly these knobs
    code = code.replace(sizes, 'preset, block_size, steps = "tiny", 32, 3')
    lines = texts(400)
    (tmp_path / "my_corpus.txt").write_text("\n".join(lines[:300]) + "\n", encoding="utf-8")
    rows = ["review,stars"] + [f"{t.replace(',', '，')},{'5' if i % 2 else '1'}" for i, t in enumerate(lines[300:])]
    (tmp_path / "train.csv").write_text("\n".join(rows[:81]) + "\n", encoding="utf-8")
    (tmp_path / "test.csv").write_text("\n".join([rows[0]] + rows[81:]) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "fine-tuned BERT" in out and "TF-IDF + LR baseline" in out and "macro_f1" in out  # the comparison
    assert (tmp_path / "runs/mine/mlm/model/config.json").exists()
    assert list((tmp_path / "runs/mine/cls/checkpoints").iterdir())
