# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     formats: ipynb,py:percent
#     notebook_metadata_filter: kernelspec,-jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 00 · Environment check: is my GPU really being used?
#
# This notebook checks every layer between you and the GPU, in order: OS and container,
# Python, the torch build, CUDA runtime vs driver, cuDNN and NCCL, each GPU, NVML (the
# driver's monitoring library), Jupyter widgets and Hugging Face settings. Then it starts a
# live monitor and runs a small matrix multiply on each device, so you can watch the GPU work.
#
# Nothing here downloads anything. The same report runs in a terminal: `nbkit doctor`
# (`--json` for scripts; exit code 1 when a line fails).

# %% [markdown]
# **Parameters.** Plain values only (papermill overrides them: `-p scale cpu`); `None` keeps the recipe's value. The scale (`smoke`, `cpu` or `gpu`; `None`: `NBKIT_SCALE`, else `gpu` when CUDA is usable, else `cpu`) sets the matrix sizes (notebook 04's `bench_sizes`); `monitor_interval` is the sampling period of the live monitor in seconds.

# %% tags=["parameters"]
scale = None              # "smoke", "cpu" or "gpu"; None: $NBKIT_SCALE (else gpu with CUDA, else cpu)
bench_sizes = None        # square matmul sizes n (an n×n @ n×n product each), e.g. [256, 512]; None: the scale's
monitor_interval = 1.0    # seconds between monitor samples
watch_seconds = 3.0       # keep each device busy this long so the monitor visibly moves

# %% [markdown]
# Derived values: the profiling recipe's sizes with the overrides above; the largest size is the one we report; `repeats` keeps each timing above timer noise without making the smoke run slow.

# %%
from nbkit.recipes import ProfileConfig

cfg = ProfileConfig.for_scale(scale, bench_sizes=bench_sizes)
matmul_n = max(cfg.bench_sizes)
repeats = 3 if cfg.scale == "smoke" else 20
print(f"matmul n={matmul_n}  repeats={repeats}")
cfg.table().loc[["scale", "bench_sizes"]]

# %% [markdown]
# ## 1. The report
#
# Each line is **OK**, **WARN** (works, but something is slower or fragile) or **FAIL** (fix it
# before training). `cuda=True` also creates a CUDA context and launches one tiny kernel, the
# only way to be sure torch can really use the GPU. Look at the `torch`, `CUDA runtime vs
# driver`, `NVML` and `GPU` lines first.

# %%
from nbkit import env

rep = env.report(cuda=True)
rep

# %% [markdown]
# ## 2. What to do for each FAIL and WARN
#
# The fixes come from the report itself, FAIL lines first. On a CPU-only machine expect WARN
# lines for the missing GPU: training still works there, only slower.

# %%
for c in rep.problems:
    print(f"{c.status:<4} {c.name}: {c.value}\n     fix: {c.fix}")
print("nothing to fix" if not rep.problems else f"{len(rep.problems)} line(s) to look at")

# %% [markdown]
# ## 3. The live monitor
#
# Per GPU: utilisation and memory bars, temperature, power, clocks, PCIe traffic, a short
# utilisation history and the processes using the GPU (PIDs that belong to the host are shown as
# such inside a container). Without a GPU it shows CPU and RAM and why there is no GPU. It
# samples on a background thread, so it keeps updating while the next cells run; the header's
# sample counter shows it is alive. It never creates a CUDA context.

# %%
from nbkit import GpuMonitor

monitor = GpuMonitor(interval=monitor_interval)
monitor

# %% [markdown]
# **Watch it move.** The next cell keeps each device busy with matmuls for `watch_seconds`. The monitor's sample counter and clock advance every second; on a GPU, utilisation should jump towards 100 % and the SM clock and power rise, on a CPU the CPU % goes up. A GPU that stays at 0 % here is not the one doing the work.

# %%
import torch

for dev in ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]:
    busy = env.keep_busy(dev, seconds=watch_seconds)
    print(f"{dev}: {busy['matmuls']} matmuls in {busy['seconds']:.1f} s ({busy['gflops']:.1f} GFLOP/s)")

# %% [markdown]
# ## 4. A small matmul on each device
#
# Throughput of an n×n @ n×n product (2n³ floating-point operations) on the CPU and on every
# CUDA device, timed by the same benchmark notebook 04 uses (`nbkit.profiling.matmul_bench`). While
# it runs, watch the monitor above: utilisation should jump and memory used should grow a little.
# On GPUs we also time bf16, the precision training uses on sm_80+, and show the share of the
# GPU's datasheet peak.

# %%
import torch

from nbkit.profiling import matmul_bench

devices = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
for dev in devices:
    precisions = ("fp32", "bf16") if dev.startswith("cuda") else ("fp32",)
    for r in matmul_bench((matmul_n,), precisions, device=dev, repeats=repeats):
        peak = f"  {r['pct_of_peak']:5.1f} % of peak" if r["pct_of_peak"] is not None else ""
        speed = f"{r['ms']:8.2f} ms  {r['gflops']:10.2f} GFLOP/s" if r["status"] == "ok" else r["status"]
        print(f"{dev:<7} {r['precision']:<5} n={r['n']:<5} {speed}{peak}")

# %% [markdown]
# ## 5. Stop the monitor
#
# The widget keeps its last reading. The history (`monitor.samples`) is what
# `nbkit.gpu.telemetry.TelemetryCallback` records beside training in notebook 02, so GPU
# utilisation sits on the same time axis as the loss.

# %%
monitor.stop()
print(f"{len(monitor.samples)} samples kept; NVML state: {monitor.state.name}")

# %% [markdown]
# ## Next
#
# If the report has no FAIL line, continue with `01_tokenizing`. If the GPU lines are missing on a
# GPU machine, fix the container first (`--gpus all`), then rerun this notebook.
