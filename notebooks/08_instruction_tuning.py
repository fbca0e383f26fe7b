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
# # 08 · Instruction tuning: a GPT that answers, scored against the baselines
#
# Notebook 06's GPT can only continue text. This notebook teaches it to **answer**: supervised fine-tuning (SFT) on conversations, with the loss on the assistant's tokens only. It is the same pretraining recipe with `objective="sft"` (`nbkit.recipes.pretraining`): the same loop, live plot, checkpoints and export; only the data (conversations), the template that turns them into tokens, and the labels differ. By default it starts from notebook 06's model at this scale.
#
# The data are built offline from labels nbkit ships: review sentiment ("这条评论是正面还是负面？" → 正面 / 负面) and the person and place names of People's Daily sentences, split as notebooks 03 and 07 split them, so none of their test texts is trained on. Then the honest question: does the tuned GPT answer better than the classical baselines (TF-IDF for sentiment, a CRF for names) on the same held-out questions? When to pick SFT, LoRA or pretraining, and what each costs: [docs/instruct.md](../docs/instruct.md).

# %% [markdown]
# ## Parameters
# The values you are most likely to change have a name here, the training ones first, then the answering ones; every other training setting goes in `overrides`, by its `PretrainConfig` field name (the flags of `python -m nbkit.jobs.pretrain --objective sft`). Plain values only, so papermill can set each: `-p max_steps 300`, and the dict as YAML: `-y "overrides: {lr: 0.0002}"`. `None` keeps the recipe's value (rows `pretraining` and `pretraining/sft` in `nbkit/recipes/scales.py`, each beside its reason). `corpus` takes your own conversations (JSON lines: Alpaca, ShareGPT or OpenAI `messages`); the scores against the baselines need the demo set, so they are skipped then.

# %% tags=["parameters"]
scale = None              # "smoke", "cpu" or "gpu"; None: $NBKIT_SCALE (else gpu with CUDA, else cpu)
seed = None               # weights, data order, the demo split; None: the scale's (0)
model = None              # causal preset used only when there is no model to start from
max_steps = None          # optimizer steps
corpus = None             # your conversations: .jsonl / .json files (docs/instruct.md); None: the demo set
init = None               # the causal LM to tune: a folder or Hub name; None: notebook 06's model at this scale
overrides = {}            # any other PretrainConfig field by name, e.g. {"lr": 0.0002, "overflow": "truncate"}
per_task = 50             # held-out questions scored per task
max_new_tokens = 16       # most tokens an answer may have
chat_turns = ["这条评论是正面还是负面？\n质量很好，物流也快", "列出句中的地名：我们从北京出发去上海。"]   # the chat cell's user turns

# %% [markdown]
# The recipe is one object: the scale's defaults with the SFT rows on top, plus what you set above. The run's folder is `runs/<scale>/sft` (then each override), beside notebook 06's `runs/<scale>/causal`.

# %%
from nbkit import models
from nbkit.recipes import pretraining as pt

cfg = pt.PretrainConfig.for_scale(scale, objective="sft", seed=seed, split_seed=seed, model=model,
                                  max_steps=max_steps, corpus=corpus, init=init, **overrides)   # None keeps the recipe's
out_dir = cfg.run_dir()
print(f"-> {out_dir}")

# %% [markdown]
# ## 1. The conversations
# Each example is a conversation: a `user` question, then the `assistant`'s answer. Each task is asked in several phrasings (`PHRASINGS`), so the model learns the task rather than one sentence. Source texts are cut to half the context (`n_cut` counts them); an entity question with no such name answers `无` (`n_none`). Your own files are read with their problems named by file and line (docs/instruct.md lists them).

# %%
import pandas as pd

corpus = pt.data(cfg)
tokenizer = pt.tokenizer(cfg, corpus)
demo = cfg.corpus is None
if demo:
    counts = pd.DataFrame({(task, split): corpus.report[task][split] for task in ("sentiment", "persons", "places")
                           for split in ("train", "validation", "test")}).T
else:
    r = corpus.report                            # your files: what was read, kept per shape, dropped per problem
    counts = pd.Series({"read": r["n_read"], **{f"kept ({k})": v for k, v in r["shapes"].items()},
                        **{f"dropped ({k})": v for k, v in r["dropped"].items()},
                        "trailing turns cut": r["n_trailing_turns_cut"]})
counts

# %%
for ex in corpus.splits["train"][:: max(1, len(corpus.splits["train"]) // 4)][:4]:
    print(ex["messages"])

# %% [markdown]
# ### The recipe that runs
# Every value of the run: `from` says whether it is the scale's, the SFT rows', a recipe constant or yours (`override`), with the reason written beside each default in `nbkit/recipes/scales.py`. The masking fields and the corpus mix are marked unused: SFT reads conversations.

# %%
cfg.table()

# %% [markdown]
# ## 2. The template, as the model sees it
# `tokenizer.apply_chat_template` is the one encoder of conversations: training, generation, the exported `pipeline` and TRL all read the same ids. nbkit's template writes a role marker before each message and an end-of-turn marker after it; a BERT vocabulary lends its free `[unused1..4]` slots, nbkit's own WordPiece gets 4 new tokens (`<|user|>` ... `<|end|>`) and the model 4 new embedding rows. The assistant's content sits inside `{% generation %}` ... `{% endgeneration %}`, so `return_assistant_tokens_mask=True` says which tokens carry the loss: below they are in **[brackets]**. Everything else (the question, the markers) is context only.

# %%
from nbkit.text.chat import with_chat_template

print(with_chat_template(tokenizer, cfg.chat_template))      # what was done to the tokenizer (run again: nothing)
example = corpus.splits["train"][0]["messages"]
print(tokenizer.apply_chat_template(example, tokenize=False))
enc = tokenizer.apply_chat_template(example, return_dict=True, return_assistant_tokens_mask=True)
tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"])
print(" ".join(f"[{t}]" if m else t for t, m in zip(tokens, enc["assistant_masks"])))

# %% [markdown]
# Each conversation becomes one row of at most `block_size` tokens, padded in the batch: no conversation attends to another. One longer than the context is dropped (or, with `overflow="truncate"`, cut), and the counts say how many.

# %%
blocks = pt.blocks(cfg, tokenizer, corpus)
batch = pt.collator(cfg, tokenizer)([blocks["train"][i] for i in range(2)])
print({k: tuple(v.shape) for k, v in batch.items()}, "| targets:", int((batch["labels"] != -100).sum()))

# %% [markdown]
# ## 3. The model, and its answers before SFT
# Notebook 06's GPT at this scale when it has been run (or `init`), its embeddings grown by the new markers; without either, random weights and a warning. Generation is greedy and stops at the end-of-turn marker; an answer that never reaches it stops at `max_new_tokens`, and the count says how many did. Before SFT the model has never seen a role marker: it continues text.

# %%
from nbkit.evaluate import instruct as ev
from nbkit.models.causal import positions

gpt = pt.model(cfg, tokenizer)
print(f"{models.count_parameters(gpt) / 1e6:.2f} M parameters, {gpt.config.model_type}, "
      f"context {positions(gpt.config)} tokens")
test = ev.fitting_examples(tokenizer, corpus.splits["test" if demo else "validation"], cfg.block_size, per_task)
before, cut_before = ev.generate_answers(gpt, tokenizer, test, max_new_tokens)
print(f"{len(test)} held-out questions; {cut_before} stopped at max_new_tokens={max_new_tokens} without the marker")

# %%
shown = list(range(0, len(test), max(1, len(test) // 6)))[:6]
pd.DataFrame({"question": [test[i]["messages"][0]["content"] for i in shown],
              "gold": [test[i]["messages"][1]["content"] for i in shown],
              "before SFT": [before[i] for i in shown]})

# %% [markdown]
# ## 4. Train
# The same loop as notebooks 02 and 06: precision chosen and explained, the plot updated in place, checkpoints written atomically so rerunning the cell **resumes**. The loss is the mean cross-entropy over the assistant's tokens only (the answer and its end-of-turn marker); the held-out loss is over the validation conversations' answers, and the untrained model is scored first.

# %%
from nbkit import LivePlot

plot = LivePlot(out_dir=out_dir)                 # also saved as loss.png
loop, result = pt.train(cfg, gpt, tokenizer, blocks, out_dir, callbacks=[plot])

# %% [markdown]
# ## 5. Answers after SFT
# The same held-out questions, the same greedy generation.

# %%
after, cut_after = ev.generate_answers(loop.model, tokenizer, test, max_new_tokens)
print(f"{cut_after} of {len(test)} answers stopped at max_new_tokens={max_new_tokens} without the end-of-turn marker")
pd.DataFrame({"question": [test[i]["messages"][0]["content"] for i in shown],
              "gold": [test[i]["messages"][1]["content"] for i in shown],
              "before SFT": [before[i] for i in shown], "after SFT": [after[i] for i in shown]})

# %% [markdown]
# ## 6. Scores beside the baselines
# Each answer is read by fixed rules (`nbkit.evaluate.instruct`): sentiment is right when it holds exactly one of 正面 / 负面 and it is the gold one; the names are split at `、` and scored as sets per sentence, micro-averaged F1 over all sentences (not seqeval's span F1: a name's position is not checked). `form` is the share of answers in the expected form (exactly 正面 / 负面; `无` or names found in the sentence). The baselines answer **the same questions** and are scored by the same rules: TF-IDF + logistic regression fit on the reviews SFT trained on, a CRF fit on the sentences SFT trained on, and notebook 03's fine-tuned BERT when its run exists (its model scores these reviews). Intervals: 95 % percentile bootstrap over the questions. The table is kept as `scores.json` in the run's folder.

# %%
from nbkit import jsonio
from nbkit.data.ner import load_peoples_daily_ner
from nbkit.runs import step_path

scored = {}
if demo:                                         # your own conversations have no gold labels to score
    scored = {"before SFT": ev.score_answers(test, before), "after SFT": ev.score_answers(test, after)}
    ner = load_peoples_daily_ner(lines=cfg.corpus_lines, seed=cfg.split_seed)   # notebook 07's split
    scored["TF-IDF / CRF"] = ev.score_answers(test, ev.baseline_answers(test, corpus.splits["train"],
                                                                        ner.splits["train"]))
    bert = step_path(cfg.scale, "sentiment") / "model"                           # notebook 03's export
    if (bert / "config.json").is_file():
        reviews = [ex for ex in test if ex["task"] == "sentiment"]
        scored["notebook 03's BERT"] = ev.score_answers(reviews, ev.classifier_answers(bert, reviews))
last = [h for h in result.history if "eval_loss" in h][-1]                     # the final evaluation
losses = {"eval_loss_before": result.metrics["untrained_eval_loss"], "eval_loss_after": last["eval_loss"]}
print(f"held-out loss on the answers' tokens: {losses['eval_loss_before']:.3f} before, "
      f"{losses['eval_loss_after']:.3f} after")
jsonio.write_json(out_dir / "scores.json", {**losses, "rows": ev.comparison_rows(scored)})   # the run's record
pd.DataFrame(ev.comparison_rows(scored)).round(3)

# %% [markdown]
# How to read the rows: the held-out loss says whether the model learns the answers at all; `form` whether its answers are usable (a label or a list, then the end-of-turn marker); the scores beside the baselines whether it learnt the task better than character n-grams or a CRF fit on the same training texts. At `smoke` (a few steps of a tiny model) the loss falls but no answer is usable yet: the cells run, the model has barely started. TF-IDF and the CRF are strong on these tasks, and a small GPT has to learn sentiment and names from the answers alone; docs/instruct.md records what a run gave, with its scale and machine. When the tuned model loses, the `gpu` arm (`NBKIT_SCALE=gpu`: `gpt2-mini` on every training conversation, more steps) or a published Chinese GPT as `init` is the next step.

# %% [markdown]
# ## 7. A conversation
# Several turns: each answer is appended to the history, and the next question is asked with the whole history in the context. Greedy decoding: no randomness, the same answers on every run. A history longer than the context fails with the count of tokens: start a new conversation then.

# %%
context = positions(loop.model.config)


def prompt_tokens(messages):
    return len(tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"])


history = []
for question in chat_turns:
    history.append({"role": "user", "content": question})
    while prompt_tokens(history) + 4 > context and len(history) > 1:     # room for a short answer
        history = history[2:]
        print(f"(the oldest exchange dropped: the context holds {context} tokens)")
    said, cut = ev.generate_answers(loop.model, tokenizer, [{"messages": [*history, {"role": "assistant",
                                                                                     "content": ""}]}], max_new_tokens)
    history.append({"role": "assistant", "content": said[0]})
    print(f"user: {question}\nassistant: {said[0]}" + ("   (stopped at max_new_tokens: no end-of-turn marker)"
                                                       if cut else "   (stopped at the end-of-turn marker)"))

# %% [markdown]
# ## 8. Export, and chat with it in plain `transformers`
# `model/` is a standard `GPT2LMHeadModel` (or `LlamaForCausalLM`) folder; the chat template is in `tokenizer_config.json` and `generation_config.json` is greedy, stopping at the end-of-turn marker or at the end of the context (no fixed `max_new_tokens`: with one, a long history would run past GPT-2's positions and crash inside transformers; without, it is refused with both lengths named). So `pipeline("text-generation", model=dir)` given a list of messages answers as this notebook did, without `trust_remote_code`; pass `max_new_tokens` for our cap. The check: the pipeline's answers to the conversation above and to held-out questions equal ours, token for token.

# %%
summary = pt.save(cfg, out_dir, loop, result, tokenizer, model=gpt)
{k: summary[k] for k in ("objective", "model", "steps", "train_tokens", "eval_loss", "untrained_eval_loss",
                         "device", "precision")}

# %%
from transformers import pipeline

chat = pipeline("text-generation", model=str(out_dir / "model"))
prompts = [history[:-1]] + [ex["messages"][:-1] for ex in test[:3]]
ours = [history[-1]["content"]] + after[:3]
for messages, mine in zip(prompts, ours):
    room = min(max_new_tokens, context - prompt_tokens(messages))     # as ours: what the context leaves
    theirs = chat(messages, max_new_tokens=room)[0]["generated_text"][-1]["content"]
    print(f"pipeline: {theirs!r}\nours    : {mine!r}")
    assert theirs == mine, "the exported model must answer as the notebook did"
print("same answers: yes")

# %% [markdown]
# **Next:** `NBKIT_SCALE=gpu` trains on every training conversation; `-p init <folder>` tunes a published causal LM (UER's Chinese GPT-2, or a Llama-layout checkpoint, whose own chat template is kept); `-p corpus my_chats.jsonl` tunes on your conversations. LoRA adapters, and the job for several GPUs: docs/instruct.md.
