"""The package layout holds: subpackages by concern, layers that import downward, no import cycle, cheap
``import nbkit``. A module may be as long as its concern needs (no size limit), and a name may repeat
across packages where the package names the concern (``text/tokenizer.py``, ``recipes/tokenizer.py``)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "nbkit"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PKG.rglob("*.py")}


def resolve(name: str, known: dict[str, Path]) -> str | None:
    """The nbkit module that ``name`` (a module or a module.attribute) refers to."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(path: Path, known: dict[str, Path]) -> set[str]:
    """Every nbkit module ``path`` imports, at module level or inside functions."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            if t.startswith("nbkit"):
                m = resolve(t, known)
                if m and not m.endswith("__init__") and known[m].name != "__init__.py":
                    out.add(m)
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle in ``graph`` as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (c := visit(m)):
                return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (c := visit(n)):
            return c
    return None


def test_find_cycle_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_between_nbkit_modules():
    known = modules()
    graph = {m: imports_of(p, known) - {m} for m, p in known.items() if p.name != "__init__.py"}
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph))}"



def test_top_level_is_subpackages_by_concern():
    top = sorted(p.name for p in PKG.iterdir() if not p.name.startswith(("_", ".")) and p.name != "nbkit.egg-info")
    assert top == ["atomic.py", "caches.py", "cli", "corpus", "data", "env", "errors.py", "evaluate", "folder_lock.py",
                   "gpu", "jobs",
                   "jsonio.py", "models", "objectives", "pipeline.py", "profiling", "recipes", "rng.py", "runs.py",
                   "settings.py", "switches.py", "tasks", "text", "train",
                   "units.py", "views"]
    for pkg in PKG.iterdir():
        if pkg.is_dir() and not pkg.name.startswith("_"):
            assert (pkg / "__init__.py").is_file(), f"{pkg} is not a package"


@pytest.mark.parametrize("package", ["nbkit", "nbkit.data", "nbkit.text", "nbkit.models", "nbkit.train",
                                     "nbkit.gpu", "nbkit.env", "nbkit.profiling", "nbkit.evaluate", "nbkit.views",
                                     "nbkit.recipes", "nbkit.cli", "nbkit.corpus"])
def test_public_names_resolve(package):
    """Every lazily re-exported name exists in the module the package names for it."""
    import importlib
    mod = importlib.import_module(package)
    exported = [n for n in dir(mod) if not n.startswith("_")]
    for name in exported:
        assert getattr(mod, name) is not None


def test_import_nbkit_and_subpackages_import_no_torch():
    code = ("import sys, nbkit, nbkit.data, nbkit.text, nbkit.models, nbkit.train, nbkit.gpu, nbkit.env, "
            "nbkit.profiling, nbkit.evaluate, nbkit.views, nbkit.objectives, nbkit.recipes, nbkit.cli; "
            "from nbkit import data, env, gpu; "
            "print(sorted(m for m in ('torch', 'transformers', 'datasets', 'pynvml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_binary_files_outside_docs_img():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    binary = [f for f in files if not f.startswith("docs/img/") and (ROOT / f).is_file()
              and b"\0" in (ROOT / f).read_bytes()[:8192]]
    assert not binary, f"binary files committed outside docs/img/: {binary}"


# ----- layers (docs/architecture.md "Data flow"): imports point down, gpu/ and env/ stand alone -----
# top-level modules every layer may import (settings: the scale names pipeline defines presets for and env checks)
BASE = {"nbkit", "errors", "jsonio", "rng", "atomic", "caches", "folder_lock", "switches", "units", "settings", "runs",
        "_lazy"}
_BELOW = ["data", "text", "corpus", "models", "evaluate", "train", "views", "profiling", "objectives", "tasks",
          "recipes"]
MAY_IMPORT = {                                       # package -> the nbkit packages it may import (+ BASE, itself)
    "gpu": set(), "env": {"gpu"},
    **{pkg: set(_BELOW[:i]) for i, pkg in enumerate(_BELOW)},
    "cli": {*_BELOW, "gpu", "env"}, "jobs": set(_BELOW),
    "__main__": {"cli"},
    "pipeline": {*_BELOW},   # the deprecated old names, each pointing to its new home
}
MAY_IMPORT["profiling"] |= {"gpu"}                   # notebook 04 samples utilisation during its steps
MAY_IMPORT["recipes"] |= {"gpu"}


def package_of(module: str) -> str:
    """``nbkit.train.loop`` -> ``train``; a top-level module (``nbkit.errors``) -> ``errors``; ``nbkit`` -> ``nbkit``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_imports(path: Path, module: str) -> set[str]:
    """The nbkit packages/top-level modules ``path`` imports anywhere (function bodies, packages, relative too)."""
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[:len(module.split(".")) - node.level + (1 if is_pkg else 0)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] if base == "nbkit" else [base]
        else:
            continue
        out |= {package_of(t) for t in targets if t == "nbkit" or t.startswith("nbkit.")}
    return out


def layer_violations() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for module, path in modules().items():
        pkg = package_of(module)
        if pkg in BASE or pkg == "nbkit":                  # nbkit/__init__: lazy names from every layer
            continue
        allowed = MAY_IMPORT.get(pkg, set()) | BASE | {pkg}   # an unplaced package: test_every_package_has_a_layer
        for target in sorted(package_imports(path, module) - allowed):
            found.setdefault((pkg, target), []).append(module)
    return found


def test_layer_rule_sees_an_upward_import(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from nbkit.train import Loop\n    from ..recipes import tokenizer\n")
    assert package_imports(f, "nbkit.text.m") == {"train", "recipes"}
    assert "train" not in MAY_IMPORT["text"] | BASE and "recipes" not in MAY_IMPORT["train"]


def test_every_package_has_a_layer():
    pkgs = {package_of(m) for m in modules()} - BASE - {"nbkit"}
    assert pkgs <= set(MAY_IMPORT), f"give {sorted(pkgs - set(MAY_IMPORT))} a place in MAY_IMPORT"


def test_base_modules_import_only_base_modules():
    """A layer may import BASE, so BASE importing a layer would let env reach pipeline through it."""
    up = {m: sorted(pk) for m, p in modules().items() if package_of(m) in BASE - {"nbkit"}
          and (pk := package_imports(p, m) - BASE)}
    assert not up, f"top-level modules importing a layer (move the shared part down): {up}"


def test_imports_point_down_the_layers():
    found = layer_violations()
    assert not found, f"imports against docs/architecture.md's layers (package -> package: modules): {found}"


def test_every_executable_script_names_its_interpreter():
    """A fresh user's case: scripts/setup.sh had no shebang, so `timeout scripts/setup.sh`, nohup, cron or a
    Dockerfile's exec form ran it with /bin/sh and it died on `set -o pipefail`."""
    import os
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "*.sh", "scripts/*", "bench/*", ".ci/*"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    bad = [p for p in tracked if os.access(ROOT / p, os.X_OK) and not (ROOT / p).read_bytes().startswith(b"#!")]
    assert not bad, f"executable without a #! line (add `#!/usr/bin/env bash` or python3): {bad}"


def test_the_architecture_map_lists_every_module_as_it_is():
    """docs/architecture.md's tree is generated from the modules' docstrings; a module added, moved or renamed
    without `scripts/architecture_tree.py` leaves the map stale."""
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "architecture_tree.py"), "--check"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
