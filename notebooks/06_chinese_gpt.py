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
# # 06 · A Chinese GPT: causal pretraining, perplexity against n-grams, generation
#
# Notebook 02 taught a BERT to fill in hidden characters. This one trains a **GPT**: a causal language model that reads left to right and learns to predict the next token, so it can *write*. It is the same pretraining recipe with `objective="causal"` (`nbkit.recipes.pretraining`): the same corpus, tokenizer, store, loop, checkpoints and run folders; only the model (GPT-2 from config, or a Llama-style `llama-*` preset), the blocks (packed with `[SEP]` between documents) and the labels (each token's next) differ.
#
# Then we ask the honest question: is it better than counting? A **bigram** and a **trigram** model (interpolated Kneser-Ney over the same token ids) are trained on the same training text and scored on the same held-out tokens. A GPT that does not beat them has learnt nothing a table of counts could not hold. Last, the model writes (greedy and sampled, seeded) and is exported as a folder that plain `transformers.pipeline("text-generation")` loads. When to pick this objective or MLM, and what each costs: [docs/pretraining.md](../docs/pretraining.md).

# %% [markdown]
# ## Parameters
# The values you are most likely to change have a name here, the training ones first, then the generation step's; every other training setting goes in `overrides`, by its `PretrainConfig` field name (the names `python -m nbkit.jobs.pretrain --objective causal` takes as flags). Plain values only, so papermill can set each: `-p max_steps 300 -p prompt 北京`, and the dict as YAML: `-y "overrides: {lr: 0.002, dropout: 0.1}"`. `None` keeps the recipe's value (the scale's defaults, rows `pretraining` and `pretraining/causal`, each beside its reason: `nbkit/recipes/scales.py`). A name in `overrides` that is no field stops the next cell and names the close ones. MLM's masking fields (`mlm_probability`, `whole_word`) do nothing here: a causal LM predicts every next token, and the table marks them unused.

# %% tags=["parameters"]
scale = None              # "smoke", "cpu" or "gpu"; None: $NBKIT_SCALE (else gpu with CUDA, else cpu)
seed = None               # weights, data order, the corpus split; None: the scale's (0)
model = None              # causal preset: gpt2-tiny / gpt2-narrow / gpt2-mini / ... or llama-*; None: the scale's
max_steps = None          # optimizer steps
corpus = None             # your corpus: a prepared store, or files/globs/folders to prepare (docs/corpus.md); None: the bundled mix
init = None               # continue a published causal LM: a folder or Hub name (uer/gpt2-chinese-cluecorpussmall layout); None: random weights
overrides = {}            # any other PretrainConfig field by name, e.g. {"lr": 0.002, "block_size": 128}; the table below lists them all
prompt = "今天天气"        # the text the model continues
max_new_tokens = None     # tokens it adds; None: up to a document's end or the context's (what the export writes)
temperature = 0.8         # sampling: below 1 sharpens the distribution
top_k = 50                # sampling: only the k most likely tokens
top_p = 0.9               # sampling: only the smallest set reaching this probability (nucleus)
repetition_penalty = 1.3  # greedy with controls: scores of tokens already written divided by this (1.0: none)
no_repeat_ngram_size = 3  # greedy with controls: no 3-gram of tokens twice (None: no cut)

# %% [markdown]
# The recipe is one object: the scale's defaults with the causal rows on top, plus what you set above. The run's folder is named after it (`runs/<scale>/causal`, then each override), so this run never resumes or overwrites notebook 02's. The table of every value follows section 1, once a `corpus` run is sized for its text.

# %%
from nbkit import models, recipes
from nbkit.recipes import pretraining as pt

cfg = pt.PretrainConfig.for_scale(scale, objective="causal", seed=seed, split_seed=seed, model=model,
                                  max_steps=max_steps, corpus=corpus, init=init, **overrides)   # None keeps the recipe's
out_dir = cfg.run_dir()   # runs/<scale>/causal, "causal-seed3-split_seed3" with overrides
print(f"-> {out_dir}")

# %% [markdown]
# ## 1. Corpus and tokenizer
# The same text and tokenizer as notebook 02 (the scale's mix, validation and test reviews excluded; notebook 01's WordPiece). With `corpus`, your text is prepared once into a store on disk and reused as it is; with `init`, the checkpoint's own tokenizer is used (UER's Chinese GPT-2 shares BERT's 21,128-entry vocabulary).

# %%
corpus = pt.data(cfg)
tokenizer = pt.tokenizer(cfg, corpus)
cfg, plan = pt.size(cfg, corpus)                 # a store: model, steps and lr for its size
if plan:
    print(recipes.plan_text(plan))
print(f"vocabulary {len(tokenizer):,} tokens -> {out_dir}")
corpus.report

# %% [markdown]
# ### The recipe that runs
# Every value of the run, after the sizing above (`pt.size` returns the config a `corpus` run trains with; without one it is the config as built): `from` says whether it is the scale's, the causal rows', a recipe constant, yours (`override`) or the corpus sizing's, with the reason written beside each default in `nbkit/recipes/scales.py`.

# %%
cfg.table()

# %% [markdown]
# ## 2. Causal blocks
# Texts are tokenized **without** `[CLS]`, each followed by `[SEP]` (the document separator: the store already ends every document with it, and UER's Chinese GPT-2 marks text ends with it), concatenated and cut into blocks of exactly `block_size` tokens (GPT-2's and nanoGPT's packing: no padding). The model learns to predict `[SEP]` where a text ends, which is where generation stops.

# %%
blocks = pt.blocks(cfg, tokenizer, corpus)
print({k: len(v) for k, v in blocks.items()}, "blocks of", cfg.block_size, "tokens")
print(tokenizer.decode(blocks["train"][0]["input_ids"][:40]))

# %% [markdown]
# The labels are the inputs shifted by one: position *t* predicts token *t+1*, and the block's last position predicts the first token of the next block (`next_id`), so every position has a target. Nothing is masked.

# %%
batch = pt.collator(cfg, tokenizer)([blocks["train"][i] for i in range(2)])
print({k: tuple(v.shape) for k, v in batch.items()})
print("input :", batch["input_ids"][0][:8].tolist())
print("labels:", batch["labels"][0][:8].tolist())

# %% [markdown]
# ## 3. Build the GPT
# From config (no download): GPT-2 (`GPT2LMHeadModel`, learned positions, LayerNorm, GELU) at the preset's size, with our tokenizer's vocabulary and `block_size` positions; weights drawn from the seed. A `llama-*` preset gives `LlamaForCausalLM` (RMSNorm, rotary positions, SwiGLU). With `init`, every weight of the checkpoint is loaded.

# %%
gpt = pt.model(cfg, tokenizer)
print(f"{cfg.init or cfg.model}: {models.count_parameters(gpt) / 1e6:.2f} M parameters, "
      f"{gpt.config.model_type}, hidden={gpt.config.hidden_size}, layers={gpt.config.num_hidden_layers}")

# %% [markdown]
# ## 4. Train
# The same loop as notebook 02: precision chosen and explained, the plot updated in place (loss, learning rate, tokens/s), checkpoints written atomically so rerunning the cell **resumes** (delete `checkpoints/` to start over). The loss here is the mean cross-entropy of every next token; the untrained model is scored first.

# %%
from nbkit import LivePlot

plot = LivePlot(out_dir=out_dir)                 # also saved as loss.png
loop, result = pt.train(cfg, gpt, tokenizer, blocks, out_dir, callbacks=[plot])

# %% [markdown]
# ## 5. Held-out perplexity, beside counting
# Perplexity = exp(mean next-token loss) on held-out blocks: the number of tokens the model is, on average, as unsure between as a uniform guess would be. The baselines are **n-gram models** over the same token ids (`nbkit.evaluate.ngram`: interpolated modified Kneser-Ney, Chen & Goodman 1998), trained on every training token once and scored on exactly the targets the GPT's evaluation averages over (the same blocks, each block's context only). The table lists how many tokens each saw: the n-grams read the training text once; the GPT read `steps × batch × block_size` tokens, several passes over the same text.

# %%
from nbkit.evaluate.ngram import causal_baselines, compare_with_baselines

last = [h for h in result.history if "eval_loss" in h][-1]     # the final evaluation
scored = loop.config.eval_batches * cfg.batch_size if loop.config.eval_batches else None
baselines = causal_baselines(blocks, len(tokenizer), (2, 3), max_eval_blocks=scored)
gpt_row = {"model": f"GPT ({cfg.init or cfg.model})", **last, "train_tokens": result.metrics["train_tokens"]}
comparison = compare_with_baselines(gpt_row, baselines)
print(f"untrained: perplexity {result.metrics['untrained_eval_perplexity']:,.1f}; uniform over "
      f"{len(tokenizer):,} tokens: {len(tokenizer):,}")
print(comparison["text"])
assert comparison["same_targets"], "the n-grams must score the GPT's held-out tokens"
import pandas as pd

pd.DataFrame(comparison["rows"]).round(3)

# %% [markdown]
# At `smoke` (a few steps of a tiny model) the GPT loses to both: it has barely started, while the n-grams read every training token once. Whether it beats the bigram and the trigram at `cpu` or `gpu` depends on how many tokens it trains on; docs/pretraining.md ("MLM or causal") records what runs gave, with the machine. The trigram is the stronger bar: on a corpus this small many of its contexts were seen only once, and Kneser-Ney's back-off is what keeps it honest.

# %% [markdown]
# ## 6. Generation
# **Greedy** takes the most likely token at each step: the same text every time, often repetitive. **Sampling** draws from the distribution, sharpened by `temperature`, cut to the `top_k` most likely tokens and to the smallest set whose probability reaches `top_p` (nucleus sampling, Holtzman et al. 2020); the `seed` makes a rerun print the same. Chinese is decoded without the spaces `BertTokenizer.decode` puts between characters. Generation stops at `[SEP]`, the end of a document.

# %%
from nbkit.evaluate.generation import generate, repeated_ngrams

greedy = generate(gpt, tokenizer, prompt, max_new_tokens=max_new_tokens)
print("greedy :", greedy)
for s in (0, 1):
    text = generate(gpt, tokenizer, prompt, max_new_tokens=max_new_tokens, do_sample=True,
                    temperature=temperature, top_k=top_k, top_p=top_p, seed=s)
    print(f"seed {s} :", text)

# %% [markdown]
# A small model's greedy text often loops (the same few characters again and again). Two of `model.generate`'s own controls break the loop and keep the text deterministic: `repetition_penalty` divides the scores of tokens already in the text (CTRL, Keskar et al. 2019), `no_repeat_ngram_size` forbids any 3-gram of tokens a second time. The share of repeated 3-grams says how much each line repeats itself.

# %%
controlled = generate(gpt, tokenizer, prompt, max_new_tokens=max_new_tokens, repetition_penalty=repetition_penalty,
                      no_repeat_ngram_size=no_repeat_ngram_size)
print("greedy, controls:", controlled)
print(f"repeated 3-grams: greedy {repeated_ngrams(greedy):.0%}, with controls {repeated_ngrams(controlled):.0%}")

# %% [markdown]
# ## 7. Save, export, and load in plain `transformers`
# `model/` is a standard `GPT2LMHeadModel` (or `LlamaForCausalLM`) folder with its tokenizer: `AutoModelForCausalLM`, `AutoTokenizer` and `pipeline("text-generation", model=...)` load it without `trust_remote_code`. Its `generation_config.json` is greedy (`do_sample=False`) with `max_length` = the context: the pipeline called with the prompt alone writes what `generate(gpt, tokenizer, prompt)` writes, up to the end of a document or of the context (without it, transformers' pipeline samples 256 tokens, past a small model's position table). No fixed `max_new_tokens` is written: it would override `max_length`, and a long prompt plus a fixed count runs past GPT-2's positions and crashes inside transformers. `metrics.json` is the run's summary; `baselines.json` keeps the comparison above. `pipe(prompt, max_new_tokens=30)` writes 30 tokens, as `generate(..., max_new_tokens=30)` does. The checks: the bare call equals our greedy line token for token, and a prompt that fills the context is refused with both lengths named (transformers' message also suggests a larger `max_length` or a `max_new_tokens`: neither fits a longer prompt into the model; keep the prompt's end).

# %%
from nbkit import jsonio

summary = pt.save(cfg, out_dir, loop, result, tokenizer)   # greedy, up to the context: the bare pipeline call
jsonio.write_json(out_dir / "baselines.json", comparison)
{k: summary[k] for k in ("objective", "model", "steps", "train_tokens", "eval_loss", "eval_perplexity",
                         "tokens_per_s", "device", "precision")}

# %%
from transformers import pipeline

from nbkit.models.causal import positions

pipe = pipeline("text-generation", model=str(out_dir / "model"))
theirs = pipe(prompt)[0]["generated_text"]              # no arguments: greedy, to a document's end or the context's
ours = greedy if max_new_tokens is None else generate(gpt, tokenizer, prompt)
print("pipeline:", theirs)
print("ours    :", ours)
assert theirs == ours, "the exported model must continue the prompt as the notebook's did"
print("same greedy continuation: yes")
try:
    pipe(prompt * positions(gpt.config))                         # a prompt past the context
    raise AssertionError("a prompt past the context must be refused")
except ValueError as refusal:
    print("refused:", str(refusal).split(". ")[0])

# %% [markdown]
# **Next:** with a GPU, `NBKIT_SCALE=gpu` trains `gpt2-mini` on more text; `-p model llama-narrow` swaps in the Llama architecture; `-p init <folder>` continues a published Chinese GPT-2 (UER's `gpt2-chinese-cluecorpussmall` layout) on your corpus (docs/pretraining.md).
