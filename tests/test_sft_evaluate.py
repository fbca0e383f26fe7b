"""Scoring instruction answers (nbkit.evaluate.instruct): how answers are read, the form share counted on hand-made
answers, set-based micro F1 of listed names, intervals over examples, and generation on a tiny model."""
from __future__ import annotations

import pytest

from nbkit.errors import DataError
from nbkit.evaluate.instruct import generate_answers, read_answer, score_answers

TEXT = "江泽民在北京会见李鹏。"


def example(task, gold, text=TEXT, answer="无"):
    return {"task": task, "text": text, "gold": gold,
            "messages": [{"role": "user", "content": f"问：{text}"}, {"role": "assistant", "content": answer}]}


def test_answers_are_read_leniently_and_their_form_strictly():
    assert read_answer("sentiment", "正面。", TEXT) == ("positive", True)
    assert read_answer("sentiment", "我觉得是负面的", TEXT) == ("negative", False)      # read, but not the form
    assert read_answer("sentiment", "正面还是负面", TEXT) == (None, False)               # both: wrong
    assert read_answer("persons", "江泽民、李鹏", TEXT) == ({"江泽民", "李鹏"}, True)
    assert read_answer("persons", "无", TEXT) == (set(), True)
    assert read_answer("persons", "江泽民，李鹏", TEXT) == ({"江泽民", "李鹏"}, False)   # another separator
    assert read_answer("persons", "江泽民、王五", TEXT) == ({"江泽民", "王五"}, False)   # a name not in the sentence
    assert read_answer("persons", "", TEXT) == (set(), False)


def test_scores_form_shares_and_intervals_on_hand_made_answers():
    examples = [example("sentiment", "positive"), example("sentiment", "negative"), example("sentiment", "negative"),
                example("sentiment", "positive"),
                example("persons", ["江泽民", "李鹏"]), example("persons", []), example("persons", ["李鹏"]),
                example("places", ["北京"])]
    answers = ["正面", "负面", "正面", "好评", "江泽民、王五", "无", "李鹏", "北京、北京"]
    scores = score_answers(examples, answers, n_boot=200)
    s, p, loc = scores["sentiment"], scores["persons"], scores["places"]
    assert (s["metric"], s["n"], s["value"], s["form_share"]) == ("accuracy", 4, 0.5, 0.75)
    # persons: tp 江泽民 + 李鹏 = 2, fp 王五 = 1, fn 李鹏 (first sentence) = 1: P = R = F1 = 2/3
    assert (p["tp"], p["fp"], p["fn"]) == (2, 1, 1) and p["value"] == pytest.approx(2 / 3)
    assert p["form_share"] == pytest.approx(2 / 3)                                    # 王五 is not in the sentence
    assert loc["value"] == 1.0 and loc["form_share"] == 1.0                            # a name said twice counts once
    for row in scores.values():
        for low, value, high in ((row["low"], row["value"], row["high"]),
                                 (row["form_low"], row["form_share"], row["form_high"])):
            assert 0.0 <= low <= value <= high <= 1.0
    assert s["low"] < s["high"]                                                        # not a point: examples vary
    with pytest.raises(DataError, match="3 answers for 8 examples"):
        score_answers(examples, answers[:3])


def test_generated_answers_of_a_tiny_model_score_in_range(tmp_path):
    from transformers import AutoTokenizer

    from nbkit.models.causal import build_causal_model
    from nbkit.models.standin import build_standin
    from nbkit.text.chat import with_chat_template

    tok = AutoTokenizer.from_pretrained(str(build_standin(tmp_path / "uer", "uer-gpt2")))
    info = with_chat_template(tok)
    model = build_causal_model("gpt2-tiny", tok, 128, seed=0)
    examples = [example("sentiment", "positive", "很好用", "正面"), example("persons", ["李鹏"], "李鹏讲话。", "李鹏")]
    answers, unfinished = generate_answers(model, tok, examples, max_new_tokens=5,
                                           stop_ids=[info["end_of_turn_id"], tok.sep_token_id])
    assert len(answers) == 2 and all(isinstance(a, str) for a in answers) and 0 <= unfinished <= 2
    assert "[unused" not in "".join(answers)                                           # markers are not text
    scores = score_answers(examples, answers, n_boot=50)
    assert all(0.0 <= r["value"] <= 1.0 and 0.0 <= r["form_share"] <= 1.0 for r in scores.values())
    long = example("sentiment", "positive", "好" * 130, "正面")
    with pytest.raises(DataError, match="example 0's question is 1.. tokens, leaving no room.*encode_conversations"):
        generate_answers(model, tok, [long])
    with pytest.raises(DataError, match="example 0 does not end with the gold assistant turn"):
        generate_answers(model, tok, [{"messages": examples[0]["messages"][:1]}])
