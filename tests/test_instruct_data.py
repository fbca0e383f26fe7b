"""Instruction data (nbkit.data.instruct): the three JSON-lines shapes, every bad-input case raised with its file
and line or skipped and counted, and the demo set built from the bundled labels with notebooks 03 and 07's splits
(no text of their held-out sets in training)."""
from __future__ import annotations

import json

import pytest

from nbkit.data import instruct
from nbkit.errors import ConfigError, DataError

ALPACA = {"instruction": "列出句中的人名", "input": "江泽民会见李鹏。", "output": "江泽民、李鹏"}
SHAREGPT = {"system": "你是助手。", "conversations": [{"from": "human", "value": "你好"}, {"from": "gpt", "value": "你好！"},
                                                      {"from": "human", "value": "再见"}, {"from": "gpt", "value": "再见！"}]}
OPENAI = {"messages": [{"role": "user", "content": [{"type": "text", "text": "这条评论"}, {"type": "text", "text": "好吗"}]},
                       {"role": "assistant", "content": "正面"}]}


def write(path, rows) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows),
                    encoding="utf-8")
    return str(path)


def test_the_three_shapes_are_read_per_line(tmp_path):
    path = write(tmp_path / "mixed.jsonl", [ALPACA, SHAREGPT, "", OPENAI, {**ALPACA, "input": ""}])
    data = instruct.read_conversations(path)
    assert data.report["shapes"] == {"alpaca": 2, "sharegpt": 1, "openai": 1} and data.report["n_read"] == 4
    assert data.conversations[0] == [{"role": "user", "content": "列出句中的人名\n江泽民会见李鹏。"},
                                     {"role": "assistant", "content": "江泽民、李鹏"}]
    assert [m["role"] for m in data.conversations[1]] == ["system", "user", "assistant", "user", "assistant"]
    assert data.conversations[2][0]["content"] == "这条评论好吗"                 # text parts joined
    assert data.conversations[3][0]["content"] == "列出句中的人名"                # empty input: the instruction alone
    assert data.origins == ["mixed.jsonl line 1", "mixed.jsonl line 2", "mixed.jsonl line 4", "mixed.jsonl line 5"]
    array = tmp_path / "alpaca_data.json"                                     # Alpaca's own file: one JSON array
    array.write_text(json.dumps([ALPACA, ALPACA]), encoding="utf-8")
    both = instruct.read_conversations([path, array])
    assert both.report["n_kept"] == 6 and both.origins[-1] == "alpaca_data.json record 2"


BAD_CASES = {
    "invalid_json": ('{"instruction": "x", "output": ', r"line 2: not valid JSON"),
    "unknown_shape": ({"prompt": "x", "completion": "y"}, r"line 2: an object with keys \['completion', 'prompt'\]"),
    "unknown_role": ({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "content": "y"}]},
                     r"line 2: turn 2 has role 'tool'"),
    "role_order": ({"messages": [{"role": "user", "content": "x"}, {"role": "user", "content": "y"},
                                 {"role": "assistant", "content": "z"}]}, r"line 2: turn 2 is 'user' where 'assistant'"),
    "not_text": ({"instruction": "x", "output": {"answer": "y"}}, r"line 2: output is a JSON object, not text"),
    "empty_content": ({"conversations": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "  "}]},
                      r"line 2: turn 2's content is empty"),
    "no_assistant": ({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "x"}]},
                     r"line 2: no assistant turn"),
}


@pytest.mark.parametrize("kind", list(BAD_CASES))
def test_each_bad_record_is_named_by_file_and_line_or_skipped_and_counted(tmp_path, kind):
    record, message = BAD_CASES[kind]
    path = write(tmp_path / "data.jsonl", [OPENAI, record, OPENAI])
    with pytest.raises(DataError, match=rf"data.jsonl {message}.*\({kind}\).*bad_records='skip'"):
        instruct.read_conversations(path)
    data = instruct.read_conversations(path, bad="skip")
    assert data.report["n_kept"] == 2 and data.report["dropped"] == {**dict.fromkeys(instruct.PROBLEMS, 0), kind: 1}
    assert data.report["where"] == {kind: ["data.jsonl line 2"]}


def test_a_number_is_read_as_its_text_and_a_json_null_line_is_named_as_json(tmp_path):
    data = instruct.read_conversations(write(tmp_path / "n.jsonl", [{"instruction": "1+1=?", "output": 2}]))
    assert data.conversations[0][-1] == {"role": "assistant", "content": "2"}
    with pytest.raises(DataError, match=r"line 1: a JSON null, not an object"):
        instruct.read_conversations(write(tmp_path / "null.jsonl", [None]))


def test_turns_after_the_last_answer_are_cut_and_counted(tmp_path):
    trailing = {"conversations": [*SHAREGPT["conversations"], {"from": "human", "value": "还在吗？"}]}
    data = instruct.read_conversations(write(tmp_path / "t.jsonl", [trailing, SHAREGPT]))
    assert data.report["n_trailing_turns_cut"] == 1
    assert data.conversations[0][-1] == {"role": "assistant", "content": "再见！"}


def test_files_and_settings_that_cannot_be_read(tmp_path):
    with pytest.raises(ConfigError, match="bad='drop'"):
        instruct.read_conversations(write(tmp_path / "a.jsonl", [OPENAI]), bad="drop")
    with pytest.raises(DataError, match="unsupported extension '.csv'"):
        instruct.read_conversations(write(tmp_path / "a.csv", [OPENAI]))
    with pytest.raises(DataError, match=r"no conversation left.*'no_assistant': 1"):
        instruct.read_conversations(write(tmp_path / "b.jsonl", [BAD_CASES["no_assistant"][0]]), bad="skip")
    broken = tmp_path / "c.json"
    broken.write_text("[{", encoding="utf-8")
    with pytest.raises(DataError, match="c.json: not valid JSON"):
        instruct.read_conversations(broken)


@pytest.fixture(scope="module")
def demo():
    return instruct.demo_conversations(seed=0, ner_lines=600)


def test_the_demo_keeps_notebook_03_and_07_held_out_texts_out_of_training(demo):
    from nbkit.data.corpora import load_sentiment
    from nbkit.data.ner import load_peoples_daily_ner

    splits, report = demo
    reviews = load_sentiment(seed=0).splits
    sentences = load_peoples_daily_ner(lines=600, seed=0).splits
    held_out = {s: set(reviews[s]["text"]) | {"".join(it["tokens"]) for it in sentences[s]}
                for s in ("validation", "test")}
    train = {ex["text"] for ex in splits["train"]}
    assert train and not train & held_out["test"] and not train & held_out["validation"]
    # every held-out text of both notebooks is in the demo's split of the same name, and only there
    for split in ("validation", "test"):
        assert {ex["text"] for ex in splits[split]} == held_out[split]
    assert report["sentiment"]["train"]["n"] == len(reviews["train"])
    assert report["persons"]["test"]["n"] == report["places"]["test"]["n"] == len(sentences["test"])


def test_the_demo_questions_answers_and_phrasings(demo):
    splits, report = demo
    train = splits["train"]
    for task in instruct.TASKS:
        rows = [ex for ex in train if ex["task"] == task]
        assert {ex["phrasing"] for ex in rows} == set(range(len(instruct.PHRASINGS[task])))   # every one is used
        assert all(ex["messages"][0]["content"] == instruct.PHRASINGS[task][ex["phrasing"]].format(text=ex["text"])
                   for ex in rows)
    sentiment = [ex for ex in train if ex["task"] == "sentiment"]
    assert {ex["messages"][1]["content"] for ex in sentiment} == {"正面", "负面"}
    assert all(ex["messages"][1]["content"] == instruct.SENTIMENT_ANSWERS[ex["gold"]] for ex in sentiment)
    persons = [ex for ex in train if ex["task"] == "persons"]
    with_names = [ex for ex in persons if ex["gold"]]
    assert with_names and all(ex["messages"][1]["content"] == "、".join(ex["gold"]) for ex in with_names)
    assert all(name in ex["text"] for ex in with_names for name in ex["gold"])
    nones = [ex for ex in persons if not ex["gold"]]
    assert len(nones) == report["persons"]["train"]["n_none"] and nones[0]["messages"][1]["content"] == "无"


def test_the_demo_cuts_long_texts_and_lists_the_names_inside_the_cut():
    splits, report = instruct.demo_conversations(seed=0, ner_lines=600, tasks=("persons",), max_per_task=200,
                                                 max_chars=12)
    rows = splits["train"]
    assert len(rows) == 200 and all(len(ex["text"]) <= 12 for ex in rows) and report["persons"]["train"]["n_cut"] > 0
    assert all(name in ex["text"] for ex in rows for name in ex["gold"])
    with pytest.raises(ConfigError, match="tasks=\\('poems',\\)"):
        instruct.demo_conversations(tasks=("poems",))


def test_invalid_json_names_the_column_on_its_own_line(tmp_path):
    path = tmp_path / "cols.jsonl"
    path.write_text('{"instruction": "x", "output": }\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"cols.jsonl line 1: not valid JSON \(.*column 32"):
        instruct.read_conversations(path)


def test_a_lone_surrogate_in_a_message_is_read_as_ufffd_counted_and_warned(tmp_path):
    """Half an emoji as a JSON escape would reach the tokenizer (a TypeError naming no file): read as U+FFFD as
    labelled files do, counted, located and warned."""
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(OPENAI, ensure_ascii=False) + "\n"
                    + '{"instruction": "\\ud83d列出人名", "output": "李鹏\\ude00"}\n', encoding="utf-8")
    with pytest.warns(UserWarning, match=r"chat\.jsonl: 1 line\(s\) with a lone surrogate escape .* U\+FFFD: line 2"):
        data = instruct.read_conversations(str(path))
    assert data.conversations[1] == [{"role": "user", "content": "\ufffd列出人名"},
                                     {"role": "assistant", "content": "李鹏\ufffd"}]
    assert data.report["n_repaired_surrogates"] == 1 and data.report["surrogate_records"] == ["chat.jsonl line 2"]
