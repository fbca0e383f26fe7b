"""Token classification encoding (nbkit.text.token_classification): sub-token alignment, windows, the merge."""
import random

import pytest
from _ner_items import LABELS, sentence

from nbkit.errors import ConfigError, DataError
from nbkit.text.token_classification import (
    encode_token_classification,
    merge_window_predictions,
    window_starts,
)

LABEL2ID = {name: i for i, name in enumerate(LABELS)}
ID2LABEL = dict(enumerate(LABELS))


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    """bert-base-chinese's tokenizer layout (a stand-in): one token per Chinese character, Latin runs in pieces."""
    from transformers import AutoTokenizer

    from nbkit.models.standin import build_standin

    return AutoTokenizer.from_pretrained(str(build_standin(tmp_path_factory.mktemp("standin") / "bert")))


def test_first_subtoken_carries_the_label_the_rest_are_ignored(tok):
    item = {"tokens": ["我", "看", "NBA", "比", "赛"], "tags": ["O", "O", "B-ORG", "O", "O"]}
    enc = encode_token_classification([item], tok, LABEL2ID, max_length=32)
    ids, labels = enc.dataset[0]["input_ids"], enc.dataset[0]["labels"]
    pieces = tok.convert_ids_to_tokens(ids)
    assert pieces[:1] == ["[CLS]"] and pieces[-1] == "[SEP]"
    assert pieces[3:6] == ["N", "##B", "##A"]                     # one word, three sub-tokens
    assert labels == [-100, 0, 0, LABEL2ID["B-ORG"], -100, -100, 0, 0, -100]
    assert enc.word_ids[0] == [0, 1, 2, 2, 2, 3, 4]
    assert enc.report["n_multi_subtoken_words"] == 1 and enc.report["n_extra_subtokens"] == 2
    assert enc.report["n_windows"] == 1 and enc.report["n_windowed"] == 0


def test_merge_gives_a_word_its_first_subtokens_prediction(tok):
    item = {"tokens": ["我", "看", "NBA"], "tags": ["O", "O", "B-ORG"]}
    enc = encode_token_classification([item], tok, LABEL2ID, max_length=16)
    # [CLS] 我 看 N ##B ##A [SEP]: the later pieces' predictions (here B-PER) are not read
    pred = [[0, 0, 0, LABEL2ID["B-ORG"], LABEL2ID["B-PER"], LABEL2ID["B-PER"], 0]]
    assert merge_window_predictions(enc, pred, ID2LABEL) == [["O", "O", "B-ORG"]]


def test_window_starts_cover_everything_with_the_stride():
    assert window_starts(10, 14, 4) == [0]
    assert window_starts(20, 14, 4) == [0, 6]
    starts = window_starts(100, 30, 10)
    assert starts[0] == 0 and starts[-1] == 70 and all(b - a <= 20 for a, b in zip(starts, starts[1:]))
    with pytest.raises(ConfigError, match="stride=14 must be between 0 and 13"):
        window_starts(20, 14, 14)


def test_long_sentence_windows_merge_back_to_every_gold_entity(tok):
    """A 12-entity sentence far over max_length: windows, and gold labels fed back as the windows'
    predictions give back every character's tag, so every gold entity is there to be scored."""
    from nbkit.evaluate.ner_report import entities

    rng = random.Random(3)
    items = [sentence(rng, 12, i) for i in range(3)] + [sentence(rng, 1, 9)]
    enc = encode_token_classification(items, tok, LABEL2ID, max_length=16, stride=4)
    assert enc.report["n_windowed"] == 3 and enc.report["n_windows"] > 3 * 3
    assert max(len(r) for r in enc.dataset["input_ids"]) <= 16
    as_pred = [[0 if x == -100 else x for x in row] for row in enc.dataset["labels"]]
    merged = merge_window_predictions(enc, as_pred, ID2LABEL)
    assert merged == [it["tags"] for it in items]
    assert sum(len(entities(t)) for t in merged) == 12 * 3 + 1


def test_overlap_goes_to_the_window_where_the_token_is_farthest_from_a_cut(tok):
    item = {"tokens": list("我们在这里看到了今天天气很好的消息大家说"), "tags": ["O"] * 20}
    enc = encode_token_classification([item], tok, LABEL2ID, max_length=16, stride=4)   # body 14: starts 0, 6
    assert enc.windows == [(0, 0), (0, 6)]
    per = LABEL2ID["B-PER"]
    pred = [[per] * 16, [0] * 16]                       # window 0 says B-PER everywhere, window 1 says O
    merged = merge_window_predictions(enc, pred, ID2LABEL)[0]
    # tokens 6..13 are in both: 6-9 sit deeper in window 0 (its cut is after 13), 10-13 deeper in window 1
    assert merged == ["B-PER"] * 10 + ["O"] * 10


def test_word_the_tokenizer_drops_is_counted_and_repaired_inside_an_entity(tok):
    item = {"tokens": ["王", " ", "明", "说"], "tags": ["B-PER", "I-PER", "I-PER", "O"]}
    enc = encode_token_classification([item], tok, LABEL2ID, max_length=16)
    assert enc.report["n_words_without_token"] == 1
    pred = [[0, LABEL2ID["B-PER"], LABEL2ID["I-PER"], 0, 0]]      # [CLS] 王 明 说 [SEP]
    assert merge_window_predictions(enc, pred, ID2LABEL) == [["B-PER", "I-PER", "I-PER", "O"]]


def test_bad_items_are_data_errors_naming_the_item(tok):
    with pytest.raises(DataError, match=r"item 0 \('x'\) has 2 tokens but 1 tags"):
        encode_token_classification([{"id": "x", "tokens": ["我", "们"], "tags": ["O"]}], tok, LABEL2ID, 16)
    with pytest.raises(DataError, match=r"tag 'B-TIME' at token 1, not one of the labels"):
        encode_token_classification([{"id": "y", "tokens": ["我", "们"], "tags": ["O", "B-TIME"]}], tok, LABEL2ID, 16)
    with pytest.raises(DataError, match="no items"):
        encode_token_classification([], tok, LABEL2ID, 16)
