"""The public API that docs/architecture.md's contracts write down resolves in nbkit.

A name users call (notebooks, the README, case reports' scripts) must not disappear in a clean-up
while the map still shows it: the contract lines ``pkg.name(...)`` / ``pkg.mod.Name`` are checked
against the package's attributes, so a deletion fails here until the map and the code agree.
"""
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {p.name for p in (ROOT / "nbkit").iterdir() if (p / "__init__.py").is_file()}
# a contract line starts with package.name[.name...] followed by "(" or ":" or " -> " or whitespace
LINE = re.compile(r"^(?P<path>(?P<pkg>[a-z_]+)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?=[(: ]|$)")


def _contract_names():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    names = set()
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            m = LINE.match(line)
            if m and m["pkg"] in PACKAGES:
                names.add(m["path"])
    return sorted(names)


def _resolve(dotted: str):
    parts = dotted.split(".")
    obj = importlib.import_module(f"nbkit.{parts[0]}")
    for i, part in enumerate(parts[1:], start=1):
        try:
            obj = getattr(obj, part)
        except AttributeError:  # a submodule not re-exported by its package
            obj = importlib.import_module("nbkit." + ".".join(parts[: i + 1]))
    return obj


def test_the_map_writes_down_contracts():
    names = _contract_names()
    assert len(names) > 40 and "recipes.own_data.pretraining_texts" in names and "text.make_blocks" in names


@pytest.mark.parametrize("dotted", _contract_names())
def test_a_contract_name_resolves(dotted):
    try:
        _resolve(dotted)
    except (AttributeError, ModuleNotFoundError) as e:
        pytest.fail(f"docs/architecture.md names nbkit.{dotted}, which does not exist ({e}); restore it or "
                    "update the map in the same change")
