"""Continuing a published causal LM (``PretrainConfig(objective="causal", init=...)``) on local stand-ins in the
layout of ``uer/gpt2-chinese-cluecorpussmall`` and of a Llama checkpoint: nothing is downloaded."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import texts  # noqa: E402

from nbkit.errors import CheckpointError, ConfigError  # noqa: E402
from nbkit.models.standin import build_standin  # noqa: E402
from nbkit.recipes import pretraining as pt  # noqa: E402


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    root = tmp_path_factory.mktemp("causal-standins")
    return {"uer": build_standin(root / "gpt2-chinese-cluecorpussmall", layout="uer-gpt2"),
            "llama": build_standin(root / "llama", layout="llama"), "bert": build_standin(root / "bert-base-chinese")}


def _cfg(init, **kw):
    return pt.PretrainConfig.for_scale("smoke", objective="causal", init=str(init), **kw)


def test_standins_have_the_published_layouts(standins):
    uer, llama = standins["uer"], standins["llama"]
    conf = json.loads((uer / "config.json").read_text())
    assert conf["model_type"] == "gpt2" and conf["architectures"] == ["GPT2LMHeadModel"] and conf["n_positions"] == 1024
    assert json.loads((uer / "tokenizer_config.json").read_text())["tokenizer_class"] == "BertTokenizer"
    assert {p.name for p in uer.iterdir()} >= {"vocab.txt", "pytorch_model.bin"} and not (uer / "tokenizer.json").exists()
    assert len((uer / "vocab.txt").read_text(encoding="utf-8").splitlines()) == 21128
    assert json.loads((llama / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    assert (llama / "model.safetensors").is_file() and (llama / "tokenizer.json").is_file()
    assert not (llama / "vocab.txt").exists()


@pytest.mark.parametrize("layout", ["uer", "llama"])
def test_init_loads_every_weight_exactly(standins, layout, capsys):
    from transformers import AutoModelForCausalLM

    init = standins[layout]
    cfg = _cfg(init)
    assert cfg.run_dir().name.startswith("causal-from-")
    tok = pt.tokenizer(cfg, pt.PretrainCorpus())
    lm = pt.model(cfg, tok)
    assert type(lm).__name__ == ("GPT2LMHeadModel" if layout == "uer" else "LlamaForCausalLM")
    if layout == "uer":
        raw = torch.load(init / "pytorch_model.bin", weights_only=True)
    else:
        from safetensors.torch import load_file

        raw = load_file(str(init / "model.safetensors"))
    mine = lm.state_dict()
    assert set(raw) == set(mine) - {"lm_head.weight"}                                # the head is tied
    assert all(torch.equal(mine[k], raw[k]) for k in raw), [k for k in raw if not torch.equal(mine[k], raw[k])]
    assert lm.lm_head.weight.data_ptr() == lm.get_input_embeddings().weight.data_ptr()
    ref = AutoModelForCausalLM.from_pretrained(str(init)).state_dict()
    assert all(torch.equal(mine[k], ref[k]) for k in ref)
    # UER keeps GPT-2's eos id 50256 past its 21,128 rows: set from the tokenizer, so generation stops at [SEP]
    assert lm.config.eos_token_id == tok.sep_token_id == 102 and lm.generation_config.eos_token_id == 102
    assert lm.config.nbkit_pretraining == {"objective": "causal", "init": str(init)}
    assert "every weight of its" in capsys.readouterr().out


def test_a_missing_weight_is_named(standins, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(standins["uer"], broken)
    state = torch.load(broken / "pytorch_model.bin", weights_only=True)
    del state["transformer.h.1.mlp.c_fc.weight"]
    torch.save(state, broken / "pytorch_model.bin")
    cfg = _cfg(broken)
    with pytest.raises(CheckpointError, match=r"lacks 1 weights of a gpt2 causal LM.*transformer.h.1.mlp.c_fc.weight"):
        pt.model(cfg, pt.tokenizer(cfg, pt.PretrainCorpus()))


def test_mismatches_are_named_before_any_work(standins, tmp_path, runs_tmp):
    from nbkit.corpus import prepare_corpus
    from nbkit.text.tokenizer import train_wordpiece

    with pytest.raises(ConfigError, match=r"is a BERT masked LM .*objective='causal' needs a causal LM.*objective='mlm'"):
        pt.data(_cfg(standins["bert"]))
    with pytest.raises(ConfigError, match=r"is a gpt2 causal LM, but objective=.mlm. needs a BERT masked LM.*"
                                          r"objective='causal'"):
        pt.data(pt.PretrainConfig.for_scale("smoke", init=str(standins["uer"])))
    corpus_file = tmp_path / "c.txt"
    corpus_file.write_text("\n".join(texts(200)) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"block_size=2048 exceeds the position table .*n_positions=1024"):
        pt.data(_cfg(standins["uer"], block_size=2048, corpus=str(corpus_file)))
    with pytest.raises(ConfigError, match=r"block_size=600 exceeds .*max_position_embeddings=512"):
        pt.data(_cfg(standins["llama"], block_size=600))
    assert not (runs_tmp / "corpus").exists()                                     # nothing prepared
    other = train_wordpiece(texts(200), vocab_size=800, out_dir=tmp_path / "tok", model_max_length=128)
    store = tmp_path / "store"
    prepare_corpus([str(corpus_file)], store, tokenizer=str(tmp_path / "tok"), num_workers=1, progress=False)
    with pytest.raises(ConfigError, match=rf"another tokenizer than init=.*store vs init: {len(other)} vs 21128"):
        pt.data(_cfg(standins["uer"], corpus=str(store)))


def test_hub_name_offline_without_cache_is_one_clear_error(tmp_path, monkeypatch, runs_tmp):
    import huggingface_hub.constants as hc

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(ConfigError) as err:
        pt.data(_cfg("uer/gpt2-chinese-cluecorpussmall"))
    assert "HF_HUB_OFFLINE=1" in str(err.value) and "hf download uer/gpt2-chinese-cluecorpussmall" in str(err.value)


@pytest.mark.slow  # prepares a store with the Llama's tokenizer and trains 2 steps
@pytest.mark.filterwarnings("ignore:checkpoint at step")
def test_continue_a_llama_on_a_store_of_its_tokenizer(standins, tmp_path, runs_tmp):
    from transformers import AutoModelForCausalLM

    corpus_file = tmp_path / "c.txt"
    corpus_file.write_text("\n".join(texts(300)) + "\n", encoding="utf-8")
    cfg = _cfg(standins["llama"], corpus=str(corpus_file), max_steps=2, eval_every=2, eval_blocks=8,
               batch_size=4, progress=False)
    metrics = pt.run_pretraining(cfg, tmp_path / "run")
    store = pt.store_dir(cfg)
    assert "-tok-llama-" in store.name and (store / "manifest.json").is_file()     # keyed by init's tokenizer
    assert metrics["objective"] == "causal" and metrics["steps"] == 2 and metrics["eval_loss"] > 0
    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "model")
    assert type(saved).__name__ == "LlamaForCausalLM" and saved.config.vocab_size == 21128
    # sized at cpu: the checkpoint fixes the model; its own steps are timed
    cpu = pt.PretrainConfig.for_scale("cpu", objective="causal", init=str(standins["llama"]), corpus=str(corpus_file),
                                      budget_minutes=0.2, eval_blocks=8)
    sized, plan = pt.size(cpu, pt.data(cpu), device="cpu", out_dir=tmp_path / "plan")
    assert sized.model == cpu.model and sized.lr == cpu.lr and sized.max_steps == plan["max_steps"]
    assert any("init fixes the model" in r for r in plan["reasons"])


def test_fp16_weights_and_a_config_without_model_type_load_as_for_mlm(standins, tmp_path, capsys):
    """The one loader (nbkit.models.loading): float16 files become float32 master weights; an older config with
    only ``architectures`` is read by them."""
    half = tmp_path / "half"
    shutil.copytree(standins["uer"], half)
    state = torch.load(half / "pytorch_model.bin", weights_only=True)
    torch.save({k: v.half() for k, v in state.items()}, half / "pytorch_model.bin")
    conf = json.loads((half / "config.json").read_text())
    del conf["model_type"]
    (half / "config.json").write_text(json.dumps(conf))
    cfg = _cfg(half)
    lm = pt.model(cfg, pt.tokenizer(cfg, pt.PretrainCorpus()))
    assert {p.dtype for p in lm.parameters()} == {torch.float32}
    assert torch.equal(lm.transformer.wte.weight, state["transformer.wte.weight"].half().float())
    assert "stored in float16, loaded as float32" in capsys.readouterr().out



@pytest.mark.parametrize("eos", [[3], [50256, 3]])
def test_an_eos_list_as_an_sft_export_or_llama_3_writes_is_kept_or_set_from_the_tokenizer(standins, tmp_path, eos):
    from nbkit.models.causal import special_ids

    listed = tmp_path / "listed"
    shutil.copytree(standins["llama"], listed)
    conf = json.loads((listed / "config.json").read_text())
    (listed / "config.json").write_text(json.dumps({**conf, "eos_token_id": eos}))
    cfg = _cfg(listed)
    tok = pt.tokenizer(cfg, pt.PretrainCorpus())
    lm = pt.model(cfg, tok)                                         # a list of ids was a TypeError
    expected = eos if eos == [3] else special_ids(tok)["eos_token_id"]   # 50256 is past the vocabulary
    assert lm.config.eos_token_id == expected and lm.generation_config.eos_token_id == expected
