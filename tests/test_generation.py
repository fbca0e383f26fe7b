"""Generation from a causal LM (``nbkit.evaluate.generation.generate``), its export for ``pipeline``
(``nbkit.models.export.export_causal_lm``) and Chinese decoded without spaces (``nbkit.text.tokenizer_files``)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import char_tokenizer, texts  # noqa: E402

from nbkit.errors import ConfigError, DataError  # noqa: E402
from nbkit.evaluate.generation import generate  # noqa: E402


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A character tokenizer of People's Daily and a gpt2-tiny of random weights (seed 0): generation is
    deterministic whatever the weights, and cheap."""
    from nbkit.models.causal import build_causal_model

    tok = char_tokenizer(300)
    model = build_causal_model("gpt2-tiny", tok, 64, seed=0).eval()
    return model, tok, tmp_path_factory.mktemp("gen")


def test_greedy_and_sampled_are_seeded(trained):
    model, tok, _ = trained
    state = torch.random.get_rng_state()
    greedy = generate(model, tok, "中国人民", max_new_tokens=12)
    assert greedy.startswith("中国人民") and len(greedy) > len("中国人民")
    assert generate(model, tok, "中国人民", max_new_tokens=12) == greedy
    kw = dict(max_new_tokens=12, do_sample=True, temperature=1.2, top_k=50, top_p=0.95)
    sampled = [generate(model, tok, "中国人民", seed=s, **kw) for s in (0, 0, 1, 2)]
    assert sampled[0] == sampled[1] and len(set(sampled[1:])) > 1                     # same seed, same text
    assert torch.equal(torch.random.get_rng_state(), state)                          # the caller's RNG untouched
    new = generate(model, tok, "中国人民", max_new_tokens=12, full_text=False)
    assert greedy == "中国人民" + new and " " not in greedy                              # Chinese without spaces
    assert model.training is False


def test_bad_input_is_refused_before_transformers(trained):
    model, tok, _ = trained
    with pytest.raises(DataError, match="give some text to continue"):
        generate(model, tok, "  ")
    with pytest.raises(DataError, match=r"the prompt is \d+ tokens and max_new_tokens=20, .* past the model's context "
                                        r"of 64 tokens: shorten the prompt"):
        generate(model, tok, "".join(texts(5)), max_new_tokens=20)
    with pytest.raises(ConfigError, match="max_new_tokens=64 leaves no room .* use max_new_tokens <= 62"):
        generate(model, tok, "中国", max_new_tokens=64)
    with pytest.raises(ConfigError, match="max_new_tokens=0"):
        generate(model, tok, "中国", max_new_tokens=0)
    with pytest.raises(ConfigError, match="temperature=0"):
        generate(model, tok, "中国", do_sample=True, temperature=0)
    with pytest.raises(ConfigError, match="top_p=1.5"):
        generate(model, tok, "中国", do_sample=True, top_p=1.5)
    with pytest.raises(ConfigError, match="top_k=0"):
        generate(model, tok, "中国", do_sample=True, top_k=0)


def test_a_masked_lm_asked_to_generate_and_a_causal_lm_asked_to_fill_say_what_to_use(trained):
    from nbkit.evaluate.probes import fill_mask
    from nbkit.models.bert import build_mlm_model
    from nbkit.models.export import export_causal_lm

    model, tok, root = trained
    bert = build_mlm_model("tiny", tok, 64)
    with pytest.raises(ConfigError, match="use nbkit.evaluate.probes.fill_mask"):
        generate(bert, tok, "中国")
    with pytest.raises(ConfigError, match="a BERT masked LM cannot generate text"):
        export_causal_lm(bert, tok, root / "nope")
    with pytest.raises(ConfigError, match=r"causal LM.*use nbkit.evaluate.generation.generate"):
        fill_mask(model, tok, ["中国[MASK]民"])
    bert.save_pretrained(root / "mlm")                                                # an MLM run's model/ folder
    with pytest.raises(ConfigError, match=r"holds a 'bert' model, not a causal LM.*fill_mask"):
        generate(str(root / "mlm"), tok, "中国")


def test_export_loads_in_plain_transformers_and_the_pipeline_continues_alike(trained):
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

    model, tok, root = trained
    out = root / "export"
    from nbkit.models.export import export_causal_lm

    assert export_causal_lm(model, tok, out) == out
    conf = json.loads((out / "config.json").read_text())
    assert conf["architectures"] == ["GPT2LMHeadModel"] and "auto_map" not in conf
    assert (out / "generation_config.json").is_file()
    reloaded = AutoModelForCausalLM.from_pretrained(out)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), reloaded.state_dict().values()))
    assert generate(reloaded, AutoTokenizer.from_pretrained(out), "中国人民", max_new_tokens=12) == \
        generate(model, tok, "中国人民", max_new_tokens=12) == generate(out, None, "中国人民", max_new_tokens=12)
    pipe = pipeline("text-generation", model=str(out))
    for prompt in ("中国人民", "今天"):
        ids = pipe(prompt, max_new_tokens=12, do_sample=False, return_tensors=True)[0]["generated_token_ids"]
        from nbkit.text.causal import prompt_ids

        n = len(prompt_ids(tok, prompt))
        mine = generate(model, tok, prompt, max_new_tokens=12, full_text=False)
        assert ids[:n] == prompt_ids(tok, prompt)                                    # the same prompt ids
        assert pipe.tokenizer.decode(ids[n:], skip_special_tokens=True) == mine      # token for token, same text
        text = pipe(prompt, max_new_tokens=12, do_sample=False)[0]["generated_text"]
        assert text == generate(model, tok, prompt, max_new_tokens=12) and " " not in text


def test_saved_tokenizer_decodes_chinese_without_spaces_and_keeps_latin_ones(tmp_path):
    from transformers import AutoTokenizer

    from nbkit.models.standin import build_standin
    from nbkit.text.tokenizer_files import cjk_decoding, save_tokenizer

    uer = build_standin(tmp_path / "uer", layout="uer-gpt2")                      # BertTokenizer over vocab.txt
    tok = AutoTokenizer.from_pretrained(str(uer))
    text = "我爱北京天安门，今天天气很好。the quick brown fox 说：“你好！”"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids).startswith("我 爱 北 京")                                  # BertTokenizer spaces them
    save_tokenizer(tok, tmp_path / "saved", cjk_decode=True)
    again = AutoTokenizer.from_pretrained(str(tmp_path / "saved"))
    assert again(text, add_special_tokens=False)["input_ids"] == ids                # the same ids
    want = "我爱北京天安门，今天天气很好。the quick brown fox说：“你好！”"
    assert again.decode(ids) == want == cjk_decoding(tok).decode(ids)
    assert tok.decode(ids) != want and tok.backend_tokenizer.decoder is not None      # the caller's untouched
    plain = tmp_path / "plain"
    save_tokenizer(tok, plain)                                                       # MLM's files: as before
    assert "Replace" not in json.dumps(json.loads((plain / "tokenizer.json").read_text())["decoder"])
