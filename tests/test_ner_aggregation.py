"""The aggregation that matches training: nbkit labels only a word's first sub-token (the rest -100), so the
job's evaluation, the export's documented pipeline call and notebook 07 read each word's tag from its first
sub-token (``aggregation_strategy="first"``). Checked with a model whose logits are a fixed table by token id, on
words of several sub-tokens (Latin and digit runs under BERT's own pre-tokenizer), where "simple" (every
sub-token votes) tags differently. nbkit's NER tokenizer reads one character per pre-token
(tests/test_ner_serving.py), so there such a word is a run of one-character words."""
import pytest
import torch


def _wordpiece(tmp_path):
    """A BERT WordPiece tokenizer whose Latin and digit words split into several sub-tokens."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "在", "北", "京", "见", "了", "张", "三", "ib", "##m",
             "20", "##24", "年", "。"]
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, handle_chinese_chars=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    fast = BertTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                             sep_token="[SEP]", mask_token="[MASK]", model_max_length=32)
    assert fast.tokenize("ibm") == ["ib", "##m"] and fast.tokenize("2024") == ["20", "##24"]
    return fast


LABELS = ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


def _table_model(tok, table: dict):
    """A BertForTokenClassification whose logits at a token are one-hot on ``table[token]`` (else "O")."""
    from transformers import BertConfig, BertForTokenClassification
    from transformers.modeling_outputs import TokenClassifierOutput

    class Table(BertForTokenClassification):
        def forward(self, input_ids=None, attention_mask=None, **kwargs):
            return TokenClassifierOutput(logits=self.lookup[input_ids])

    config = BertConfig(vocab_size=len(tok), hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                        intermediate_size=8, max_position_embeddings=32, num_labels=len(LABELS),
                        id2label=dict(enumerate(LABELS)), label2id={n: i for i, n in enumerate(LABELS)})
    model = Table(config).eval()
    lookup = torch.zeros(len(tok), len(LABELS))
    lookup[:, 0] = 5.0
    for piece, label in table.items():
        row = tok.convert_tokens_to_ids(piece)
        lookup[row] = 0.0
        lookup[row, LABELS.index(label)] = 5.0
    model.lookup = lookup
    return model


@pytest.mark.parametrize("words, table, first", [
    # IBM's first sub-token says B-ORG, its second B-PER: "first" reads ORG over the word and continues into 见's
    # I-ORG; "simple" splits IBM into ORG + PER and starts a new entity at 见
    (["在", "ibm", "见"], {"ib": "B-ORG", "##m": "B-PER", "见": "I-ORG"}, ["O", "B-ORG", "I-ORG"]),
    # 2024's second sub-token is untrained noise (B-LOC): "first" keeps the word O and 北京 is a LOC of its own;
    # "simple" starts the LOC inside 2024 ("24北京"), so 北 reads I-LOC
    (["2024", "北", "京"], {"##24": "B-LOC", "北": "I-LOC", "京": "I-LOC"}, ["O", "B-LOC", "I-LOC"]),
])
def test_words_of_several_subtokens_take_their_first_subtokens_tag(tmp_path, words, table, first):
    from transformers import pipeline

    from nbkit.evaluate.ner_report import pipeline_tags
    from nbkit.text.token_classification import AGGREGATION

    tok = _wordpiece(tmp_path)
    model = _table_model(tok, table)
    tagger = pipeline("token-classification", model=model, tokenizer=tok, aggregation_strategy=AGGREGATION,
                      device="cpu")
    assert AGGREGATION == "first" and pipeline_tags(tagger, [{"tokens": words}]) == [first]
    # the strategy is what makes the difference: "simple" lets the later sub-tokens vote
    simple = pipeline("token-classification", model=model, tokenizer=tok, aggregation_strategy="simple", device="cpu")
    assert pipeline_tags(simple, [{"tokens": words}]) != [first]


def test_the_documented_calls_use_the_strategy_training_matches():
    """README (both languages), notebook 07 and the export's docstring name aggregation_strategy="first"."""
    from pathlib import Path

    from nbkit.models import export

    root = Path(__file__).resolve().parents[1]
    for path in ("README.md", "README.zh-CN.md", "notebooks/07_named_entities.py", "docs/ner.md"):
        text = (root / path).read_text(encoding="utf-8")
        assert 'aggregation_strategy="simple"' not in text, path
        assert 'aggregation_strategy="first"' in text, path
        if not path.startswith("notebooks"):   # the documented call: plain text, the export's stride
            assert 'aggregation_strategy="first", stride=32)' in text and 'delimiter=""' not in text, path
    assert 'aggregation_strategy="first"' in export.export_token_classifier.__doc__


def test_one_sentence_given_as_its_characters_comes_back_as_a_batch_of_one(tmp_path):
    """Why the documented call ends in ``[0]``: the pipeline reads a list of words as one input and answers with
    one list of entities per input."""
    from transformers import pipeline

    tok = _wordpiece(tmp_path)
    model = _table_model(tok, {"北": "B-LOC", "京": "I-LOC"})
    tagger = pipeline("token-classification", model=model, tokenizer=tok, aggregation_strategy="first", device="cpu")
    out = tagger(list("在北京见了"), is_split_into_words=True, delimiter="", stride=8)
    assert len(out) == 1 and [(s["entity_group"], s["start"], s["end"]) for s in out[0]] == [("LOC", 1, 3)]
