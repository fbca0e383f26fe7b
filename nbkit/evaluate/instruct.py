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
    leaves after the question. ``stop_ids``: where generation stops (None: the model's generation config's
    ``eos_token_id``). Returns ``(answers, n_unfinished)``: the decoded new text per example (special tokens
    dropped, Chinese without spaces), and how many stopped at the token limit before a stop token.

    Keep to the examples whose conversation fits the context, as training does:
    ``encode_conversations(tok, [ex["messages"] for ex in examples], context)[0]["index"]`` lists them.

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
