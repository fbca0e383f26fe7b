"""Subpackages list their public names as imports under TYPE_CHECKING; nbkit._lazy reads them, lazily."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nbkit._lazy import type_checking_imports

ROOT = Path(__file__).resolve().parents[1]


def test_names_come_from_the_type_checking_imports_absolute_and_relative(tmp_path):
    init = tmp_path / "__init__.py"
    init.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                    "    from nbkit.pkg.a import x, y as z\n    from .b import w\nfrom .c import not_listed\n")
    assert type_checking_imports(init, "nbkit.pkg") == {"x": "nbkit.pkg.a", "z": "nbkit.pkg.a", "w": "nbkit.pkg.b"}
    init.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from nbkit.pkg.a import *\n")
    with pytest.raises(ValueError, match="from module import name"):
        type_checking_imports(init, "nbkit.pkg")


def test_a_name_is_imported_on_first_use_and_is_the_defining_modules_object():
    code = ("import sys, nbkit.evaluate as p, nbkit.train as t; "
            "assert 'nbkit.evaluate.probes' not in sys.modules; f = p.plateau_check; "
            "import nbkit.evaluate.probes as m; assert f is m.plateau_check and 'torch' not in sys.modules; "
            "assert 'Loop' in dir(t) and 'plateau_check' in dir(p); "
            "print(getattr(p, 'nope', 'missing'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "missing", out.stderr[-2000:]
