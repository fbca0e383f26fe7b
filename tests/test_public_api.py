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


def _imports_outside_the_package():
    """``(file, "nbkit.mod", name or None)`` for every nbkit import in bench/, scripts/, the notebooks' .py pairs
    and the docs' python blocks, including imports inside functions (a bench imports lazily)."""
    import ast

    sources = [p for d in ("bench", "scripts") for p in sorted((ROOT / d).rglob("*.py"))]
    sources += sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    found = []
    for path in sources + sorted((ROOT / "docs").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        codes = re.findall(r"```python\n(.*?)```", text, flags=re.S) if path.suffix == ".md" else [text]
        for code in codes:
            try:
                tree = ast.parse(code)
            except SyntaxError:  # a docs fragment with an ellipsis or a prompt; not an import statement
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("nbkit"):
                    found += [(path.relative_to(ROOT).as_posix(), node.module, a.name) for a in node.names]
                elif isinstance(node, ast.Import):
                    found += [(path.relative_to(ROOT).as_posix(), a.name, None) for a in node.names
                              if a.name.startswith("nbkit")]
    return sorted(set(found), key=lambda t: (t[0], t[1], t[2] or ""))


def test_imports_outside_the_package_are_collected():
    files = {f for f, _, _ in _imports_outside_the_package()}
    assert {"bench/sft_cpu.py", "notebooks/06_chinese_gpt.py", "docs/ner.md"} <= files


@pytest.mark.parametrize("where,module,name", _imports_outside_the_package(),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_a_name_imported_by_a_bench_script_notebook_or_doc_exists(where, module, name):
    """A bench or renderer that no test runs still imports only names that exist, so a clean-up of the package
    cannot leave it broken until someone runs it."""
    try:
        mod = importlib.import_module(module)
        if name is not None and not hasattr(mod, name):
            importlib.import_module(f"{module}.{name}")
    except ModuleNotFoundError as e:
        pytest.fail(f"{where} imports {name or module} from {module}, which does not exist ({e}); "
                    "update it in the same change")
