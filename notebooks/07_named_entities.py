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
# # 07 · Named entities: persons, places and organisations in People's Daily
#
# After sentiment, named-entity recognition (NER) is what Chinese BERTs are fine-tuned for most. We tag every character of People's Daily (January 1998) as the beginning (`B-`), inside (`I-`) or outside (`O`) of a person (`PER`), place (`LOC`) or organisation (`ORG`): the classic People's Daily NER set, derived from the corpus's own part-of-speech tags (`nr`, `ns`, `nt`).
#
# Honestly: sentences are deduplicated and split with no text shared across splits, a classical baseline (a linear-chain CRF over character-window features) is trained on the same training split, and both are scored on the same test split by **entity-level F1** (seqeval's definition: an entity counts only with its exact type and boundaries) with a bootstrap interval. Every step is a function of the fine-tuning recipe (`nbkit.recipes.finetuning`, task `ner`), which `python -m nbkit.jobs.finetune --task ner` also runs.

# %% [markdown]
# ## Parameters
# The values you are most likely to change have a name here, your tagged files among them; every other setting of the recipe goes in `overrides`, by its `FinetuneConfig` field name (the names `python -m nbkit.jobs.finetune --task ner` takes as flags): `span_offsets` for JSON spans from Label Studio (`{"span_offsets": "utf16"}`), `max_length`, `stride`, `lr`, ... Plain values only, so papermill can set each: `-p seed 3 -p train_file tags.conll`, and the dict as YAML: `-y "overrides: {lr: 0.0005, n_boot: 200}"`. `None` keeps the recipe's value (the scale's defaults, rows `finetuning` and `finetuning/ner`, each beside its reason: `nbkit/recipes/scales.py`). A name in `overrides` that is no field stops the next cell and names the close ones.

# %% tags=["parameters"]
scale = None          # "smoke", "cpu" or "gpu"; None: $NBKIT_SCALE (else gpu with CUDA, else cpu)
seed = None           # data split, subsample, new head and training order
model = None          # BERT preset when there is no encoder to start from
epochs = None         # passes over the training split
init = None           # the encoder: a model folder or Hub name (bert-base-chinese); None: notebook 02's
train_file = None     # your tagged file (CoNLL char<TAB>tag, or JSONL spans); None: People's Daily
validation_file = None# with train_file: None draws 10 % from it
test_file = None      # with train_file: None draws 10 % from it
overrides = {}        # any other FinetuneConfig field by name, e.g. {"lr": 0.0005, "corpus_lines": 2000}; the table below lists them all

# %% [markdown]
# ## The recipe
# The fine-tuning recipe of notebook 03 with `task="ner"`: one config object, its values from the scale, the parameters above overriding them; the table shows every value with where it came from and why.

# %%
from nbkit.recipes import finetuning as ft

cfg = ft.FinetuneConfig.for_scale(scale, task="ner", seed=seed, model=model, epochs=epochs, init=init,
                                  train_file=train_file, validation_file=validation_file, test_file=test_file,
                                  **overrides)
out_dir = cfg.run_dir()   # runs/<scale>/ner[-<overrides>]
print(f"-> {out_dir}")
cfg.table()

# %% [markdown]
# ## 1. The data: entities per type and split
# Persons are consecutive `nr` words merged (surname + given name), places `ns`, organisations `nt`. Read the report: what was read, dropped (duplicates, conflicts) and repaired (your files: an `I-` without `B-`, spans trimmed of spaces, offsets re-read from UTF-16 units), then the entities per type, sentences and characters in each split. The job prints the same lines before it trains.

# %%
from nbkit.data.ner import report_text

ner = ft.data(cfg)
print(report_text(ner.report))
ner.table()

# %%
first = ner.splits["train"][0]
print("".join(first["tokens"]))
print(" ".join(f"{c}/{t}" for c, t in zip(first["tokens"], first["tags"]) if t != "O"))

# %% [markdown]
# ## 2. The baseline: a CRF over character windows
# A linear-chain CRF (CRFsuite) sees each character with its neighbours and learns which tag follows which. It trains in seconds and is the bar BERT has to clear; it reads the same training split and tags whole sentences. It is saved in the run folder (`crf/`), so if it wins you can ship it: `CrfTagger.load(out_dir / "crf").predict("张三在北京")` gives entity spans of plain text, as the BERT export's pipeline does.

# %%
import time

from nbkit.evaluate import ner as ner_eval

test = ner.splits["test"]
gold = [it["tags"] for it in test]
t0 = time.perf_counter()
crf_pred = ner_eval.crf_baseline(ner.splits["train"], test, save_to=out_dir / "crf")   # saved: it can be shipped
crf_scores = ner_eval.entity_scores(gold, crf_pred)
print(f"CRF: entity F1 {crf_scores['f1']:.3f} on {len(test)} test sentences ({time.perf_counter() - t0:.0f} s)")

# %% [markdown]
# ## 3. Characters to tokens, long sentences in windows
# Each character is a word for the tokenizer; the first sub-token of each word carries its tag (the others are ignored by the loss). A sentence longer than `max_length` tokens is cut into overlapping windows (`stride` tokens shared). Evaluation tags through `transformers`' token-classification pipeline, which merges the windows' entities (of overlapping ones the longest): nothing is cut, every gold entity is scored, and the exported model gives the same tags.

# %%
tokenizer = ft.tokenizer(cfg)   # the encoder's own, else notebook 01's
encoded, windows = ft.encode(cfg, tokenizer, ner)
{split: {k: w[k] for k in ("n_items", "n_windows", "n_windowed", "n_words_without_token", "n_words_unk")}
 for split, w in windows.items()}

# %% [markdown]
# ## 4. BERT with a token-classification head
# The encoder comes from notebook 02's checkpoint when there is one (else random weights, and the cell says so; `init` names a published model such as `bert-base-chinese`); a new, seeded head maps every token's state to the BIO labels.

# %%
print("encoder:", ft.encoder(cfg))
model, how = ft.model(cfg, tokenizer, ner, out_dir)
print(how)

# %% [markdown]
# ## 5. Fine-tune
# The same loop as notebooks 02 and 03: automatic precision, checkpoints, exact resume, the live plot. Its `eval_accuracy` counts tagged characters (mostly `O`, so it starts high); entity-level F1 comes next.

# %%
from nbkit import LivePlot

loop, result = ft.train(cfg, model, tokenizer, encoded, out_dir, callbacks=[LivePlot(out_dir=out_dir)])

# %% [markdown]
# ## 6. Entity-level evaluation, beside the baseline
# Precision, recall and F1 over entities (micro, and per type), each with a 95 % bootstrap interval over test sentences, and the difference with a paired interval (both scored on the same resamples). At `smoke` scale (a tiny model, a few steps) BERT finds next to nothing: that scale checks the code paths, not the model.

# %%
scores = ft.evaluate_ner(cfg, loop.model, tokenizer, ner, baseline_pred=crf_pred)
d = scores["diff"]
print(f"BERT - CRF: {d['value']:+.3f} F1, paired 95 % interval [{d['low']:+.3f}, {d['high']:+.3f}] (same sentences)")
scores["table"]

# %% [markdown]
# ## 7. What it got wrong
# Every missed entity (in the gold, not predicted with its type and boundaries) and every spurious one (predicted, not in the gold), with five characters either side; `other` shows what the other side had there: a wrong type, a wrong boundary, or nothing.

# %%
errors = scores["errors"]
print(errors["kind"].value_counts().to_dict())
errors.head(12)

# %% [markdown]
# ## 8. Export, and check it with plain `transformers`
# One folder with the weights, the tokenizer and the label names: `pipeline("token-classification", model=DIR, aggregation_strategy="first")` loads it without nbkit and without `trust_remote_code`. It reads plain text one character per token, as the recipe did, so its spans are the recipe's entities. Give it `stride=` (the run's): a text longer than one window is then windowed instead of cut. `tag_text` cuts such a text at clause marks first (docs/ner.md measures why), as the job's evaluation does, and returns one flat list of spans for one string. Checked below on test sentences, the long ones included.

# %%
import functools

from transformers import pipeline

from nbkit.data.ner import entity_spans
from nbkit.evaluate.inference import tag_text
from nbkit.evaluate.ner_report import pipeline_tags

export_dir = ft.export(cfg, model, tokenizer, ner, out_dir / "model")   # ft.model's (lora: the peft model)
tagger = pipeline("token-classification", model=str(export_dir), aggregation_strategy="first", stride=cfg.stride,
                  device="cpu")
long = [i for i, it in enumerate(test) if len(it["tokens"]) > cfg.max_length - 2]   # more than one window
picked = sorted(set(range(min(200, len(test)))) | set(long))
from_pipe = pipeline_tags(functools.partial(tag_text, tagger), [test[i] for i in picked], plain_text=True)
same = {i: entity_spans(p) == entity_spans(scores["pred"][i]) for p, i in zip(from_pipe, picked)}
print(f"the pipeline on plain text gives the recipe's entities on {sum(same.values())} of {len(picked)} "
      f"test sentences; on {sum(same[i] for i in long)} of the {len(long)} longer than max_length={cfg.max_length}")
tag_text(tagger, "新华社北京一月一日电，江泽民主席发表新年讲话。")

# %% [markdown]
# ## 9. Save the summary
# `metrics.json`: entity-level scores with intervals for BERT and the CRF, per type, the windows, the error counts, the recipe and the loop's summary.

# %%
summary = ft.save(cfg, out_dir, loop, result, ner, windows, scores, how)
{k: summary[k] for k in ("test_entity_f1", "test_entity_f1_interval", "baseline_entity_f1",
                         "baseline_entity_f1_interval", "n_errors")}

# %% [markdown]
# **Your own tagged files:** `train_file` above (or `python -m nbkit.jobs.finetune --task ner --train-file x.conll`) takes CoNLL (`char<TAB>tag`, a blank line between sentences, BIO or BIOES) or JSON lines with spans (`{"text": ..., "entities": [[start, end, "PER"], ...]}`, as doccano and Label Studio export); notebook 05 has a short section on them.
