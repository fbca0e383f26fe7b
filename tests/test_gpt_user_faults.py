"""The GPT path tried with the files and calls users bring (issue 52's GPT items): each case a file or call a
user would have, built locally (nothing is downloaded)."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
import torch

from nbkit.errors import ConfigError, DataError  # noqa: F401
from nbkit.models.standin import build_standin
from nbkit.recipes import pretraining as pt


@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    """A UER-layout GPT-2 and a ckiplab-layout BERT whose ``pytorch_model.bin`` is in torch's legacy
    (pre-1.6, non-zip) format, as many older uploads are."""
    root = tmp_path_factory.mktemp("legacy")
    out = {}
    for name, layout in (("causal", "uer-gpt2"), ("mlm", "ckiplab")):
        folder = build_standin(root / name, layout=layout)
        state = torch.load(folder / "pytorch_model.bin", weights_only=True)
        torch.save(state, folder / "pytorch_model.bin", _use_new_zipfile_serialization=False)
        assert not zipfile.is_zipfile(folder / "pytorch_model.bin")
        out[name] = folder
    return out


@pytest.mark.parametrize("objective", ["causal", "mlm"])
def test_old_format_weights_load_through_init_as_from_pretrained_does(legacy, objective):
    """Item 1: the probe of names and dtypes memory-mapped the file, which torch refuses for the legacy format."""
    from transformers import AutoModelForCausalLM, BertForMaskedLM

    from nbkit.models.loading import stored_dtype, weight_names

    init = legacy[objective]
    embedding = "transformer.wte.weight" if objective == "causal" else "bert.embeddings.word_embeddings.weight"
    assert stored_dtype(init) == "float32" and embedding in weight_names(init)      # the probe reads the old format
    cfg = pt.PretrainConfig.for_scale("smoke", objective=objective, init=str(init))
    mine = pt.model(cfg, pt.tokenizer(cfg, pt.PretrainCorpus())).state_dict()
    ref = (AutoModelForCausalLM if objective == "causal" else BertForMaskedLM).from_pretrained(str(init)).state_dict()
    assert set(ref) <= set(mine)
    assert all(torch.equal(mine[k], ref[k]) for k in ref), [k for k in ref if not torch.equal(mine[k], ref[k])]


@pytest.fixture(scope="module")
def gpt64(tmp_path_factory):
    """A gpt2-tiny of 64 positions over a character vocabulary (random weights, seed 0) and its export."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _corpus import char_tokenizer

    from nbkit.models.causal import build_causal_model
    from nbkit.models.export import export_causal_lm

    tok = char_tokenizer(300)
    model = build_causal_model("gpt2-tiny", tok, 64, seed=0).eval()
    return model, tok, export_causal_lm(model, tok, tmp_path_factory.mktemp("gpt64") / "export")


def test_the_exports_bare_pipeline_call_is_the_notebooks_greedy_line(gpt64, tmp_path):
    """Item 2: the bare call ran transformers' pipeline defaults (256 sampled tokens) past 64 positions."""
    import sys

    from transformers import pipeline

    from nbkit.evaluate.generation import generate
    from nbkit.models.causal import build_causal_model
    from nbkit.models.export import export_causal_lm

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _corpus import texts

    model, tok, out = gpt64
    saved = json.loads((out / "generation_config.json").read_text())
    assert saved["do_sample"] is False and saved["max_new_tokens"] == 30                 # greedy, bounded by 64
    pipe = pipeline("text-generation", model=str(out))
    bare = pipe("今天天气")[0]["generated_text"]
    assert bare == generate(model, tok, "今天天气", max_new_tokens=30) == generate(model, tok, "今天天气")
    long = "".join(texts(5))                                                             # > 64 tokens
    assert len(tok(long)["input_ids"]) > 64
    cut = pipe(long, handle_long_generation="hole")[0]["generated_text"]                 # the documented call
    assert cut.startswith(long) and len(cut) > len(long)
    small = build_causal_model("gpt2-tiny", tok, 32, seed=0)
    assert json.loads((export_causal_lm(small, tok, tmp_path / "e32") / "generation_config.json").read_text())[
        "max_new_tokens"] == 16                                                          # half a 32-token context
    with pytest.raises(ConfigError, match="max_new_tokens=63 leaves no room .* use max_new_tokens <= 62"):
        export_causal_lm(model, tok, tmp_path / "e", max_new_tokens=63)


def _repeated_trigrams(ids: list[int]) -> int:
    grams = [tuple(ids[i:i + 3]) for i in range(len(ids) - 2)]
    return len(grams) - len(set(grams))


def test_repetition_controls_pass_through_to_model_generate_and_the_export(gpt64, tmp_path):
    """Item 9: generate refused repetition_penalty and no_repeat_ngram_size, which model.generate takes."""
    from transformers import pipeline

    from nbkit.evaluate.generation import generate, repeated_ngrams
    from nbkit.models.export import export_causal_lm
    from nbkit.text.causal import prompt_ids

    model, tok, _ = gpt64
    plain = generate(model, tok, "今天天气", full_text=False)
    controlled = generate(model, tok, "今天天气", full_text=False, no_repeat_ngram_size=3)
    ids = lambda text: tok(text, add_special_tokens=False)["input_ids"]                # noqa: E731
    assert _repeated_trigrams(ids(plain)) > 5 and _repeated_trigrams(ids("今天天气" + controlled)) == 0
    assert repeated_ngrams(plain) > 0.5 and repeated_ngrams("今天天气" + controlled) == 0.0      # what 06 prints
    assert repeated_ngrams("旗旗旗旗") == 0.5 and repeated_ngrams("今天") == 0.0
    ref = model.generate(input_ids=torch.tensor([prompt_ids(tok, "今天天气")]), max_new_tokens=30, do_sample=False,
                         repetition_penalty=1.5, pad_token_id=0)[0, 5:].tolist()        # transformers' own
    mine = generate(model, tok, "今天天气", full_text=False, repetition_penalty=1.5)
    assert mine == tok.decode(ref, skip_special_tokens=True).replace(" ", "") and mine != plain
    out = export_causal_lm(model, tok, tmp_path / "e", repetition_penalty=1.5, no_repeat_ngram_size=3)
    bare = pipeline("text-generation", model=str(out))("今天天气")[0]["generated_text"]
    assert bare == generate(model, tok, "今天天气", repetition_penalty=1.5, no_repeat_ngram_size=3)
    with pytest.raises(ConfigError, match="repetition_penalty=0: use a number > 0"):
        generate(model, tok, "今天", repetition_penalty=0)
    with pytest.raises(ConfigError, match="no_repeat_ngram_size=0: use a whole number >= 1"):
        generate(model, tok, "今天", no_repeat_ngram_size=0)


def test_a_long_prompt_is_refused_with_fixes_that_exist(gpt64):
    """Item 21: the refusal said "lower max_new_tokens to -697" for a prompt longer than the context."""
    import re
    import sys

    from nbkit.evaluate.generation import generate

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _corpus import texts

    model, tok, _ = gpt64
    long = "".join(texts(5))
    with pytest.raises(DataError) as got:
        generate(model, tok, long, max_new_tokens=20)
    message = str(got.value)
    assert not re.search(r"-\d", message.replace("prompt[", "")) and "lower max_new_tokens" not in message
    start = int(re.search(r"keep the prompt's last 43 tokens: prompt\[(\d+):\]", message).group(1))
    assert generate(model, tok, long[start:], max_new_tokens=20).startswith(long[start:])     # the fix works
    middle = long[:40]                                                                        # 41 tokens with [SEP]
    with pytest.raises(DataError, match=r"or lower max_new_tokens to 23\)") as got:
        generate(model, tok, middle, max_new_tokens=30)
    assert generate(model, tok, middle, max_new_tokens=23).startswith(middle)


def test_generate_takes_a_list_of_prompts_and_says_what_it_does_not_take(gpt64):
    """Item 7: a list of three prompts was answered with "give some text to continue"."""
    from nbkit.evaluate.generation import generate

    model, tok, _ = gpt64
    prompts = ["今天天气", "中国人民", "北京"]
    assert generate(model, tok, prompts, max_new_tokens=8) == [generate(model, tok, p, max_new_tokens=8)
                                                               for p in prompts]
    with pytest.raises(DataError, match=r"prompt=\[\]: give at least one text"):
        generate(model, tok, [])
    with pytest.raises(DataError, match="is a int; give a text"):
        generate(model, tok, 3)


@pytest.mark.parametrize("objective", ["causal", "mlm"])
def test_resuming_with_another_block_size_names_the_block_size(objective, tmp_path, runs_tmp):
    """Item 7: 64 -> 32 said "the saved order is for 491 samples, this dataset has 983" (MLM) or named a
    position table's shape (causal), never the block size."""
    from nbkit.errors import CheckpointError

    cfg = pt.PretrainConfig.for_scale("smoke", objective=objective, block_size=64, max_steps=1, eval_every=1,
                                      max_train=100, corpus_lines=100)
    out = tmp_path / "run"
    pt.run_pretraining(cfg, out)
    with pytest.raises(CheckpointError, match=r"blocks of 64 tokens, this run cuts its text into blocks of 32 .*"
                                              r"Fix: resume with block_size=64 .*resume=False"):
        pt.run_pretraining(cfg.replace(block_size=32, max_steps=2), out)
