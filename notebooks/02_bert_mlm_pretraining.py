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
# We pretrain a BERT with **masked language modelling (MLM)**: 15 % of the tokens in each block are hidden and the model learns to predict them from the rest. The text is the *training* reviews that notebook 03 will classify: continuing MLM on in-domain text ("domain-adaptive pretraining", Gururangan et al. 2020) is what makes the pretrained model useful there. (The `smoke` scale adds a slice of People's Daily so both corpus code paths run in CI; `corpus` below swaps in your own text.)
#
# By default the model starts from random weights. Where practitioners start is a **published checkpoint**: `init` names one (a local folder, or a Hub name such as `bert-base-chinese` when it is cached or you are online), and this notebook then *continues* its pretraining on the reviews with its own tokenizer and continued-pretraining defaults (`-p init bert-base-chinese`; docs/pretraining.md, "From a published checkpoint").
#
# Every step is one function of the pretraining recipe, `nbkit.recipes.pretraining`, called cell by cell; `python -m nbkit.jobs.pretrain` and the benchmarks run the same functions. What did and did not work while choosing the recipe, with the measured numbers, is in [docs/pretraining.md](../docs/pretraining.md).

# %% [markdown]
# ## Parameters
# The values you are most likely to change have a name here; every other setting of the recipe goes in `overrides`, by its field name (`PretrainConfig`'s: the names `python -m nbkit.jobs.pretrain` takes as flags, `--weight-decay` for `weight_decay`). Plain values only, so papermill can set each: `-p seed 3 -p max_steps 100`, and the dict as YAML: `-y "overrides: {lr: 0.002, batch_size: 32}"`. `None` keeps the recipe's value (the scale's defaults, each beside its reason: `nbkit/recipes/scales.py`). A name in `overrides` that is no field stops the next cell and names the close ones (`max_step (did you mean max_steps?)`); a name given both ways is refused too.

# %% tags=["parameters"]
scale = None              # "smoke", "cpu" or "gpu"; None: $NBKIT_SCALE (else gpu with CUDA, else cpu)
seed = None               # weights, data order, masking, the corpus split; None: the scale's (0)
model = None              # BERT preset: tiny / narrow / mini / small / base
max_steps = None          # optimizer steps
corpus = None             # your corpus: a prepared store, or files/globs/folders to prepare (docs/corpus.md); None: the bundled mix
init = None               # continue a published BERT masked LM: a folder or Hub name ("bert-base-chinese"); None: random weights
overrides = {}            # any other PretrainConfig field by name, e.g. {"lr": 0.002, "batch_size": 32}; the table below lists them all

# %% [markdown]
# The whole recipe is one object: the scale's defaults plus what you set above (with `init`, the continued-pretraining defaults: a low learning rate, the checkpoint's model). The run's folder is named after what you set (`cfg.run_dir()`: `runs/<scale>/mlm` for the scale's recipe, the store's name with `corpus`, then each override, as `python -m nbkit.jobs.pretrain` names it), so a run with other settings never resumes or overwrites another. Notebook 03 uses the same `seed` for its split, so the reviews it is tested on were never pretrained on. The table of every value comes after section 1, once a `corpus` run is sized for its text: it shows what will run.

# %%
from nbkit import evaluate, models, recipes
from nbkit.recipes import pretraining as pt

cfg = pt.PretrainConfig.for_scale(scale, seed=seed, split_seed=seed, model=model, max_steps=max_steps, corpus=corpus,
                                  init=init, **overrides)   # None values keep the recipe's
out_dir = cfg.run_dir()   # runs/<scale>/mlm, "mlm-seed3-split_seed3" with overrides, "mlm-<store>[-lr0.002]" with corpus,
                          # "mlm-from-bert-base-chinese-<hash>" with init
print(f"-> {out_dir}")

# %% [markdown]
# ## 1. Corpus and tokenizer
# Without `corpus`, the text is the scale's mix (`mix`: source and repeat weight). A text found twice counts once, and every validation and test review is excluded, so notebook 03's evaluation stays honest; the table says what went in. The tokenizer is notebook 01's (trained now if missing).
#
# With `corpus`, your text is prepared once into a **store** on disk (token ids, word starts, a held-out share chosen by hash; `docs/corpus.md`) with its own tokenizer, and the run is sized for its token count (the plan says why; fields you set stay). Training then reads blocks from disk in constant memory. The preparation prints how long it will take once its first chunks are measured, one line such as `[prepare-corpus] tokenize: about 13 min 37 s at 1.22 MB/s for 1,000.0 MB of input (measured on the first 12.0 MB)`; expect 6-10 MB/s on 2 quiet cores, whichever tokenizer, and a fraction of that on a busy machine (README, *Pretrain on your own corpus*). A finished store is reused at once.
#
# With `init`, the tokenizer is the checkpoint's own (bert-base-chinese: 21,128 tokens, one per Chinese character): no WordPiece is trained, a `corpus` is prepared with it, and a block size past its position table or a store of another tokenizer is refused here, before any work.

# %%
corpus = pt.data(cfg)                            # jieba marks word boundaries where the text has none
tokenizer = pt.tokenizer(cfg, corpus)
cfg, plan = pt.size(cfg, corpus)                 # a store: model, steps and lr for its size
if plan:
    print(recipes.plan_text(plan))
print(f"vocabulary {len(tokenizer):,} tokens -> {out_dir}")
corpus.report

# %% [markdown]
# ### The recipe that runs
# Every value of the run, after the sizing above: `from` says whether it is the scale's, a recipe constant, yours (`override`) or the corpus sizing's, with the reason written beside each default in `nbkit/recipes/scales.py`; `meaning` says what it does. Fields another setting makes irrelevant say so (`unused: no corpus`).

# %%
cfg.table()

# %% [markdown]
# ## 2. MLM blocks
# Texts are tokenized, concatenated and cut into blocks of `block_size` tokens, `[CLS] … [SEP]`: packing wastes no compute on padding, and no block is longer than the model's position table. 5 % of the texts were held out above; their blocks give the held-out loss.

# %%
blocks = pt.blocks(cfg, tokenizer, corpus)
print({k: len(v) for k, v in blocks.items()}, "blocks of", cfg.block_size, "tokens")
print(tokenizer.decode(blocks["train"][0]["input_ids"][:40]))

# %% [markdown]
# The collator chooses 15 % of the tokens as targets (of those, 80 % become `[MASK]`, 10 % a random token, 10 % stay), choosing **whole words** as Chinese BERT-wwm does. Padding and special tokens are never chosen; `labels` is `-100` wherever there is nothing to predict.

# %%
batch = pt.collator(cfg, tokenizer)([blocks["train"][i] for i in range(2)])
print({k: tuple(v.shape) for k, v in batch.items()})
print(tokenizer.decode(batch["input_ids"][0][:40]))
print(f"target fraction: {(batch['labels'] != -100).float().mean():.2%}")

# %% [markdown]
# ## 3. Build BERT: from config, or from `init`
# Without `init`: no download; the architecture comes from the preset, the vocabulary from our tokenizer, the initial weights from the seed (running the notebook again gives the same numbers). With `init`: every weight of the checkpoint's masked LM is loaded (nothing starts random; the decoder stays tied to the word embeddings), and the cell names what MLM does not use (the pooler and next-sentence head).

# %%
bert = pt.model(cfg, tokenizer)
print(f"{cfg.init or cfg.model}: {models.count_parameters(bert) / 1e6:.1f} M parameters, "
      f"hidden={bert.config.hidden_size}, layers={bert.config.num_hidden_layers}")

# %% [markdown]
# ## 4. Train
# The loop picks the precision itself and prints why. The plot updates in place (loss, learning rate, tokens/s); the GPU monitor records utilisation and memory on the same time axis. Checkpoints go to `checkpoints/step-NNNNNN/` (written atomically; the newest complete one wins), so rerunning the cell **resumes**, and a finished run stays finished: delete `checkpoints/` (or set `resume=False` on the config) to start over. Before training, the loop scores the untrained model, for comparison.

# %%
from nbkit import GpuMonitor

monitor = GpuMonitor(interval=1.0)
monitor

# %%
from nbkit import LivePlot

plot = LivePlot(out_dir=out_dir)                 # also saved as loss.png
telemetry = monitor.telemetry()                  # GPU samples on the loop's time axis
loop, result = pt.train(cfg, bert, tokenizer, blocks, out_dir, callbacks=[plot, telemetry])   # patience: stop when stalled

# %% [markdown]
# ## 5. Held-out loss and perplexity
# Perplexity = exp(loss) on the masked tokens of held-out blocks. A model that learned nothing sits near the vocabulary size; lower is better.

# %%
evals = [h for h in result.history if "eval_loss" in h]
first, last = evals[0], evals[-1]
print(f"step     0: eval loss {result.metrics['untrained_eval_loss']:.3f}  "
      f"perplexity {result.metrics['untrained_eval_perplexity']:8.1f}")
for e in (first, last):
    print(f"step {e['step']:>5}: eval loss {e['eval_loss']:.3f}  perplexity {e['eval_perplexity']:8.1f}")
print(f"uniform guess over {len(tokenizer):,} tokens: perplexity {len(tokenizer):,}")

# %% [markdown]
# Did the model learn context? A masked LM that only learnt how frequent each token is stalls at the corpus's **unigram entropy** (the "unigram plateau"); fine-tuning from it is no better than from random weights. The check compares that entropy with the held-out loss **at the targets replaced by `[MASK]`**, where only context can help (the loss over all targets also counts the 10 % left unchanged, which the model can copy from its input). It names the fix when the run is stuck.

# %%
print(evaluate.plateau_check(last, blocks["train"], tokenizer).text())   # last: the final evaluation's metrics

# %% [markdown]
# Was the GPU busy? The monitor's recording says whether the run looked input-bound (low utilisation with memory to spare) and what to change.

# %%
monitor.stop()
telemetry.plot()
print(telemetry.advice or "No sign of an input-bound run (or no GPU samples to judge from).")

# %% [markdown]
# ## 6. Save for fine-tuning
# `model/` loads with `from_pretrained` (notebook 03 starts from it); `metrics.json` is the machine-readable summary, with every config field and the loss history.

# %%
summary = pt.save(cfg, out_dir, loop, result, tokenizer)
{k: summary[k] for k in ("steps", "train_tokens", "untrained_eval_loss", "eval_loss", "eval_perplexity",
                         "tokens_per_s", "device", "precision")}

# %% [markdown]
# ## 7. Optional: several GPUs with `torchrun`
# The same recipe runs under DistributedDataParallel (`python -m nbkit.jobs.pretrain`, its flags are the config's). From a notebook, `nbkit.jobs.launch` starts `torchrun` in a separate process (the kernel itself is never forked) and streams its metrics into a live plot. Skipped with fewer than two GPUs.

# %%
from nbkit.jobs.launch import launch, visible_gpus

n_gpus = visible_gpus()
if n_gpus < 2:
    print(f"{n_gpus} GPU(s) visible: multi-GPU launch skipped.")
else:
    job = launch("nbkit.jobs.pretrain", nproc_per_node=n_gpus, on_metrics=LivePlot(out_dir=out_dir / "ddp"),
                 args=["--scale", cfg.scale, "--output-dir", str(out_dir / "ddp"),
                       "--batch-size", str(max(1, cfg.batch_size // n_gpus)),
                       *(["--corpus", str(corpus.store)] if corpus.store else []),
                       *(["--init", str(cfg.init)] if cfg.init else [])])
    job.wait()

# %% [markdown]
# ## 8. Ask the model: fill in the `[MASK]`
# The saved model directory goes into plain `transformers.pipeline("fill-mask")` with five everyday sentences, each with one character hidden (首都, 很好, 非常好, 公园, 牛奶). Each row lists the model's five best guesses with their probabilities, and the line above the table says what they show:
#
# - **the same five guesses for every sentence** (typically punctuation and the most frequent characters, such as ，的。是不): the model learnt which tokens are frequent, not how the sentence constrains them. The loss can fall a long way before that changes. This is what the `smoke` scale shows (a few steps on a tiny model), and what a run of the `cpu` recipe gave in December 2026 (the same five, ，的。是不, for all five sentences), in line with the plateau check above: its gain in notebook 03 is small.
# - **guesses that change with the sentence** (都 after 首, 奶 after 牛): the model uses context. The `gpu` recipe is where to look for that, and a published checkpoint continued with `init` starts there.
#
# **Next:** `03_sentiment_finetuning` fine-tunes a classifier from this checkpoint (with `init`, pass it `-p init runs/<scale>/mlm-from-…/model`, the `out_dir` printed above).

# %%
from nbkit.evaluate.probes import fill_mask

filled = fill_mask(str(out_dir / "model"), str(out_dir / "model"))   # the saved checkpoint, plain transformers
print(filled.verdict())
filled.table()
