"""Shared pytest setup: offline hub, hardware markers, temporary runs dir."""
from __future__ import annotations

import os

import pytest

# Nothing may be downloaded from a model or dataset hub during tests.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def runs_tmp(tmp_path, monkeypatch):
    """Point NBKIT_RUNS_DIR at a fresh temporary directory."""
    monkeypatch.setenv("NBKIT_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "runs"
