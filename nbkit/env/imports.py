"""Where a module that failed to import came from, so a shadowing folder is obvious.

``nbkit doctor`` imports torch (and, through :class:`nbkit.gpu.nvml.Nvml`,
``pynvml``). When that import raises, "reinstall torch" is the wrong advice if
the ``torch`` Python found is not the installed one at all: a ``torch/`` folder
or ``torch.py`` in the working directory or on ``PYTHONPATH`` comes first on
``sys.path`` and hides the installed package. :func:`import_failure` names the
file Python imported (``importlib.util.find_spec``, which locates the module
without running it), the ``sys.path`` entry it came through and where that entry
came from (``PYTHONPATH``, the working directory, site-packages), and compares it
with where the distribution is installed (``importlib.metadata``).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from importlib import metadata


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path or os.curdir))


def module_origin(module: str) -> str | None:
    """The file ``import module`` loads (``.../torch/__init__.py``), without importing it; None if not found."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("built-in", "frozen", "namespace"):
        return spec.origin
    locations = list(spec.submodule_search_locations or [])
    return locations[0] if locations else None


def path_entry_source(entry: str, env: dict[str, str] | None = None) -> str:
    """Why ``entry`` is on ``sys.path``: ``PYTHONPATH``, ``the working directory`` or ``the environment``."""
    env = os.environ if env is None else env
    pp = [_real(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _real(entry) in pp:
        return "PYTHONPATH"
    if entry in ("", os.curdir) or _real(entry) == _real(os.getcwd()):
        return "the working directory"
    return "the environment (site-packages or a .pth file)"


def installed_locations(module: str) -> list[tuple[str, str, str]]:
    """``(distribution, version, folder)`` of each installed distribution that provides top-level ``module``."""
    out = []
    for name in metadata.packages_distributions().get(module, []):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        out.append((name, dist.version, _real(str(dist.locate_file("")))))
    return out


def import_failure(module: str, exc: BaseException | str,
                   env: dict[str, str] | None = None) -> tuple[str, str]:
    """``(value, fix)`` for a report line about ``import module`` having raised ``exc``.

    ``value`` names the exception and the file Python imported, with the
    ``sys.path`` entry and its source; when that file lies outside every
    installed distribution providing ``module``, it says the file shadows the
    installed version and ``fix`` says to move the folder or drop the entry from
    ``PYTHONPATH``. Otherwise ``fix`` says to reinstall (naming the broken path),
    or to install when nothing is found. Never raises.
    """
    what = exc if isinstance(exc, str) else repr(exc)
    pip = {"pynvml": "nvidia-ml-py"}.get(module, module)
    try:
        origin = module_origin(module)
        installed = installed_locations(module)
    except Exception:  # noqa: BLE001  (a diagnosis must not crash the report)
        origin, installed = None, []
    if origin is None:
        return (f"`import {module}` failed: {what}; no {module} on sys.path of {sys.executable}",
                f"`{sys.executable} -m pip install {pip}`")
    origin = _real(origin)
    top = os.path.dirname(origin) if os.path.basename(origin) == "__init__.py" else origin
    entry = os.path.dirname(top)
    source = path_entry_source(entry, env)
    value = f"`import {module}` failed: {what}; imported from {origin} (sys.path entry {entry}, from {source})"
    inside = [d for d in installed if origin.startswith(d[2] + os.sep)]
    if installed and not inside:
        dist, version, where = installed[0]
        value += f", which shadows the installed {dist} {version} in {where}"
        drop = f"remove {entry} from PYTHONPATH" if source == "PYTHONPATH" else f"run from another folder than {entry}"
        return value, f"{top} hides the real {module}: rename or move it, or {drop}"
    return value, (f"the {module} install at {top} is broken: `{sys.executable} -m pip install "
                   f"--force-reinstall {pip}`" + (" (CUDA wheels: https://pytorch.org/get-started/locally/)"
                                                  if module == "torch" else ""))
