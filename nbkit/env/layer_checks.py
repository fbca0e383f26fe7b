"""The checks behind :func:`nbkit.env.doctor.report`, one function per layer, each returning :class:`Check` lines.

No CUDA context unless ``ctx.cuda``: GPU facts come from NVML, cuDNN's version from
``torch._C._cudnn.getVersionInt()`` (``torch.backends.cudnn.version()`` initialises CUDA).
"""
from __future__ import annotations

import glob
import importlib.util
import os
import platform
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from nbkit.gpu.nvml import Nvml
from nbkit.settings import SCALES, scale_name

OK, WARN, FAIL = "OK", "WARN", "FAIL"


@dataclass(frozen=True)
class Check:
    """One report line: ``status`` is OK, WARN or FAIL; ``fix`` is one line ("" when OK)."""

    layer: str      # os, container, python, torch, cuda, gpu, nvml, jupyter, hf, nbkit
    name: str
    status: str
    value: str
    fix: str = ""


@dataclass
class Context:
    """What the checks share: NVML, torch (or why it failed to import), whether CUDA may be used."""

    nvml: Nvml
    cuda: bool = False
    torch: Any = None
    torch_error: BaseException | None = None
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    dev_root: str = "/dev"

    def gpu_nodes(self) -> list[str]:
        return sorted(glob.glob(os.path.join(self.dev_root, "nvidia[0-9]*")))


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def check_os(ctx: Context) -> list[Check]:
    """OS, container, GPU device nodes, NVIDIA_DRIVER_CAPABILITIES, /dev/shm size (MiB)."""
    in_container = os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv")
    out = [Check("os", "OS", OK, platform.platform() + (" (in a container)" if in_container else ""))]
    nodes = ctx.gpu_nodes()
    wants_gpu = ctx.env.get("NVIDIA_VISIBLE_DEVICES", "") not in ("", "void", "none")
    if nodes:
        out.append(Check("container", "GPU device nodes", OK, ", ".join(nodes)))
    else:
        out.append(Check("container", "GPU device nodes", FAIL if wants_gpu else WARN,
                         f"no {ctx.dev_root}/nvidia*: no GPU visible here",
                         "on a GPU host run the container with `--gpus all` (NVIDIA Container Toolkit); on a CPU "
                         "machine ignore this"))
    caps = ctx.env.get("NVIDIA_DRIVER_CAPABILITIES")
    if caps is None:
        out.append(Check("container", "NVIDIA_DRIVER_CAPABILITIES", OK, "unset"))
    else:
        have = {c.strip() for c in caps.split(",")}
        missing = [] if "all" in have else [c for c in ("compute", "utility") if c not in have]
        status = FAIL if "compute" in missing else (WARN if missing else OK)
        out.append(Check("container", "NVIDIA_DRIVER_CAPABILITIES", status, caps,
                         "set NVIDIA_DRIVER_CAPABILITIES=compute,utility (compute: CUDA; utility: nvidia-smi and "
                         "NVML)" if missing else ""))
    try:
        st = os.statvfs("/dev/shm")
        shm_mib = st.f_blocks * st.f_frsize / 2**20
        out.append(Check("container", "/dev/shm", OK if shm_mib >= 1024 else WARN, f"{shm_mib:.0f} MiB",
                         "" if shm_mib >= 1024 else "DataLoader workers share batches via /dev/shm: run Docker "
                         "with `--shm-size=2g` or `--ipc=host`"))
    except OSError as exc:
        out.append(Check("container", "/dev/shm", WARN, f"not readable: {exc}",
                         "mount a tmpfs at /dev/shm (`--shm-size=2g`)"))
    return out


def check_python(ctx: Context) -> list[Check]:
    """Python version (nbkit needs 3.10+)."""
    ok = sys.version_info >= (3, 10)
    return [Check("python", "Python", OK if ok else FAIL, f"{platform.python_version()} ({sys.executable})",
                  "" if ok else "use Python 3.10 or newer")]


def check_torch(ctx: Context) -> list[Check]:
    """torch build, CUDA runtime vs driver, cuDNN, NCCL, SDPA backends."""
    if ctx.torch is None:
        value, fix = import_failure("torch", ctx.torch_error, ctx.env)  # names the file, so a shadowing folder shows
        return [Check("torch", "torch", FAIL, value, fix)]
    torch = ctx.torch
    n_gpu = ctx.nvml.device_count()
    built = getattr(torch.version, "cuda", None)
    drv = ctx.nvml.cuda_driver_version()
    wheel = f"cu{drv[0]}{drv[1]}" if drv else "cu124"
    out = []
    if built is None:
        out.append(Check("torch", "torch", FAIL if n_gpu else OK, f"{torch.__version__}, CPU-only wheel",
                         "GPU present but torch cannot use it: `pip install torch --index-url "
                         f"https://download.pytorch.org/whl/{wheel}` (at most the driver's CUDA)" if n_gpu else ""))
    else:
        out.append(Check("torch", "torch", OK, f"{torch.__version__}, built for CUDA {built}"))
    if built is None or drv is None:
        why = ctx.nvml.why_unavailable("nvmlSystemGetCudaDriverVersion") if drv is None else ""
        out.append(Check("cuda", "CUDA runtime vs driver", OK,
                         f"n/a (torch CUDA {built or 'none'}, driver CUDA "
                         f"{'%d.%d' % drv if drv else 'none'}{f': {why}' if why else ''})"))
    else:
        rt = tuple(int(x) for x in built.split(".")[:2])
        status, fix = OK, ""
        if rt[0] > drv[0]:
            status, fix = FAIL, (f"the driver supports CUDA up to {drv[0]}.{drv[1]}: update the NVIDIA driver or "
                                 f"install a cu{drv[0]}x torch wheel")
        elif rt > drv:
            status, fix = WARN, ("runs through CUDA minor-version compatibility, but PTX JIT (e.g. torch.compile "
                                 "kernels) may fail: update the driver")
        out.append(Check("cuda", "CUDA runtime vs driver", status,
                         f"torch CUDA {built}, driver supports up to {drv[0]}.{drv[1]}", fix))
    out.append(_library_version("cuDNN", lambda: torch._C._cudnn.getVersionInt()
                                if hasattr(torch._C, "_cudnn") else None))

    def nccl():
        import torch.distributed as dist

        if built is not None and dist.is_available() and dist.is_nccl_available():
            return ".".join(str(x) for x in torch.cuda.nccl.version()[:3])
        return None

    out.append(_library_version("NCCL", nccl))
    out.append(_sdpa(ctx, built))
    return out


def _library_version(name: str, read) -> Check:
    """OK with ``read()``'s version, "n/a" when the build has none, WARN naming the error when reading fails."""
    try:
        version = read()
    except Exception as exc:  # a broken CUDA library: say so, the other lines still run
        return Check("cuda", name, WARN, f"version unreadable: {type(exc).__name__}: {exc}"[:300],
                     "reinstall torch for the driver's CUDA version (https://pytorch.org/get-started/locally/)")
    return Check("cuda", name, OK, str(version) if version else "n/a (not in this build)")


def _sdpa(ctx: Context, built: str | None) -> Check:
    b = ctx.torch.backends.cuda
    flags = {"flash": b.flash_sdp_enabled(), "mem_efficient": b.mem_efficient_sdp_enabled(),
             "math": b.math_sdp_enabled(), "cudnn": b.cudnn_sdp_enabled()}
    enabled = ", ".join(k for k, v in flags.items() if v)
    if built is None:
        return Check("cuda", "SDPA backends", OK, f"CPU: math / fused CPU kernels (enabled flags: {enabled})")
    compiled = b.is_flash_attention_available()
    ccs = [ctx.nvml.compute_capability(i) for i in range(ctx.nvml.device_count())]
    flash_ok = compiled and any(cc and cc >= (8, 0) for cc in ccs)
    status = WARN if (not flash_ok and any(cc and cc >= (8, 0) for cc in ccs)) else OK
    return Check("cuda", "SDPA backends", status,
                 f"enabled: {enabled}; flash kernels compiled: {compiled}; flash usable on this GPU (sm80+): "
                 f"{flash_ok}",
                 "install an official CUDA torch wheel (it ships flash attention)" if status == WARN else "")


def check_gpus(ctx: Context) -> list[Check]:
    """NVML health, then one line per GPU (name, sm, memory MiB, bf16/TF32), then CUDA if asked."""
    st = ctx.nvml.state
    # library_not_found / no_devices without device nodes: a CPU-only machine, nothing is broken
    status = OK if st.ok else WARN if st.name in ("library_not_found", "no_devices") and not ctx.gpu_nodes() else FAIL
    detail, fix = st.detail, st.fix
    if st.name == "pynvml_missing":  # where the broken pynvml came from (a shadowing pynvml.py?)
        detail, fix = import_failure("pynvml", st.detail.removeprefix("`import pynvml` failed: ").rstrip("."),
                                     ctx.env)
    out = [Check("nvml", "NVML", status, detail, fix)]
    for d in ctx.nvml.sample():
        if d.mig:
            out.append(Check("gpu", d.label, OK, f"{d.name}, {d.fmt('mem_total_mib')} (MIG instance)"))
            continue
        cc = ctx.nvml.compute_capability(d.index)
        new = cc is not None and cc >= (8, 0)
        why = "" if cc else ctx.nvml.why_unavailable("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetCudaComputeCapability")
        sm = f"sm_{cc[0]}{cc[1]}" if cc else f"sm ? ({why or 'unknown'})"
        out.append(Check("gpu", d.label, OK if new else WARN,
                         f"{d.name}, {sm}, {d.fmt('mem_total_mib')}, bf16 {'yes' if new else 'no'}, "
                         f"TF32 {'yes' if new else 'no'}",
                         "" if new else "no bf16/TF32 before sm_80: nbkit trains in fp16 with a GradScaler"))
    if ctx.cuda:
        out.append(_cuda_probe(ctx))
    return out


def _cuda_probe(ctx: Context) -> Check:
    torch = ctx.torch
    if torch is None:
        return Check("cuda", "CUDA context", FAIL, "torch missing", "install torch first")
    try:
        if not torch.cuda.is_available():
            n = ctx.nvml.device_count()
            return Check("cuda", "CUDA context", FAIL if n else WARN, "torch.cuda.is_available() is False",
                         "check CUDA_VISIBLE_DEVICES and the torch CUDA build" if n else "no GPU: training runs on CPU")
        n = torch.cuda.device_count()
        x = torch.ones(1024, device="cuda") * 2  # a real kernel launch
        torch.cuda.synchronize()
        assert float(x.sum()) == 2048.0
        names = ", ".join(torch.cuda.get_device_name(i) for i in range(n))
        return Check("cuda", "CUDA context", OK, f"{n} device(s) ran a kernel: {names}")
    except Exception as exc:
        return Check("cuda", "CUDA context", FAIL, f"{type(exc).__name__}: {exc}"[:300],
                     "run `nvidia-smi`; reinstall torch for the driver's CUDA version")


def check_jupyter(ctx: Context) -> list[Check]:
    """ipywidgets vs the JupyterLab widget extension; the deprecated pynvml package."""
    ipw, ext = _version("ipywidgets"), _version("jupyterlab_widgets")
    want = {"8": "3", "7": "1"}.get((ipw or "?")[0])
    if ipw is None:
        c = Check("jupyter", "widgets", WARN, "ipywidgets not installed", "`pip install ipywidgets`")
    elif ext is None or want is None or not ext.startswith(want + "."):
        c = Check("jupyter", "widgets", FAIL, f"ipywidgets {ipw}, jupyterlab_widgets {ext}",
                  f"widgets will not render: `pip install 'jupyterlab_widgets=={want or '3'}.*'` and restart "
                  "JupyterLab")
    else:
        c = Check("jupyter", "widgets", OK, f"ipywidgets {ipw}, jupyterlab_widgets {ext}")
    old = _version("pynvml")
    return [c, Check("nvml", "deprecated pynvml package", WARN if old else OK,
                     f"pynvml {old} installed" if old else "absent (nvidia-ml-py provides pynvml)",
                     "`pip uninstall -y pynvml` (nvidia-ml-py is the maintained binding)" if old else "")]


def check_hf(ctx: Context) -> list[Check]:
    """TOKENIZERS_PARALLELISM, Hugging Face offline mode and the hub cache directory."""
    e = ctx.env
    tp = e.get("TOKENIZERS_PARALLELISM")
    out = [Check("hf", "TOKENIZERS_PARALLELISM", OK if tp is not None else WARN, tp or "unset",
                 "" if tp is not None else "`export TOKENIZERS_PARALLELISM=false` (DataLoader workers fork after "
                 "the Rust tokenizer used threads: warnings or deadlock)")]
    offline = e.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on")
    # precedence as documented by huggingface_hub.constants
    home = e.get("HF_HOME") or os.path.join(e.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
    cache = e.get("HF_HUB_CACHE") or os.path.join(home, "hub")
    probe = cache
    while probe and not os.path.exists(probe):
        probe = os.path.dirname(probe)
    writable = bool(probe) and os.access(probe, os.W_OK)
    out.append(Check("hf", "Hugging Face hub", OK if writable else WARN,
                     f"offline={'yes' if offline else 'no'}, cache {cache}" + ("" if writable else " (not writable)"),
                     "" if writable else "set HF_HOME to a writable directory"))
    return out


def check_nbkit(ctx: Context) -> list[Check]:
    """nbkit's own settings: ``NBKIT_SCALE`` is a known preset; ``NBKIT_RUNS_DIR`` can be written."""
    e = ctx.env
    raw = e.get("NBKIT_SCALE", "")
    if not raw:
        scale = Check("nbkit", "NBKIT_SCALE", OK, "unset (gpu when CUDA is usable, else cpu)")
    elif scale_name(raw) in SCALES:
        scale = Check("nbkit", "NBKIT_SCALE", OK, raw)
    else:
        scale = Check("nbkit", "NBKIT_SCALE", FAIL, f"{raw!r} is not a scale: every notebook stops",
                      f"`export NBKIT_SCALE=cpu` (one of {', '.join(SCALES)}) or unset it")
    runs = e.get("NBKIT_RUNS_DIR")
    if not runs:
        return [scale, Check("nbkit", "NBKIT_RUNS_DIR", OK, "unset (runs/ in the working directory)")]
    probe = os.path.abspath(os.path.expanduser(runs))
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)  # the folder that `mkdir -p` would create it in
    try:  # a real attempt: access() says yes to root even on /proc
        os.rmdir(tempfile.mkdtemp(prefix=".nbkit-doctor-", dir=probe))
        writable = True
    except OSError:
        writable = False
    return [scale, Check("nbkit", "NBKIT_RUNS_DIR", OK if writable else FAIL,
                         runs + ("" if writable else f" (cannot create or write: {probe} is not a writable folder)"),
                         "" if writable else "set NBKIT_RUNS_DIR to a writable folder, or unset it for ./runs")]


ALL_CHECKS = (check_os, check_python, check_torch, check_gpus, check_jupyter, check_hf, check_nbkit)


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


def import_failure(module: str, exc: BaseException | str, env: dict[str, str] | None = None) -> tuple[str, str]:
    """``(value, fix)`` for a line about ``import module`` raising ``exc``: the file Python imported, its
    ``sys.path`` entry and why it is there; a file outside every installed distribution of ``module`` is named
    as shadowing it. Never raises (a failed diagnosis names its own failure).
    """
    what = exc if isinstance(exc, str) else repr(exc)
    pip = {"pynvml": "nvidia-ml-py"}.get(module, module)
    try:
        origin = module_origin(module)
        installed = installed_locations(module)
    except Exception as diag:  # noqa: BLE001  (a diagnosis must not crash the report: it names its own failure)
        return (f"`import {module}` failed: {what}; locating {module} failed too ({type(diag).__name__}: {diag})",
                f"`{sys.executable} -m pip install --force-reinstall {pip}`")
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
