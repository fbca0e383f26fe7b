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
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · BERT masked-LM pretraining
#
# We pretrain a BERT from scratch with **masked language modelling (MLM)**: 15% of the tokens in each block are hidden and the model learns to predict them. The text is the scale's pretraining corpus: the *training* reviews that notebook 03 will classify (continuing MLM on in-domain text, "domain-adaptive pretraining", Gururangan et al. 2020), plus People's Daily and optional news at larger scales. Along the way:
#
# - the corpus becomes fixed-length **blocks** (never longer than the position table),
# - the **nbkit training loop** handles precision (bf16 on modern GPUs, fp32 on CPU), gradient accumulation, checkpoints and resume,
# - a **live loss plot** and the **GPU monitor** show what is happening while it trains,
# - the result (checkpoint + tokenizer + `metrics.json`) lands under the runs directory for notebook 03.

# %% [markdown]
# ## Parameters
# Plain values only, so papermill can override each (`-p scale cpu -p seed 3 -p max_steps 100`); `None` means "the scale's value" (`nbkit/pipeline/scale.py`). The next cell resolves the scale by name (`None`: `NBKIT_SCALE`, else `gpu` when CUDA is usable, else `cpu`) and applies the overrides.

# %% tags=["parameters"]
scale = None              # "smoke", "cpu" or "gpu"; None: $NBKIT_SCALE (else gpu with CUDA, else cpu)
seed = None               # data order, masking and the corpus split; None: the scale's (0)
corpus_lines = None       # People's Daily lines (as in notebook 01); None: the scale's; "all": every line
model_preset = None       # tiny / mini / small / base
block_size = None         # tokens per block, [CLS] and [SEP] included
batch_size = None         # blocks per micro-batch
grad_accum_steps = None   # micro-batches per optimizer step
max_steps = None          # optimizer steps
learning_rate = None      # peak learning rate (linear warm-up and decay)
eval_every = None         # steps between held-out evaluations (and checkpoints)
precision = "auto"        # auto / bf16 / fp16 / fp32
corpus = None             # your corpus: a prepared store, or files/globs/folders to prepare (docs/corpus.md); None: the bundled mix

# %%
from nbkit import models, pipeline, text

scale = pipeline.resolve_scale(scale, seed=seed, corpus_lines=corpus_lines, model=model_preset, block_size=block_size,
                               mlm_batch_size=batch_size, mlm_grad_accum=grad_accum_steps, mlm_steps=max_steps,
                               mlm_lr=learning_rate, mlm_eval_every=eval_every)
seed, model_preset, block_size, batch_size = scale.seed, scale.model, scale.block_size, scale.mlm_batch_size
grad_accum_steps, max_steps, learning_rate, eval_every = (scale.mlm_grad_accum, scale.mlm_steps, scale.mlm_lr,
                                                          scale.mlm_eval_every)

store = None if corpus is None else pipeline.corpus_store(corpus, scale_name=scale.name)   # prepared once, then reused
if store is None:
    tokenizer = pipeline.load_tokenizer(scale)      # from notebook 01 (trained now if missing)
    out_dir = pipeline.step_dir(scale.name, "mlm" + pipeline.run_tag(scale))   # "mlm-seed3" with overrides: no resume of another run
else:
    from nbkit.corpus import store_tokenizer
    from nbkit.pipeline.scale import cuda_usable

    tokenizer = store_tokenizer(store)              # the tokenizer the store was tokenized with
    n_tokens = pipeline.store_summary(store)["n_tokens_train"]
    scale, plan = pipeline.scale_for_corpus(scale, n_tokens, "cuda" if cuda_usable() else "cpu")
    print(pipeline.plan_text(plan))
    model_preset, batch_size, grad_accum_steps = scale.model, scale.mlm_batch_size, scale.mlm_grad_accum
    max_steps, learning_rate, eval_every = scale.mlm_steps, scale.mlm_lr, scale.mlm_eval_every
    out_dir = pipeline.step_dir(scale.name, "mlm-" + store.name)
print(f"scale={scale.name}  seed={seed}  vocab={len(tokenizer):,}  -> {out_dir}")

# %% [markdown]
# ## 1. Corpus → MLM blocks
# Without `corpus`, the corpus mixes the sources of the scale (`mlm_mix`: source and repeat weight). Texts found twice, in one source or across two, count once; validation and test reviews are excluded, so notebook 03's evaluation stays honest. The table says what went in.
#
# With `corpus`, your text was prepared once into a **store** (token ids and word starts on disk, a fixed held-out share chosen by hash; `docs/corpus.md`) and the run above was sized for its token count. For a 2 GB corpus expect the preparation to take time and disk as in the README's own-data section; training then reads blocks straight from disk, in constant memory. The summary says what went in and what was dropped.

# %%
if store is None:
    corpus_splits, mix = pipeline.pretraining_corpus(scale)   # jieba marks word boundaries where the corpus has none
    what_went_in = mix.table()
else:
    what_went_in = pipeline.store_summary(store)
what_went_in

# %% [markdown]
# Texts are tokenized, concatenated and cut into blocks of `block_size` tokens: `[CLS] … [SEP]`. Packing wastes no compute on padding. 5 % of the texts are held out for the MLM loss.

# %%
blocks = (pipeline.mlm_blocks(scale, tokenizer, block_size, corpus=corpus_splits) if store is None
          else pipeline.store_blocks(store, block_size))        # store: read from disk block by block
print({k: len(v) for k, v in blocks.items()}, "blocks of", block_size, "tokens")
print(tokenizer.decode(blocks["train"][0]["input_ids"][:40]))

# %% [markdown]
# The collator masks 15% of the tokens (80% `[MASK]`, 10% a random token, 10% unchanged), choosing **whole words** (People's Daily's own boundaries, jieba's elsewhere), as Chinese BERT-wwm does. Padding and special tokens are never chosen; `labels` is `-100` wherever there is nothing to predict.

# %%
collator = text.MLMCollator(tokenizer, mlm_probability=0.15)
batch = collator([blocks["train"][i] for i in range(2)])
print({k: tuple(v.shape) for k, v in batch.items()})
print(tokenizer.decode(batch["input_ids"][0][:40]))
print(f"masked fraction: {(batch['labels'] != -100).float().mean():.2%}")

# %% [markdown]
# ## 2. Build BERT from config
# No download: the architecture comes from a preset, the vocabulary from our tokenizer. The initial weights are drawn from the scale's seed, so running the notebook again gives the same numbers.

# %%
model = models.build_mlm_model(model_preset, tokenizer, block_size, seed=scale.seed)
print(f"{model_preset}: {models.count_parameters(model) / 1e6:.1f} M parameters, "
      f"hidden={model.config.hidden_size}, layers={model.config.num_hidden_layers}")

# %% [markdown]
# ## 3. Train
# The loop picks the precision itself and prints why. The plot below updates in place while it trains (loss, learning rate, tokens/s); the GPU monitor records utilisation and memory on the same time axis. Checkpoints go to `checkpoints/` (written atomically; the newest complete one wins). Rerunning this cell **resumes** from it, and a finished run stays finished: delete `checkpoints/` (or pass `resume=False` to `pretrain_config`) to start over.

# %%
from nbkit import GpuMonitor

config = pipeline.pretrain_config(
    scale, out_dir, max_steps=max_steps, batch_size=batch_size, grad_accum_steps=grad_accum_steps,
    lr=learning_rate, precision=precision, eval_every=eval_every, checkpoint_every=eval_every,
    **({"warmup_ratio": plan["warmup_ratio"]} if store is not None else {}),   # the plan's warm-up for your corpus
)
monitor = GpuMonitor(interval=1.0)
monitor

# %%
from nbkit import LivePlot
from nbkit.train import Loop

plot = LivePlot(out_dir=out_dir)                 # also saved as loss.png
telemetry = monitor.telemetry()          # GPU samples on the loop's time axis
loop = Loop(model, config, blocks["train"], blocks["validation"], collate_fn=collator,
            callbacks=[plot, telemetry, *pipeline.pretrain_callbacks(scale)])   # gpu: stop when held-out loss stalls
untrained = loop.evaluate()                      # held-out loss before any training, for comparison
result = loop.fit()

# %% [markdown]
# ## 4. Held-out loss and perplexity
# Perplexity = exp(loss) on the masked tokens of held-out blocks. A model that learned nothing sits near the vocabulary size; lower is better.

# %%
first, last = pipeline.first_and_last_eval(result.history)
print(f"step     0: eval loss {untrained['eval_loss']:.3f}  perplexity {untrained['eval_perplexity']:8.1f}")
print(f"step {first['step']:>5}: eval loss {first['eval_loss']:.3f}  perplexity {first['eval_perplexity']:8.1f}")
print(f"step {last['step']:>5}: eval loss {last['eval_loss']:.3f}  perplexity {last['eval_perplexity']:8.1f}")
print(f"uniform guess over {len(tokenizer):,} tokens: perplexity {len(tokenizer):,}")

# %% [markdown]
# Did the model learn context? A masked LM that only learnt how frequent each token is stalls at the corpus's **unigram entropy** (the "unigram plateau"); fine-tuning from it is no better than from random weights. The check below compares that entropy with the held-out loss **at the targets replaced by `[MASK]`**, where only context can help: the loss over all targets also counts the 10 % left unchanged, which the model can copy from its input, and so looks better than the model is. It names the fix when the run is stuck.

# %%
print(pipeline.plateau_check(last, blocks["train"], tokenizer).text())   # last: the final evaluation's metrics

# %% [markdown]
# Was the GPU busy? The monitor's recording says whether the run looked input-bound (low utilisation with memory to spare) and what to change.

# %%
monitor.stop()
telemetry.plot()
print(telemetry.advice or "No sign of an input-bound run (or no GPU samples to judge from).")

# %% [markdown]
# ## 5. Save for fine-tuning
# The model directory loads with `from_pretrained`; `metrics.json` is the machine-readable summary.

# %%
summary = pipeline.save_pretraining(loop, result, tokenizer, out_dir, scale, untrained=untrained)
{k: summary[k] for k in ("steps", "train_tokens", "untrained_eval_loss", "eval_loss", "eval_perplexity",
                         "tokens_per_s", "device", "precision")}

# %% [markdown]
# ## 6. What does this pretraining buy? (measured)
# `bench/pretrain_value.py` fine-tunes the same classifier from random weights and from checkpoints of this recipe after more and more pretraining, 3 seeds each, and compares test accuracy with a paired bootstrap 95 % interval. Two recorded runs ship with nbkit: the `cpu` recipe on a 2-core CPU (left) and the `gpu` recipe, a wider model reading 128-token reviews, on one H200 (right). On the CPU the gain stays near one point inside the 15-minute budget, and the left curve is what a longer CPU run buys; on the GPU it passes the two-point line once pretraining has seen a few tens of millions of tokens, in under a minute. The same GPU recipe on a 2-core CPU would need about 140 CPU-minutes for those tokens (its measured speed is in `docs/pretraining.md`), which is why the `cpu` preset stays small. `docs/pretraining.md` has every experiment, including what did not work.

# %%
import matplotlib.pyplot as plt

from nbkit.pipeline import pretrain_value

fig, axes = plt.subplots(1, 2, figsize=(11, 3.5), sharey=True)
for ax, run in zip(axes, ("cpu", "gpu")):
    stats = pretrain_value.load_recorded(run=run)
    pretrain_value.plot_gain(stats, ax=ax).set_title(f"recorded {run} run")
    print(pretrain_value.headline(stats, machine="2-core CPU"))
plt.show()

# %% [markdown]
# ## 7. Optional: several GPUs with `torchrun`
# The same training code runs under DistributedDataParallel. From a notebook, `nbkit.train.launch` starts `torchrun` in a separate process (the kernel itself is never forked) and streams its metrics into a live plot. Skipped with fewer than two GPUs.

# %%
from nbkit.train.launch import launch, visible_gpus

n_gpus = visible_gpus()
if n_gpus < 2:
    print(f"{n_gpus} GPU(s) visible: multi-GPU launch skipped.")
else:
    job = launch("nbkit.jobs.pretrain", nproc_per_node=n_gpus, on_metrics=LivePlot(out_dir=out_dir / "ddp"),
                 args=["--scale", scale.name, "--output-dir", str(out_dir / "ddp"),
                       "--batch-size", str(max(1, batch_size // n_gpus)),
                       *(["--corpus", str(store)] if store is not None else [])])
    job.wait()

# %% [markdown]
# **Next:** `03_sentiment_finetuning` starts from this checkpoint.
