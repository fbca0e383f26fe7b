"""The baselines of instruction tuning's evaluation (nbkit.evaluate.instruct): TF-IDF and CRF answers written as
the demo's answers so the same reader scores them, the held-out questions that fit the context, notebook 03's
recorded accuracy, and the comparison rows."""
from __future__ import annotations

import json

import pytest

from nbkit.errors import DataError
from nbkit.evaluate import instruct as ev


def example(task, text, gold, answer):
    return {"task": task, "text": text, "gold": gold,
            "messages": [{"role": "user", "content": f"问：{text}"}, {"role": "assistant", "content": answer}]}


def bio(sentence: str, names: dict[str, str]) -> dict:
    """People's Daily-style item: characters and BIO tags of the given name -> type."""
    tags = ["O"] * len(sentence)
    for name, kind in names.items():
        start = sentence.index(name)
        tags[start:start + len(name)] = [f"B-{kind}"] + [f"I-{kind}"] * (len(name) - 1)
    return {"tokens": list(sentence), "tags": tags}


SENTENCES = [("张三在北京工作。", {"张三": "PER", "北京": "LOC"}), ("李四去了上海。", {"李四": "PER", "上海": "LOC"}),
             ("王五住在广州。", {"王五": "PER", "广州": "LOC"}), ("今天下雨了。", {})] * 5


def test_baselines_answer_as_the_demo_answers_and_are_scored_by_the_same_reader():
    train = [example("sentiment", t, g, "正面" if g == "positive" else "负面")
             for t, g in [("很好用，满意", "positive"), ("太差了，失望", "negative")] * 6]
    train += [example("persons", s, [n for n, k in names.items() if k == "PER"], "、".join(
        n for n, k in names.items() if k == "PER") or "无") for s, names in SENTENCES]
    held = [example("sentiment", "很好，满意", "positive", "正面"), example("sentiment", "很差，失望", "negative", "负面"),
            example("persons", "张三在北京工作。", ["张三"], "张三"), example("places", "今天下雨了。", [], "无")]
    items = [bio(s, names) for s, names in SENTENCES] + [bio("赵六在南京。", {"赵六": "PER", "南京": "LOC"})]
    answers = ev.baseline_answers(held, train, items, crf_iter=50)
    assert answers == ["正面", "负面", "张三", "无"]
    scores = ev.score_answers(held, answers, n_boot=50)
    assert scores["sentiment"]["value"] == 1.0 and scores["persons"]["value"] == 1.0
    assert all(s["form_share"] == 1.0 for s in scores.values())
    rows = ev.comparison_rows({"TF-IDF / CRF": scores})
    assert [(r["model"], r["task"]) for r in rows] == [("TF-IDF / CRF", t) for t in ("sentiment", "persons", "places")]
    with pytest.raises(DataError, match="none of the training examples' sentences"):
        ev.baseline_answers(held[2:], train, [bio("别的句子。", {})])


def test_the_held_out_questions_are_those_that_fit_the_context_at_most_per_task(tmp_path):
    from transformers import AutoTokenizer

    from nbkit.models.standin import build_standin
    from nbkit.text.chat import with_chat_template

    tok = AutoTokenizer.from_pretrained(str(build_standin(tmp_path / "gpt2", "uer-gpt2")))
    with_chat_template(tok)
    held = [example("sentiment", "好" * n, "positive", "正面") for n in (5, 60, 6, 7)]
    held.append(example("places", "北京", ["北京"], "北京"))
    kept = ev.fitting_examples(tok, held, 32, per_task=2)
    assert [ex["text"] for ex in kept] == ["好" * 5, "好" * 6, "北京"]          # 60 characters do not fit in 32


def test_notebook_03s_recorded_accuracy_is_read_with_its_test_size(tmp_path):
    assert ev.classifier_summary(tmp_path) is None
    (tmp_path / "metrics.json").write_text(json.dumps({"test_accuracy": 0.8, "n_test": 1736}), encoding="utf-8")
    assert ev.classifier_summary(tmp_path) == {"test_accuracy": 0.8, "n": 1736, "run_dir": str(tmp_path)}
