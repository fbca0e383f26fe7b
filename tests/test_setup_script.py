"""scripts/setup.sh passes TORCH_INDEX_URL, TORCH_SPEC and NBKIT_EXTRAS to pip as documented.

The script runs on a copy of itself beside a fake ``.venv/bin/python`` that records
its arguments, so nothing is installed and no index is contacted.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_setup(tmp_path: Path, **env: str) -> list[str]:
    """The argument lists setup.sh gave to .venv/bin/python, one string per call."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    fake = tmp_path / ".venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/calls\n')
    fake.chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if k not in ("TORCH_SPEC", "TORCH_INDEX_URL", "NBKIT_EXTRAS")}
    subprocess.run(["bash", str(tmp_path / "scripts" / "setup.sh")], env={**clean, **env}, check=True, timeout=60)
    return [c for c in (tmp_path / "calls").read_text().splitlines() if "pip install -q" in c
            and "--upgrade pip" not in c]


def test_default_installs_the_pinned_torch_from_the_configured_indexes_and_the_test_extras(tmp_path):
    assert run_setup(tmp_path) == ["-m pip install -q torch==2.13.0", "-m pip install -q -e .[test]"]


def test_torch_index_url_applies_to_the_torch_install_only(tmp_path):
    url = "https://download.pytorch.org/whl/cpu"
    calls = run_setup(tmp_path, TORCH_INDEX_URL=url, TORCH_SPEC="torch==2.9.1")
    assert calls == [f"-m pip install -q --index-url {url} torch==2.9.1", "-m pip install -q -e .[test]"]


def test_extras_are_optional(tmp_path):
    assert run_setup(tmp_path, NBKIT_EXTRAS="")[-1] == "-m pip install -q -e ."


def test_ci_asks_for_the_test_extras_explicitly():
    assert "NBKIT_EXTRAS=test scripts/setup.sh" in (REPO / "scripts" / "test.sh").read_text()
