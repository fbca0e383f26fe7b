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
# # 03 · Fine-tuning for Chinese review sentiment
#
# We fine-tune the BERT pretrained in notebook 02 to tell positive from negative product and book reviews, and evaluate it **honestly**: duplicates and texts labelled both ways are dropped before a split by unique text (no test review was seen in training), the test split is scored once at the end with accuracy, **macro-F1** and a confusion matrix, and a classical baseline (TF-IDF character n-grams + logistic regression) is scored on the same split.
#
# Every step below is one function of the fine-tuning recipe, `nbkit.recipes.finetuning`; the same functions run `python -m nbkit.jobs.finetune`, notebook 05 and the benchmark. The measurements behind the choices are in [docs/finetuning.md](../docs/finetuning.md).

# %% [markdown]
# ## Parameters
# The values you are most likely to change have a name here; every other setting of the recipe goes in `overrides`, by its field name (`FinetuneConfig`'s: the names `python -m nbkit.jobs.finetune` takes as flags). Plain values only, so papermill can set each: `-p seed 3 -p init bert-base-chinese`, and the dict as YAML: `-y "overrides: {lr: 0.0002, batch_size: 16}"`. `None` keeps the recipe's value (the scale's defaults, each beside its reason: `nbkit/recipes/scales.py`). A name in `overrides` that is no field stops the next cell and names the close ones.

# %% tags=["parameters"]
scale = None          # "smoke", "cpu" or "gpu"; None: $NBKIT_SCALE (else gpu with CUDA, else cpu)
seed = None           # data split, subsample, new head and training order
model = None          # BERT preset when there is no encoder to start from (built from config)
epochs = None         # passes over the training split
init = None           # the encoder: a model folder (e.g. runs/cpu/mlm-<corpus>/model) or Hub name (bert-base-chinese); None: notebook 02's
overrides = {}        # any other FinetuneConfig field by name, e.g. {"lr": 0.0002, "max_length": 128}; the table below lists them all

# %% [markdown]
# ## The recipe
# One object holds every decision of this notebook: its values come from the scale, the parameters above override them, and the table shows every value with where it came from (the scale, a recipe constant and why, or your `override`) and what it means.

# %%
from nbkit import evaluate, views
from nbkit.recipes import finetuning as ft

cfg = ft.FinetuneConfig.for_scale(scale, seed=seed, model=model, epochs=epochs, init=init, **overrides)
out_dir = cfg.run_dir()   # "sentiment-seed3" with overrides, "-from-mlm-wiki-…" with init
print(f"-> {out_dir}")
cfg.table()

# %% [markdown]
# ## 1. Clean data, honest split
# The bundled review files hold many copies of the same review. A random split would put copies of test reviews into training and inflate every number below, so `data` deduplicates, drops texts that appear with both labels, and splits by unique text (stratified). The report says how much was dropped.

# %%
sentiment = ft.data(cfg)
sentiment.report

# %% [markdown]
# ## 2. Tokenize, and measure what truncation cuts
# Each review becomes `[CLS] tokens [SEP]`, cut at `max_length` tokens. A cut review loses words the classifier never sees, so we count how many are cut.

# %%
# a model pretrained on your corpus (notebook 02 with `corpus`) brings its own tokenizer; else notebook 01's
tokenizer = ft.tokenizer(cfg)
encoded, trunc = ft.encode(cfg, tokenizer, sentiment)
print(f"reviews longer than {cfg.max_length} tokens (truncated): "
      + ", ".join(f"{k} {v['truncated_fraction']:.1%}" for k, v in trunc.items()))

# %% [markdown]
# ## 3. Start from the pretrained checkpoint
# The encoder comes from notebook 02's checkpoint when there is one (else random weights, and the cell says so; `init` names a local model folder or a Hub name such as `bert-base-chinese`). A new, seeded head maps the encoder's output to the two labels, and the pooling is chosen per encoder (`pooling=None`), with the reason printed:
#
# - **`cls`**, BERT's own head, reading `[CLS]` through the pooler, when the checkpoint carries a pooler trained by its authors (bert-base-chinese's next-sentence prediction); the export is then a plain `BertForSequenceClassification`.
# - **`mean`** of the token states otherwise: nbkit's pretraining, like any MLM-only pretraining, never trains the pooler, while the token states are exactly what MLM trains.
#
# A BERT-base-sized encoder also gets its authors' fine-tuning rate (2e-5; the table above says so).

# %%
print("encoder:", ft.encoder(cfg))   # init, else notebook 02's model, else None (random weights)
model, how = ft.model(cfg, tokenizer, sentiment, out_dir)   # out_dir: never resume another encoder's run
print(how)

# %% [markdown]
# ## 4. Fine-tune
# The same loop as notebook 02 (automatic precision, checkpoints, exact resume, live plot), with batches of reviews of similar length (less padding). Watch `eval_macro_f1` beside accuracy: on imbalanced labels accuracy hides an ignored class (`class_weights="balanced"` weights the loss against that).

# %%
from nbkit import LivePlot

loop, result = ft.train(cfg, model, tokenizer, encoded, out_dir, callbacks=[LivePlot(out_dir=out_dir)])

# %% [markdown]
# ## 5. Test-set evaluation, beside the baseline
# The test split was used for nothing so far. The TF-IDF baseline takes seconds and is hard to beat on short reviews; it is scored twice, on the full text and on the text cut where the model's tokenizer cuts it, so the comparison is fair both ways. At `smoke` scale (a tiny model, a few dozen steps) expect chance level: that scale checks the code paths, not the model.

# %%
scores = ft.evaluate(cfg, loop.model, tokenizer, sentiment)
scores["table"]

# %%
evaluate.format_report(scores["report"])

# %%
import matplotlib.pyplot as plt

# Chinese class names when matplotlib has a CJK font; else English, and one hint how to install one
names = list(sentiment.id2label.values())
if views.use_cjk_font():
    names = [{"negative": "负面", "positive": "正面"}.get(n, n) for n in names]
fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
views.plot_confusion_matrix(scores["report"]["confusion_matrix"], names, ax=axes[0], title="fine-tuned BERT")
views.plot_confusion_matrix(scores["baseline_report"]["confusion_matrix"], names, ax=axes[1], title="baseline")
fig.tight_layout(); fig.savefig(out_dir / "confusion_matrix.png", dpi=100)
plt.show()

# %% [markdown]
# ## 6. Try your own reviews

# %%
reviews = ["质量很好，物流也快，下次还会再买。", "太失望了，用了两天就坏了，客服也不理人。",
           "这本书内容充实，翻译流畅，值得一读。", "包装破损，书页脏了，差评。"]
evaluate.predict(loop.model, tokenizer, reviews, max_length=cfg.max_length, id2label=sentiment.id2label)["table"]

# %% [markdown]
# ## 7. Save the summary
# `metrics.json`: test and baseline scores, what the data check dropped, truncation, the recipe and the loop's summary.

# %%
summary = ft.save(cfg, out_dir, loop, result, sentiment, trunc, scores, how)
{k: summary[k] for k in ("test_accuracy", "test_macro_f1", "baseline_accuracy", "baseline_cut_accuracy", "init")}

# %% [markdown]
# ## 8. Did pretraining pay off? (measured)
# One run cannot say: two fine-tunings that differ only in their seed differ by about a point. `bench/pretrain_value.py` runs this recipe from random weights and from checkpoints of notebook 02's recipe, 3 seeds each, and gives a paired bootstrap 95 % interval of the difference. The recorded headlines (the tables and every experiment: [docs/finetuning.md](../docs/finetuning.md)):

# %%
from IPython.display import Markdown, display

from nbkit.evaluate import pretrain_value

for run in ("cpu", "gpu"):
    display(Markdown(f"**Recorded {run} run.** "
                     + pretrain_value.headline(pretrain_value.load_recorded(run=run), machine="2-core CPU")))

# %% [markdown]
# ## 9. A second task: news sentiment (optional `nbkit[news]`)
# One data set is thin evidence. `pip install -e '.[news]'` adds about 7,300 Chinese news articles labelled positive / neutral / negative (about 10 / 50 / 40 %; why it is optional: [docs/finetuning.md](../docs/finetuning.md)). With imbalanced classes read **macro-F1**: always answering "neutral" scores about 0.49 accuracy but 0.22 macro-F1. The same recipe with the news defaults (longer cut, loss weighted by inverse class frequency, the baseline too). Without the package the next cell prints how to install it and the section is skipped.

# %%
news_cfg = ft.FinetuneConfig.for_scale(cfg.scale, task="news", init=init)
news = ft.news_data(news_cfg)   # None, and one line saying how to install it, without nbkit[news]
if news is not None:
    print(news.report["class_counts"])
    display(news_cfg.table())

# %%
if news is not None:
    news_result = ft.run_finetuning(news_cfg, labeled=news, tokenizer=tokenizer)
    print(f"articles cut at {news_cfg.max_length} tokens: "
          + ", ".join(f"{k} {v:.0%}" for k, v in news_result["truncated_fraction"].items()))
    display(news_result["table"])

# %% [markdown]
# **Next:** `04_gpu_profiling` shows where the training time goes; `05_your_own_data` runs all of this on your own files.
