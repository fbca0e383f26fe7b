"""Token classification encoding (nbkit.text.token_classification): sub-token alignment, training windows; and
the pipeline's spans read back as one tag per token (nbkit.evaluate.ner_report.pipeline_tags), the step through
which the job's own evaluation tags."""
import random

import pytest
from _ner_items import LABELS, sentence

from nbkit.errors import ConfigError, DataError
from nbkit.evaluate.ner_report import pipeline_tags
from nbkit.text.token_classification import encode_token_classification, window_starts

LABEL2ID = {name: i for i, name in enumerate(LABELS)}
ID2LABEL = dict(enumerate(LABELS))


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    """bert-base-chinese's tokenizer layout (a stand-in); the encoding reads every character alone, Latin ones too."""
    from transformers import AutoTokenizer

    from nbkit.models.standin import build_standin

    return AutoTokenizer.from_pretrained(str(build_standin(tmp_path_factory.mktemp("standin") / "bert")))


def test_first_subtoken_carries_the_label_the_rest_are_ignored(tok):
    item = {"tokens": ["我", "看", "NBA", "比", "赛"], "tags": ["O", "O", "B-ORG", "O", "O"]}
    enc = encode_token_classification([item], tok, LABEL2ID, max_length=32)
    ids, labels = enc.dataset[0]["input_ids"], enc.dataset[0]["labels"]
    pieces = tok.convert_ids_to_tokens(ids)
    assert pieces[:1] == ["[CLS]"] and pieces[-1] == "[SEP]"
    assert pieces[3:6] == ["N", "B", "A"]                         # one word, three sub-tokens: one per character
    assert labels == [-100, 0, 0, LABEL2ID["B-ORG"], -100, -100, 0, 0, -100]
    assert enc.word_ids[0] == [0, 1, 2, 2, 2, 3, 4]
    assert enc.report["n_multi_subtoken_words"] == 1 and enc.report["n_extra_subtokens"] == 2
    assert enc.report["n_windows"] == 1 and enc.report["n_windowed"] == 0


def fake_pipe(spans_per_item):
    """A stand-in for ``pipeline("token-classification", aggregation_strategy="simple")`` that returns given spans,
    checking it is called as pipeline_tags must call it (words in, no delimiter)."""
    calls = []

    def pipe(texts, is_split_into_words, delimiter, batch_size, **extra):
        assert is_split_into_words is True and delimiter == "" and all(isinstance(t, list) for t in texts)
        calls.append(extra)
        return [[{"entity_group": g, "start": a, "end": b, "score": 0.9} for g, a, b in spans]
                for spans in spans_per_item]
    pipe.calls = calls
    return pipe


def test_pipeline_spans_become_one_tag_per_character():
    items = [{"tokens": list("张三在北京")}, {"tokens": list("新华社新华社")}]
    pipe = fake_pipe([[("PER", 0, 2), ("LOC", 3, 5)], [("ORG", 0, 3), ("ORG", 3, 6)]])
    assert pipeline_tags(pipe, items, stride=8) == [["B-PER", "I-PER", "O", "B-LOC", "I-LOC"],
                                                     ["B-ORG", "I-ORG", "I-ORG", "B-ORG", "I-ORG", "I-ORG"]]
    assert pipe.calls == [{"stride": 8}]
    assert pipeline_tags(fake_pipe([]), []) == []


def test_a_word_of_several_characters_takes_the_span_at_its_first_character():
    """Offsets count characters of the words joined; a word is tagged from its first character's span, so a span
    that starts inside a word (a later sub-token's prediction) does not tag that word."""
    items = [{"tokens": ["我", "看", "NBA", "比", "赛"]}] * 4
    pipe = fake_pipe([[("ORG", 2, 5)], [("ORG", 2, 6)], [("ORG", 3, 5)], [("ORG", 3, 6)]])
    assert pipeline_tags(pipe, items) == [["O", "O", "B-ORG", "O", "O"], ["O", "O", "B-ORG", "I-ORG", "O"],
                                          ["O", "O", "O", "O", "O"], ["O", "O", "O", "I-ORG", "O"]]


def test_a_word_the_tokenizer_drops_inside_a_span_continues_the_entity():
    items = [{"tokens": ["王", " ", "明", "说"]}]                  # the space has no sub-token; the span covers it
    assert pipeline_tags(fake_pipe([[("PER", 0, 3)]]), items) == [["B-PER", "I-PER", "I-PER", "O"]]


def test_window_starts_cover_everything_with_the_stride():
    assert window_starts(10, 14, 4) == [0]
    assert window_starts(20, 14, 4) == [0, 6]
    starts = window_starts(100, 30, 10)
    assert starts[0] == 0 and starts[-1] == 70 and all(b - a <= 20 for a, b in zip(starts, starts[1:]))
    with pytest.raises(ConfigError, match="stride=14 must be between 0 and 13"):
        window_starts(20, 14, 14)


def test_long_sentences_are_windowed_with_every_label_kept(tok):
    """A 12-entity sentence far over max_length: windows of at most max_length, and every token's gold label is in
    some window, so every entity trains."""
    rng = random.Random(3)
    items = [sentence(rng, 12, i) for i in range(3)] + [sentence(rng, 1, 9)]
    enc = encode_token_classification(items, tok, LABEL2ID, max_length=16, stride=4)
    assert enc.report["n_windowed"] == 3 and enc.report["n_windows"] > 3 * 3
    assert max(len(r) for r in enc.dataset["input_ids"]) <= 16
    seen = [dict() for _ in items]
    for (item, start), labels in zip(enc.windows, enc.dataset["labels"]):
        for k, label in enumerate(labels[1:-1]):
            seen[item][start + k] = label
    assert [[ID2LABEL[seen[i][t]] for t in range(len(it["tokens"]))] for i, it in enumerate(items)] == \
        [it["tags"] for it in items]


def test_as_many_windows_as_the_pipelines_tokenizer_makes(tok):
    """The report's window count is the one the prediction pipeline tags with (the fast tokenizer's overflow at
    the same max_length and stride), though the last window is placed differently."""
    rng = random.Random(5)
    items = [sentence(rng, n, i) for i, n in enumerate([1, 4, 9, 12, 20])]
    for max_length, stride in [(16, 4), (24, 0), (32, 10)]:
        enc = encode_token_classification(items, tok, LABEL2ID, max_length=max_length, stride=stride)
        over = tok([it["tokens"] for it in items], is_split_into_words=True, truncation=True, max_length=max_length,
                   stride=stride, return_overflowing_tokens=True)
        assert enc.report["n_windows"] == len(over["input_ids"])


def test_a_word_the_tokenizer_drops_is_counted(tok):
    item = {"tokens": ["王", " ", "明", "说"], "tags": ["B-PER", "I-PER", "I-PER", "O"]}
    enc = encode_token_classification([item], tok, LABEL2ID, max_length=16)
    assert enc.report["n_words_without_token"] == 1
    assert enc.dataset[0]["labels"] == [-100, LABEL2ID["B-PER"], LABEL2ID["I-PER"], 0, -100]  # [CLS] 王 明 说 [SEP]


def test_bad_items_are_data_errors_naming_the_item(tok):
    with pytest.raises(DataError, match=r"item 0 \('x'\) has 2 tokens but 1 tags"):
        encode_token_classification([{"id": "x", "tokens": ["我", "们"], "tags": ["O"]}], tok, LABEL2ID, 16)
    with pytest.raises(DataError, match=r"tag 'B-TIME' at token 1, not one of the labels"):
        encode_token_classification([{"id": "y", "tokens": ["我", "们"], "tags": ["O", "B-TIME"]}], tok, LABEL2ID, 16)
    with pytest.raises(DataError, match="no items"):
        encode_token_classification([], tok, LABEL2ID, 16)
