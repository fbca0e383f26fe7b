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
# # 04 · GPU profiling: where does the training time go?
#
# Open this notebook when training is slower than it should be. Everything below times the training loop's own
# step, `Loop.train_step`: the step `Loop.fit()` runs in notebook 02, with its AdamW (fused on a GPU), LR schedule,
# gradient clipping, precision rule, loss, sparse MLM head and MLM collator, on **your** model from notebook 02. It
# measures:
#
# 1. a `torch.profiler` trace of a few training steps and the most expensive operators,
# 2. what the device can do at best (matmul, attention, host-to-device copies) next to its datasheet peak,
# 3. how one step splits into data loading, forward, backward and optimizer, with tokens/s and MFU,
# 4. what each knob changes (workers, batch size, bf16, attention, `torch.compile`),
# 5. a verdict: input-, compute-, memory- or launch-overhead-bound, and the changes that help most.
#
# On a CPU the same code runs (CPU profiler, GFLOP/s instead of % of peak); each step says what would differ on a GPU.

# %% [markdown]
# **Parameters.** The values you are most likely to change have a name here; every other size goes in `overrides`, by its `ProfileConfig` field name (`profile_steps`, `bench_sizes`, `timing_steps`, `sdpa_seq_lens`, `worker_values`, ...: the table below lists them all). Plain values only, so papermill can set each (`-p scale cpu -p batch_size 16`; the dict as YAML: `-y "overrides: {timing_steps: 5}"`); `None` keeps the recipe's value (the scale sets the sizes: `nbkit/recipes/scales.py`). A name in `overrides` that is no field stops the next cell and names the close ones.

# %% tags=["parameters"]
scale = None               # "smoke", "cpu" or "gpu"; None: $NBKIT_SCALE (else gpu with CUDA, else cpu)
model = None               # BERT preset when notebook 02 saved no model (built from config)
init = None                # the model to time (a folder); None: notebook 02's at this scale, else built from config
seq_len = None             # tokens per sequence
batch_size = None          # sequences per step
overrides = {}             # any other ProfileConfig field by name, e.g. {"timing_steps": 5, "compile_values": [False]}

# %% [markdown]
# **The recipe.** One object with every size below (the cpu scale runs fewer, smaller steps: each costs seconds on 2 cores). Then device and precision (bf16 on GPUs with compute capability 8.0+, fp16 with a loss scaler
# on older GPUs, fp32 on a CPU), where results go,
# and the model: the checkpoint notebook 02 saved, or, if there is none, the same architecture built from config.
# `step_loop(model, base)` wraps a model in a training `Loop` whose data are random token ids (step time depends on
# shapes, not on which tokens) masked by the real MLM collator; `base` holds the knobs the loop gets.

# %%
import pandas as pd
import torch

from nbkit import jsonio
from nbkit.profiling import StepConfig, model_factory, step_loop
from nbkit.recipes.profiling import ProfileConfig
from nbkit.train.precision import choose_precision

cfg = ProfileConfig.for_scale(scale, model=model, init=init, seq_len=seq_len, batch_size=batch_size, **overrides)
cfg.table()

# %%
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
precision = choose_precision("auto", device).name    # the training loop's rule: bf16 on sm80+, fp16, fp32 on CPU
out_dir = cfg.run_dir()   # e.g. "profiling-profile_steps3" with a field overridden
make_model, how = model_factory(cfg.model, cfg.vocab_size, cfg.seq_len, cfg.model_dir())  # notebook 02's, or from config
vocab_size = make_model().config.vocab_size
# torch.compile: inductor (real kernel fusion) on a GPU; the 'eager' backend elsewhere
# only exercises tracing and recompilation counting (inductor's C++ build is minutes on 2 cores).
compile_backend = "inductor" if device.type == "cuda" else "eager"
base = StepConfig(batch_size=cfg.batch_size, seq_len=cfg.seq_len, precision=precision, mlm_head="masked",
                  num_workers=0, steps=cfg.timing_steps, warmup=cfg.warmup_steps, compile_backend=compile_backend)
print(f"device={device}, precision={precision}, model: {how}, vocab={vocab_size}")
print(base)
print(f"results go to {out_dir}")

# %% [markdown]
# ## 1. Profile a few training steps
#
# `profile_steps` runs the step under `torch.profiler` with a schedule: 1 step ignored, 1 warm-up step traced
# and discarded, then `profile_steps` recorded steps. `make_step_fn(loop)` is `loop.train_step` on a few windows of
# batches collated once, so the trace holds the step, not the collator. Look at the first line: on a GPU it says whether kernel times were recorded at all
# (many containers block the CUDA profiler; the message names the fix).

# %%
from nbkit.profiling import format_table, make_step_fn
from nbkit.profiling import profile_steps as run_profiler

step_fn = make_step_fn(step_loop(make_model(), base, device=device))   # the loop's own train_step
prof = run_profiler(step_fn, out_dir, wait=1, warmup=1, active=cfg.profile_steps, device=device)
print(prof.kernel_check.message)
if prof.top_device:
    print(format_table(prof.top_device, "top operators by self GPU time (ms, all active steps)"))
print(format_table(prof.top_cpu, "top operators by self CPU time (ms, all active steps)"))

# %% [markdown]
# **What to look at.** On a GPU, matmuls (`aten::addmm`, `aten::mm`, gemm kernels) should lead the GPU table; if
# elementwise ops, `layer_norm` or copies lead, the step is memory-bound. In the CPU table, a large `ProfilerStep*`
# self time is Python overhead between operators. Open the trace file at https://ui.perfetto.dev to see gaps
# between kernels (idle GPU).

# %%
print("trace:", prof.trace_path)
print(f"peak memory: {prof.peak_memory_mib:.0f} MiB", *prof.notes)
print("memory snapshot (drop on https://pytorch.org/memory_viz):", prof.memory_snapshot_path)
prof.stats

# %% [markdown]
# ## 2. What the device can do: matmul TFLOP/s beside the peak
#
# A square matmul costs 2 n³ FLOPs. On a GPU the `pct_of_peak` column compares with NVIDIA's dense datasheet
# figure (see `nbkit.models.flops.PEAK_TFLOPS`); large bf16 matmuls on an H100 reach 60-80 % of it. TF32 exists only on
# CUDA; on a CPU, read `gflops` (there is no peak in the table for CPUs).

# %%
from nbkit.profiling import h2d_bench, matmul_bench, sdpa_bench

mm = pd.DataFrame(matmul_bench(cfg.bench_sizes, device=device))
mm[["n", "precision", "ms", "gflops", "tflops", "peak_tflops", "pct_of_peak", "status"]]

# %% [markdown]
# **Attention backends.** The same scaled-dot-product attention with each backend forced (BERT-base shapes:
# 12 heads of 64; fewer heads off the GPU scale). On a GPU in bf16, flash and memory-efficient should beat `math` clearly at length 512.
# On a CPU the memory-efficient kernel does not exist: the row gives PyTorch's reason instead of a number.

# %%
sd = pd.DataFrame(sdpa_bench(cfg.sdpa_seq_lens, batch=cfg.sdpa_batch, heads=cfg.sdpa_heads, precision=precision,
                             device=device))
sd

# %% [markdown]
# **Host-to-device copies.** Pinned (page-locked) host memory lets the GPU copy by DMA; pageable memory goes through
# a staging buffer. The peak is the PCIe link NVML reports (Gen4 x16: 31.5 GB/s, Gen5 x16: 63 GB/s). On a CPU-only
# machine there is nothing to copy to.

# %%
pd.DataFrame(h2d_bench(cfg.h2d_mib, device=device))

# %% [markdown]
# ## 3. One training step, phase by phase
#
# `train_step` calls a `mark(phase)` hook as each phase starts; `measure_steps` times between the marks (on a GPU with
# `torch.cuda.synchronize()` at each): data (collating the window, copying it to the device), forward (with the loss),
# backward, optimizer (clipping, the loop's one host sync, the update, the LR schedule). Tokens/s counts every
# input token; MFU = tokens/s × FLOPs per token / peak, with the loop's own FLOP count: 6 N + 12 L T d per token for the
# encoder (N weights in matmuls, L layers, T sequence length, d hidden size) plus the MLM head on the rows it ran on
# (see `nbkit.models.flops`). MFU is blank on a CPU.

# %%
from nbkit.profiling import gpu_utilization_during, measure_steps

loop = step_loop(make_model(), base, device=device)
step, telemetry = gpu_utilization_during(lambda: measure_steps(loop, base))
phases = pd.DataFrame({"ms": [step[f"{p}_s"] * 1e3 for p in ("data", "forward", "backward", "optimizer")],
                       "share": [step[f"{p}_share"] for p in ("data", "forward", "backward", "optimizer")]},
                      index=["data", "forward", "backward", "optimizer"])
print(f"{step['tokens_per_s']:.0f} tokens/s, MFU {step['mfu']}, GPU telemetry: {telemetry}")
phases

# %% [markdown]
# **What to look at.** Backward should cost about twice the forward (it computes two matmuls per forward one).
# A large `data` share means the GPU waits for batches; a large `optimizer` share on a small model is launch
# overhead (the loop already uses the fused AdamW on CUDA).

# %% [markdown]
# ## 4. What each knob changes
#
# Each table changes one setting and keeps the rest, each row on a fresh model and loop; `speedup` is tokens/s
# relative to the first row.
# At smoke scale (two timed steps of a tiny model on a shared CPU) the numbers are mostly noise: the point is that
# the code runs. At `cpu` and `gpu` scale each row averages ten steps after warm-up.
# Compilation counts come from TorchDynamo: `recompiles` > 0 means shapes or guards changed after the first step.
# `mlm_head`: `all` runs the MLM head and softmax on every position (as `BertForMaskedLM` does), `masked` only on
# the ~15 % of positions that carry a label (what the nbkit loop does in eager mode; same loss and gradients).

# %%
from nbkit.profiling import ablation

cols = ["value", "step_s", "data_share", "tokens_per_s", "mfu", "speedup"]
tables = {
    "num_workers": ablation(make_model, base, "num_workers", cfg.worker_values, device=device),
    "batch_size": ablation(make_model, base, "batch_size", (max(cfg.batch_size // 2, 1), cfg.batch_size),
                           device=device),
    "precision": ablation(make_model, base, "precision",
                          ("fp32", "bf16" if precision == "fp32" else precision), device=device),
    "attn": ablation(make_model, base, "attn", ("sdpa", "eager"), device=device),
    "mlm_head": ablation(make_model, base, "mlm_head", ("all", "masked"), device=device),
}
for name, rows in tables.items():
    print(f"--- {name}")
    print(pd.DataFrame(rows)[cols].to_string(index=False))

# %% [markdown]
# **`torch.compile`.** The first step compiles (seconds to minutes), so it sits in the warm-up; the table shows
# the steady state and how many graphs were compiled. On a CPU here the `eager` backend only traces (no fusion):
# expect no gain; on a GPU inductor fuses the elementwise work around the matmuls. At smoke scale only the
# uncompiled row runs (compilation would dominate CI time; `tests/test_stepanalysis.py` covers it).

# %%
tables["compile"] = ablation(make_model, base.replace(warmup=3), "compile", cfg.compile_values, device=device)
pd.DataFrame(tables["compile"])[cols + ["compiled_graphs", "recompiles", "graph_breaks"]]

# %% [markdown]
# ## 5. Verdict
#
# The rules in `nbkit.profiling.diagnosis` (thresholds are named constants with their source) combine the phase split,
# the operator mix, the GPU telemetry and the measured tables. Changes are ranked by measured speedup first;
# two kinds of measured speedup are listed in the evidence as noise instead of recommended: one no larger than the
# spread of the unchanged configuration (every table re-measures it), and one larger than the phase it acts on
# allows (Amdahl's law: removing a phase with share *s* gives at most 1 / (1 − *s*)).

# %%
from nbkit.profiling import diagnose

all_rows = [row for rows in tables.values() for row in rows]
verdict = diagnose(step, prof.stats, telemetry, all_rows)
print(verdict.text())

# %% [markdown]
# **Save the numbers** so you can compare after changing something: `results.json` in the profiling run directory.

# %%
results = {"scale": cfg.scale, "device": str(device), "precision": precision, "model": how,
           "step": step, "telemetry": telemetry, "op_stats": prof.stats,
           "matmul": mm.to_dict("records"), "sdpa": sd.to_dict("records"), "ablations": tables,
           "verdict": {"bound": verdict.bound, "evidence": verdict.evidence,
                       "changes": [vars(c) for c in verdict.changes]}}
jsonio.write_json(out_dir / "results.json", results, indent=1)   # strict JSON: NaN -> null
print("wrote", out_dir / "results.json")

# %% [markdown]
# ## On a GPU, what differs
#
# - The GPU table fills in: kernel names (gemm, flash attention, elementwise) with their self time; the trace shows
#   CPU launches and GPU kernels on separate rows, so idle gaps are visible.
# - `pct_of_peak` and MFU appear. Well-tuned BERT training reaches 40-50 % MFU on an H100/H200 (MLPerf).
#   `bench/gpu_check.py` measures the same `Loop.train_step` for BERT-base at length 128, bf16, batch 256 on an H200
#   (the README's "On a GPU" table). An earlier, separate step (plain AdamW, no clipping or schedule, full MLM head)
#   measured 28 % MFU there, with ~1,400 kernels per step and more than half the GPU time in memory-bound kernels:
#   the kind of profile this notebook shows you how to read.
# - bf16 and flash attention usually give the largest gains; on a CPU they often slow things down (no tensor cores).
# - Peak memory is the CUDA allocator's peak, and a memory snapshot is written for https://pytorch.org/memory_viz.
