"""Notebook 04 is committed as a guided notebook without outputs (nbval runs it)."""
from pathlib import Path

import nbformat

NB = Path(__file__).resolve().parents[1] / "notebooks" / "04_gpu_profiling.ipynb"


def test_structure_parameters_first_no_outputs_guided():
    nb = nbformat.read(NB, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    markdown = [c for c in nb.cells if c.cell_type == "markdown"]
    assert "parameters" in code[0].metadata.get("tags", [])
    assert "scale = None" in code[0].source  # plain literals: papermill overrides them (tests/test_parameters.py)
    assert all(not c.outputs and c.execution_count is None for c in code)
    assert len(markdown) >= len(code)  # a short explanation before each step
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# 04")
