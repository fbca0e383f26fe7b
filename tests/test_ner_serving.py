"""The call a user makes on the exported NER folder: ``pipeline(...)(text)`` on a plain string tags as training
read the text (one pre-token per character: Latin words, digits, full-width characters, spaces and emoji
included), the job's evaluation scores that same call, a long string is tagged to its end with the stride the
export records, and the call docs/ner.md shows returns one flat list of entities for one string.

The model is a "table": a BertForTokenClassification whose weights make each token's tag a fixed function of its
id (attention and feed-forward outputs zeroed, so each position keeps its own embedding; the embeddings are rows
of a Hadamard matrix, which layer norm leaves as they are, and the classifier reads them back). It saves and
loads as a plain BERT, so it goes through the export like a trained tagger, and any change of ids shows as a
change of tags."""
import json
import re
from pathlib import Path

import pytest
import torch

LABELS = ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
#: sentences where BERT's own pre-tokenizer and characters-as-words give different ids
MIXED = ["新华社北京1998年1月1日电 Microsoft公司的CEO比尔·盖茨在Seattle说",
         "ＩＢＭ公司２０２４年在上海发布iPhone 15，😀张三说OK",
         "王小明 and 李四 visited 北京 in 2023年。"]


def _hadamard(n: int) -> torch.Tensor:
    h = torch.ones(1, 1)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h


def _table_model(tok, table: dict, seed: int = 0):
    """A BertForTokenClassification tagging token id -> ``table[token]``; every other token a fixed
    pseudo-random label (so Latin and digit pieces tag differently from their single characters)."""
    from transformers import BertConfig, BertForTokenClassification

    hidden = 8
    config = BertConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=1, num_attention_heads=1,
                        intermediate_size=8, max_position_embeddings=512, num_labels=len(LABELS),
                        id2label=dict(enumerate(LABELS)), label2id={n: i for i, n in enumerate(LABELS)},
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForTokenClassification(config).eval()
    rows = _hadamard(hidden)[1:1 + len(LABELS)]                      # (7, 8), zero mean, unit variance
    g = torch.Generator().manual_seed(seed)
    label_of = torch.randint(0, 3, (len(tok),), generator=g) * 2      # O, B-LOC or B-ORG: varied, never I- alone
    label_of[label_of == 2] = 0
    for piece, label in table.items():
        label_of[tok.convert_tokens_to_ids(piece)] = LABELS.index(label)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        emb = model.bert.embeddings
        emb.word_embeddings.weight.copy_(rows[label_of])
        emb.LayerNorm.weight.fill_(1.0)
        layer = model.bert.encoder.layer[0]
        layer.attention.output.LayerNorm.weight.fill_(1.0)
        layer.output.LayerNorm.weight.fill_(1.0)
        model.classifier.weight.copy_(rows)
    return model


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import PreTrainedTokenizerFast

    from nbkit.text.chinese_vocab import bert_chinese_tokenizer, chinese_vocab

    vocab = chinese_vocab()
    return PreTrainedTokenizerFast(tokenizer_object=bert_chinese_tokenizer(vocab), unk_token="[UNK]",
                                   pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                                   model_max_length=512)


@pytest.fixture(scope="module")
def exported(tokenizer, tmp_path_factory):
    from nbkit.models.export import export_token_classifier

    table = {"北": "B-LOC", "京": "I-LOC", "上": "B-LOC", "海": "I-LOC", "张": "B-PER", "三": "I-PER", "我": "O", "在": "O"}
    model = _table_model(tokenizer, table)
    out = export_token_classifier(model, tokenizer, tmp_path_factory.mktemp("ner_serving") / "model",
                                  max_length=128)
    return model, out


def _spans(out) -> list:
    return [(s["entity_group"], int(s["start"]), int(s["end"])) for s in out]


def test_the_sentences_need_the_fix(tokenizer):
    """BERT's own pre-tokenizer keeps Latin words and digit runs whole (## pieces), characters as words do not."""
    for text in MIXED:
        plain = tokenizer(text, add_special_tokens=False)["input_ids"]
        words = tokenizer(list(text), is_split_into_words=True, add_special_tokens=False)["input_ids"]
        assert plain != words, text


def test_plain_text_and_characters_as_words_tag_alike_through_the_export(exported, tokenizer):
    from transformers import pipeline

    model, out = exported
    tagger = pipeline("token-classification", model=str(out), aggregation_strategy="first", device="cpu")
    for text in MIXED:
        plain = tagger(text)
        words = tagger(list(text), is_split_into_words=True, delimiter="")[0]
        assert plain and _spans(plain) == _spans(words), text
        for s in plain:                                    # offsets are characters of the string
            assert text[s["start"]:s["end"]].replace(" ", "") == s["word"].replace(" ", "")
    # and the ids are training's: the export's tokenizer on plain text = the characters as words, first window
    from transformers import AutoTokenizer

    from nbkit.text.token_classification import encode_token_classification
    tok = AutoTokenizer.from_pretrained(str(out))
    enc = encode_token_classification([{"tokens": list(t)} for t in MIXED], tokenizer, {"O": 0}, 16)
    for i, text in enumerate(MIXED):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert ids == tok(list(text), is_split_into_words=True, add_special_tokens=False)["input_ids"]
        first = enc.windows.index((i, 0))
        assert enc.dataset[first]["input_ids"][1:-1] == ids[:14]


def test_the_jobs_scores_are_the_plain_text_calls(exported, tokenizer):
    """predict_tags (the job's evaluation) gives, token for token, what the exported pipeline gives on the text."""
    from transformers import pipeline

    from nbkit.evaluate.inference import predict_tags
    from nbkit.evaluate.ner_report import pipeline_tags

    model, out = exported
    items = [{"tokens": list(t)} for t in MIXED]
    job, _ = predict_tags(model, tokenizer, items, dict(enumerate(LABELS)), max_length=128, stride=32)
    tagger = pipeline("token-classification", model=str(out), aggregation_strategy="first", device="cpu")
    assert job == pipeline_tags(tagger, items, stride=32, plain_text=True)
    assert any(t != "O" for row in job for t in row)


def test_a_300_character_string_is_tagged_to_its_end_with_the_recorded_stride(exported):
    from transformers import pipeline

    model, out = exported
    params = json.loads((out / "config.json").read_text(encoding="utf-8"))["task_specific_params"]
    assert params["token-classification"] == {"aggregation_strategy": "first", "stride": 32}
    text = "我" * 298 + "北京"                              # three windows of 126 characters
    assert len(text) == 300
    tagger = pipeline("token-classification", model=str(out), device="cpu", **params["token-classification"])
    found = [s for s in tagger(text) if s["entity_group"] == "LOC"]
    assert (found[-1]["start"], found[-1]["end"]) == (298, 300)
    bare = pipeline("token-classification", model=str(out), aggregation_strategy="first", device="cpu")
    assert all(s["end"] <= 126 for s in bare(text))       # without stride transformers cuts at max_length


def test_the_documented_call_returns_one_flat_list_for_one_string(exported):
    """docs/ner.md's serving block, run as written on the exported folder."""
    model, out = exported
    doc = (Path(__file__).resolve().parents[1] / "docs" / "ner.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(from transformers import pipeline\ntagger = pipeline\(.*?)```", doc, re.S)
    assert block, "docs/ner.md lost its serving block"
    code = block.group(1).replace("runs/cpu/ner/model", str(out))
    assert re.search(r'^spans = tagger\("[^"]+"\)$', code, re.M), "the documented call takes one plain string"
    scope = {}
    exec(compile(code, "docs/ner.md", "exec"), scope)    # noqa: S102  the documented lines, as a user runs them
    spans = scope["spans"]
    assert isinstance(spans, list) and spans and all(isinstance(s, dict) for s in spans)
    assert {"entity_group", "start", "end", "word", "score"} <= set(spans[0])
    assert ("LOC", 3, 5) in _spans(spans)                  # 北京 in 新华社北京一月一日电, offsets in the string


def test_tag_text_cuts_a_long_text_at_clause_marks_and_never_truncates(exported):
    """nbkit's helper over the same pipeline: a text of several windows is cut after ，。 etc. and every piece
    tagged (offsets back in the text); without marks (or split=None) the export's recorded stride windows it."""
    from transformers import pipeline

    from nbkit.errors import ConfigError
    from nbkit.evaluate.inference import tag_text

    model, out = exported
    tagger = pipeline("token-classification", model=str(out), aggregation_strategy="first", device="cpu")  # no stride
    text = ("我" * 20 + "，") * 14 + "张三在北京"
    assert len(text) > 2 * 126
    for split in ("，。", None):
        found = _spans(tag_text(tagger, text, split=split))
        assert found[-2:] == [("PER", len(text) - 5, len(text) - 3), ("LOC", len(text) - 2, len(text))], split
    assert all(s["end"] <= 126 for s in tagger(text))          # the bare call would have cut it
    both = tag_text(tagger, [text, "张三"])
    assert len(both) == 2 and _spans(both[1]) == [("PER", 0, 2)] and _spans(both[0]) == _spans(tag_text(tagger, text))
    with pytest.raises(ConfigError, match="plain strings"):
        tag_text(tagger, [list("张三")])


def test_clause_pieces_cover_the_text_and_keep_closing_quotes():
    from nbkit.evaluate.inference import clause_pieces

    text = "他说：“好。”我们走吧，去北京；OK, fine"
    pieces = clause_pieces(text)
    assert "".join(p for _, p in pieces) == text and all(text[o:o + len(p)] == p for o, p in pieces)
    assert [p for _, p in pieces] == ["他说：", "“好。”", "我们走吧，", "去北京；", "OK,", " fine"]
