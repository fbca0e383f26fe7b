"""Scoring an instruction-tuned causal LM by what it writes: answers generated for held-out questions
(:func:`generate_answers`), read and scored per task (:func:`score_answers`), with percentile-bootstrap intervals
over the examples.

- ``sentiment``: accuracy. An answer holding exactly one of ``正面`` / ``负面`` is read as that label (anything
  else is wrong); it is in the expected form when it is exactly that word (punctuation and spaces around aside).
- ``persons`` / ``places``: entity F1 of the listed names, set-based per sentence and micro-averaged: the answer
  split at ``、，,；;`` and spaces is a set of names (``无``: the empty set), each predicted name that is one of the
  sentence's gold names is a true positive; precision, recall and F1 from the summed counts. Not seqeval's span
  F1: a name said twice or at another place in the sentence counts once. In the expected form: ``无``, or names
  separated by ``、`` each found in the sentence.

The held-out loss on the assistant's tokens is the training loop's (``eval_loss`` over the validation
conversations, the prompt's tokens unscored).
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from nbkit.errors import DataError

_SPLIT = re.compile(r"[、，,；;\s]+")
_STRIP = " \t\r\n。．.！!？?"
_LABELS = {"正面": "positive", "负面": "negative"}


def read_answer(task: str, answer: str, text: str) -> tuple[object, bool]:
    """``(prediction, in_form)`` of one generated ``answer`` to a question about ``text`` (the rules in the
    module's docstring): sentiment a label name or None, entity tasks a set of names."""
    from nbkit.data.instruct import NAME_SEPARATOR, NONE_ANSWER

    said = answer.strip(_STRIP)
    if task == "sentiment":
        found = [label for word, label in _LABELS.items() if word in said]
        return (found[0] if len(found) == 1 else None), said in _LABELS
    if said == NONE_ANSWER:
        return set(), True
    names = {n for n in _SPLIT.split(said) if n and n != NONE_ANSWER}
    parts = said.split(NAME_SEPARATOR)
    return names, bool(said) and all(p and p in text for p in parts)


def _f1(tp: float, fp: float, fn: float) -> float:
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def score_answers(examples: Sequence[dict], answers: Sequence[str], n_boot: int = 1000, level: float = 0.95,
                  seed: int = 0) -> dict:
    """Per task of ``examples`` (:func:`nbkit.data.instruct.demo_conversations` items: ``task``, ``text``,
    ``gold``) and the ``answers`` generated for them (same order): ``{task: {"n", "metric" ("accuracy" or
    "f1"), "value", "low", "high", "form_share", "form_low", "form_high"}}`` (shares 0-1; entity tasks add
    ``precision``, ``recall``, ``tp``, ``fp``, ``fn``). Intervals: percentile bootstrap (``n_boot`` resamples of the
    task's examples, ``level`` coverage, ``seed``; :func:`nbkit.evaluate.stats.resample_indices`).

    Raises:
        DataError: answers and examples differ in number, or no example.
    """
    import numpy as np

    from nbkit.evaluate.stats import percentile_interval, resample_indices

    if len(answers) != len(examples) or not examples:
        raise DataError(f"{len(answers)} answers for {len(examples)} examples: pass one generated answer per example "
                        "(generate_answers(model, tok, examples))")
    out: dict[str, dict] = {}
    for task in dict.fromkeys(ex["task"] for ex in examples):
        rows = [(ex, a) for ex, a in zip(examples, answers) if ex["task"] == task]
        read = [read_answer(task, a, ex["text"]) for ex, a in rows]
        form = np.array([ok for _, ok in read], dtype=float)                                     # (N,)
        if task == "sentiment":
            hits = np.array([p == ex["gold"] for (ex, _), (p, _) in zip(rows, read)], dtype=float)  # (N,)

            def metric(idx, hits=hits):
                return float(hits[idx].mean())
            extra = {"metric": "accuracy"}
        else:
            counts = np.array([(len(p & set(ex["gold"])), len(p - set(ex["gold"])), len(set(ex["gold"]) - p))
                               for (ex, _), (p, _) in zip(rows, read)], dtype=float)           # (N, 3) tp fp fn

            def metric(idx, counts=counts):
                return _f1(*counts[idx].sum(0))
            tp, fp, fn = counts.sum(0)
            extra = {"metric": "f1", "precision": tp / (tp + fp) if tp + fp else 0.0,
                     "recall": tp / (tp + fn) if tp + fn else 0.0, "tp": int(tp), "fp": int(fp), "fn": int(fn)}
        n = len(rows)
        boots = list(resample_indices(n, n_boot, seed))
        low, high = percentile_interval([metric(i) for i in boots], level)
        form_low, form_high = percentile_interval([float(form[i].mean()) for i in boots], level)
        out[task] = {"n": n, **extra, "value": metric(np.arange(n)), "low": low, "high": high,
                     "form_share": float(form.mean()), "form_low": form_low, "form_high": form_high, "level": level}
    return out


def generate_answers(model, tok, examples: Sequence[dict], max_new_tokens: int = 32,
                     stop_ids: Sequence[int] | None = None) -> tuple[list[str], int]:
    """Greedy answers of ``model`` (a causal LM) to each example's question: its ``messages`` without the last
    (the gold answer) through ``tok``'s chat template with the generation prompt, as ``pipeline("text-generation")``
    encodes them, one example at a time, writing at most ``max_new_tokens`` and at most what the model's context
    leaves. ``stop_ids``: where generation stops (None: the generation config's ``eos_token_id``). Returns
    ``(answers, n_unfinished)``: the decoded new text per example (special tokens dropped, Chinese without spaces),
    and how many stopped at the token limit. Keep to the examples that fit (:func:`fitting_examples`).

    Raises:
        DataError: an example whose ``messages`` do not end with the gold assistant turn, or whose question
            leaves no room in the context (which one, and how to keep to those that fit).
    """
    import torch

    from nbkit.models.causal import generation_config, positions
    from nbkit.models.loading import quiet_transformers
    from nbkit.switches import model_mode
    from nbkit.text.tokenizer_files import cjk_decoding

    gen = generation_config(model.config, max_new_tokens)
    if stop_ids is not None:
        gen.eos_token_id = list(stop_ids)
    stops = set(gen.eos_token_id if isinstance(gen.eos_token_id, list) else [gen.eos_token_id])
    decoder = cjk_decoding(tok)
    device = next(model.parameters()).device
    context = positions(model.config)
    answers, unfinished = [], 0
    with model_mode(model, training=False), torch.no_grad(), quiet_transformers():
        for i, ex in enumerate(examples):
            messages = ex["messages"]
            if not messages or messages[-1]["role"] != "assistant":
                raise DataError(f"example {i} does not end with the gold assistant turn; pass "
                                "demo_conversations' examples (user question, assistant answer)")
            ids = tok.apply_chat_template(messages[:-1], add_generation_prompt=True, tokenize=True,
                                          return_dict=True)["input_ids"]
            room = min(max_new_tokens, context - len(ids))
            if room < 1:
                raise DataError(f"example {i}'s question is {len(ids)} tokens, leaving no room in the model's context "
                                f"of {context}: keep to the examples that fit, nbkit.text.chat.encode_conversations("
                                "tok, [ex['messages'] for ex in examples], context)[0]['index']")
            prompt = torch.tensor([ids], device=device)                                  # (1, T)
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=gen,
                                 max_new_tokens=room)                                    # (1, T + n)
            new = out[0, len(ids):].tolist()
            unfinished += not (new and new[-1] in stops)
            answers.append(decoder.decode(new, skip_special_tokens=True))
    return answers, unfinished


def fitting_examples(tok, examples: Sequence[dict], context: int, per_task: int | None = None) -> list[dict]:
    """The ``examples`` whose whole conversation fits ``context`` tokens under ``tok``'s chat template (as training
    keeps them: :func:`nbkit.text.chat.encode_conversations`), at most the first ``per_task`` of each task, in
    their order: the held-out questions to score by generation, and the baselines on the same ones.

    Raises:
        DataError: none fits (the fix named).
    """
    from nbkit.text.chat import encode_conversations

    cols, _ = encode_conversations(tok, [ex["messages"] for ex in examples], context)
    seen: dict[str, int] = {}
    out = []
    for i in cols["index"]:
        task = examples[i].get("task")
        if per_task is None or seen.get(task, 0) < per_task:
            seen[task] = seen.get(task, 0) + 1
            out.append(examples[i])
    return out


def baseline_answers(examples: Sequence[dict], train: Sequence[dict], ner_items: Sequence[dict] = (),
                     crf_iter: int = 100) -> list[str]:
    """The classical baselines' answer to each of ``examples``, written as the demo's answers are, so that
    :func:`score_answers` scores them as it scores the model's: ``sentiment`` by
    :func:`nbkit.evaluate.baseline.fit_tfidf_baseline` fit on ``train``'s sentiment examples; ``persons`` /
    ``places`` by :class:`nbkit.evaluate.ner.CrfTagger` (``crf_iter`` iterations) fit on the sentences of
    ``ner_items`` (notebook 07's training split) that are ``train``'s entity texts, cut as they were.

    Raises:
        DataError: an entity example without ``ner_items`` that hold its training sentences, or a task with no
            training examples (the baseline has nothing to fit).
    """
    from nbkit.data.instruct import NAME_SEPARATOR, NONE_ANSWER, SENTIMENT_ANSWERS, entity_names

    tasks = set(ex["task"] for ex in examples)
    answers: dict[int, str] = {}
    if "sentiment" in tasks:
        from nbkit.evaluate.baseline import fit_tfidf_baseline

        fit = [ex for ex in train if ex["task"] == "sentiment"]
        if not fit:
            raise DataError("no sentiment example in train: pass the training split the model was tuned on")
        tfidf = fit_tfidf_baseline([ex["text"] for ex in fit], [ex["gold"] for ex in fit], min_df=1)
        idx = [i for i, ex in enumerate(examples) if ex["task"] == "sentiment"]
        for i, label in zip(idx, tfidf.predict([examples[i]["text"] for i in idx])):
            answers[i] = SENTIMENT_ANSWERS[label]
    kinds = {"persons": "PER", "places": "LOC"}
    if tasks & set(kinds):
        from nbkit.evaluate.ner import CrfTagger

        texts = {ex["text"] for ex in train if ex["task"] in kinds}
        cut = max(map(len, texts), default=0)
        items = [{"tokens": list(it["tokens"][:cut]), "tags": list(it["tags"][:cut])} for it in ner_items
                 if "".join(it["tokens"][:cut]) in texts]
        if not items:
            raise DataError("none of the training examples' sentences is in ner_items: pass "
                            "load_peoples_daily_ner(lines=cfg.corpus_lines, seed=cfg.split_seed).splits['train']")
        crf = CrfTagger.fit(items, max_iter=crf_iter)
        for i, ex in enumerate(examples):
            if ex["task"] in kinds:
                names = entity_names(list(ex["text"]), crf.tags(list(ex["text"])), kinds[ex["task"]])
                answers[i] = NAME_SEPARATOR.join(names) or NONE_ANSWER
    return [answers[i] for i in range(len(examples))]


def classifier_answers(model_dir, examples: Sequence[dict], batch_size: int = 32) -> list[str]:
    """Answers of a fine-tuned sentiment classifier (notebook 03's exported ``model_dir``, read through
    ``pipeline("text-classification")``, reviews cut at its ``model_max_length``) to the sentiment ones of
    ``examples``: ``正面`` / ``负面`` by its label names (``positive`` / ``negative``), in their order.

    Raises:
        DataError: no sentiment example, or a label name the demo answers do not know (not notebook 03's model).
    """
    from transformers import pipeline

    from nbkit.data.instruct import SENTIMENT_ANSWERS
    from nbkit.models.loading import quiet_transformers

    texts = [ex["text"] for ex in examples if ex["task"] == "sentiment"]
    if not texts:
        raise DataError("no sentiment example to classify: pass the held-out demo examples")
    with quiet_transformers():
        clf = pipeline("text-classification", model=str(model_dir), device="cpu")
        said = clf(texts, batch_size=batch_size, truncation=True)
    unknown = sorted({s["label"] for s in said} - set(SENTIMENT_ANSWERS))
    if unknown:
        raise DataError(f"{model_dir} answers labels {unknown}, not {sorted(SENTIMENT_ANSWERS)}: pass notebook 03's "
                        "sentiment model (runs/<scale>/sentiment/model)")
    return [SENTIMENT_ANSWERS[s["label"]] for s in said]


def comparison_rows(scored: dict[str, dict]) -> list[dict]:
    """One row per model and task of ``scored`` (model name -> :func:`score_answers`'s result): ``model``,
    ``task``, ``metric``, ``n``, ``value``, ``low``, ``high`` (the interval), ``form_share`` (0-1), in the order
    given."""
    return [{"model": name, "task": task, "metric": s["metric"], "n": s["n"], "value": s["value"], "low": s["low"],
             "high": s["high"], "form_share": s["form_share"]}
            for name, scores in scored.items() for task, s in scores.items()]


def classifier_summary(run_dir) -> dict | None:
    """Notebook 03's recorded test score in ``run_dir/metrics.json``: ``{"test_accuracy", "n", "run_dir"}`` over
    its whole test split (the demo's held-out reviews are drawn from that split: a subset, other questions), or
    None when the run has no ``metrics.json`` or no test accuracy."""
    from pathlib import Path

    from nbkit import jsonio

    path = Path(run_dir) / "metrics.json"
    if not path.is_file():
        return None
    metrics = jsonio.loads_strict(path.read_text(encoding="utf-8"))
    if metrics.get("test_accuracy") is None:
        return None
    return {"test_accuracy": metrics["test_accuracy"], "n": metrics.get("n_test"), "run_dir": str(run_dir)}
