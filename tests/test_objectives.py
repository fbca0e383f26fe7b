"""nbkit.objectives: the registry, what each objective ignores and checks, and the one packing every objective's
in-memory blocks share (a document separator between every two documents, as the prepared store has it)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import char_tokenizer, texts  # noqa: E402

from nbkit import objectives  # noqa: E402
from nbkit.errors import ConfigError  # noqa: E402
from nbkit.recipes.pretraining import PretrainConfig, PretrainCorpus  # noqa: E402


def test_an_unknown_name_is_refused_listing_the_choices():
    with pytest.raises(ConfigError, match=r"objective='gpt': use one of 'mlm', 'causal'"):
        objectives.get("gpt")
    for name in objectives.OBJECTIVES:
        obj = objectives.get(name)
        assert obj.name == name and obj is objectives.get(name) and isinstance(obj, objectives.Objective)


def test_each_objective_says_what_it_ignores_and_which_rows_it_lays_over():
    mlm, causal = objectives.get("mlm"), objectives.get("causal")
    assert mlm.unused(PretrainConfig.for_scale("smoke")) == {}
    assert causal.unused(PretrainConfig.for_scale("smoke", objective="causal")) == {
        "mlm_probability": "objective is causal (no masking)", "whole_word": "objective is causal (no masking)"}
    assert (mlm.scale_rows, causal.scale_rows) == (None, "pretraining/causal")
    assert "narrow" in mlm.presets and "gpt2-narrow" in causal.presets and "narrow" not in causal.presets


def test_a_preset_of_the_other_objective_is_refused_naming_it():
    with pytest.raises(ConfigError, match=r"'gpt2-mini' is not a mlm preset .*it is a causal preset: set "
                                          r"objective='causal'"):
        PretrainConfig.for_scale("smoke", model="gpt2-mini")
    with pytest.raises(ConfigError, match=r"'huge' is not a causal preset; objective='causal' takes one of gpt2-tiny"):
        PretrainConfig.for_scale("smoke", objective="causal", model="huge")


def test_the_causal_plan_takes_its_familys_preset_at_the_plans_size():
    causal = objectives.get("causal")
    cfg = PretrainConfig.for_scale("cpu", objective="causal", model="llama-narrow")
    assert causal.sized_model(cfg, "tiny") == ("llama-tiny", "causal: llama-tiny, the llama preset of BERT-tiny's size")
    assert causal.sized_model(cfg, "base")[0] == "llama-narrow"            # no llama preset that big: kept
    assert objectives.get("mlm").sized_model(PretrainConfig.for_scale("cpu"), "mini") == ("mini", None)


@pytest.mark.parametrize("name", [n for n in objectives.OBJECTIVES if objectives.get(n).reads_store])
def test_every_objective_packs_a_separator_between_every_two_documents(name):
    """Every objective that reads text (not conversations: SFT pads one conversation per row) packs alike."""
    from datasets import Dataset, DatasetDict

    tok = char_tokenizer()
    docs = texts(60)
    words = [list(d.replace(" ", "")) for d in docs]
    ds = Dataset.from_dict({"text": docs, "words": words})
    corpus = PretrainCorpus(splits=DatasetDict(train=ds, validation=ds.select(range(30))))
    cfg = PretrainConfig.for_scale("smoke", objective=name, block_size=32)
    blocks = objectives.get(name).blocks(cfg, tok, corpus)["train"]
    sep = tok.sep_token_id
    inner = slice(None) if name == "causal" else slice(1, -1)               # MLM wraps each chunk in [CLS] .. [SEP]
    got = [t for row in blocks["input_ids"] for t in row[inner]]
    stream = [t for d in (words if name == "mlm" else docs)
              for t in (*tok(d, is_split_into_words=name == "mlm", add_special_tokens=False)["input_ids"], sep)]
    assert got == stream[:len(got)] and len(got) > len(stream) - 32       # only the short tail dropped
    assert got.count(sep) >= len(docs) - 2                                 # every document ended, but the tail's
    if name == "mlm":   # whole-word masking: the separator is a word of its own, never merged with a neighbour
        for row, wids in zip(blocks["input_ids"], blocks["word_ids"]):
            for i in range(1, len(row) - 1):
                if row[i] == sep:
                    assert wids[i] not in (wids[i - 1], wids[i + 1] if i + 2 < len(row) else None)
