"""LoRA for SFT (PretrainConfig(objective="sft", lora=True)): only the adapters train, both exports (merged folder,
adapter folder) answer as the in-memory peft model does with greedy decoding, and a resume across LoRA on/off is
refused naming the setting."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from nbkit.errors import CheckpointError, ConfigError
from nbkit.recipes import pretraining as pt

EXAMPLES = [{"task": "sentiment", "text": t, "gold": "positive",
             "messages": [{"role": "user", "content": f"这条评论是正面还是负面？\n{t}"},
                          {"role": "assistant", "content": "正面"}]} for t in ("很好用", "质量太差了")]


@pytest.fixture(scope="module")
def uer(tmp_path_factory):
    from nbkit.models.standin import build_standin

    return build_standin(tmp_path_factory.mktemp("uer") / "gpt2", "uer-gpt2")


def config(**kw):
    kw = {"block_size": 64, "max_train": 12, "corpus_lines": 600, "progress": False, "report_to": "none",
          "max_steps": 2, "eval_every": 2, "lora": True, **kw}
    return pt.PretrainConfig.for_scale("smoke", objective="sft", **kw)


@pytest.fixture(scope="module")
def trained(uer, tmp_path_factory):
    """The recipe's stages with lora=True and both exports: (cfg, tok, peft model, base weights, metrics)."""
    from nbkit.models.causal import load_causal_model

    out = tmp_path_factory.mktemp("run")
    cfg = config(init=str(uer), lora_export="both", lora_r=4, lora_alpha=8)
    corpus = pt.data(cfg)
    tok = pt.tokenizer(cfg, corpus)
    lm = pt.model(cfg, tok)
    loop, result = pt.train(cfg, lm, tok, pt.blocks(cfg, tok, corpus), out, untrained=False)
    with pytest.raises(ConfigError, match=r"lora=True: pass save\(\.\.\., model="):
        pt.save(cfg, out, loop, result, tok)
    metrics = pt.save(cfg, out, loop, result, tok, model=lm)
    base, _ = load_causal_model(uer, tokenizer=tok)
    return cfg, tok, lm, base.state_dict(), metrics


def test_only_the_adapters_train(trained):
    cfg, _, lm, base, metrics = trained
    trains = [n for n, p in lm.named_parameters() if p.requires_grad]
    assert trains and all("lora_" in n for n in trains)
    assert metrics["lora"] == {"r": 4, "alpha": 8, "dropout": 0.05, "targets": None}
    assert metrics["trainable_parameters"]["share"] < 0.05 and metrics["lr"] == 2e-3   # 10 x 5e-4, capped
    inner = lm.get_base_model()
    assert any(float(p.detach().abs().sum()) > 0 for n, p in inner.named_parameters() if "lora_B" in n)   # B left zero
    frozen = {n.replace("base_layer.", ""): p for n, p in inner.named_parameters() if "lora_" not in n}
    assert frozen and all(torch.equal(p, base[n]) for n, p in frozen.items())


def test_both_exports_answer_as_the_peft_model(trained):
    from peft import PeftModel
    from transformers import AutoTokenizer, pipeline

    from nbkit.evaluate.instruct import generate_answers
    from nbkit.objectives.sft import OBJECTIVE as SFT

    cfg, tok, lm, _, metrics = trained
    ours, _ = generate_answers(lm, tok, EXAMPLES, max_new_tokens=6)
    folder = metrics["model_dir"]
    chat = pipeline("text-generation", model=folder)
    merged = [chat(ex["messages"][:1], max_new_tokens=6, do_sample=False)[0]["generated_text"][-1]["content"]
              for ex in EXAMPLES]
    assert merged == ours
    adapter_tok = AutoTokenizer.from_pretrained(f"{folder}/adapter")
    base = SFT.model(dataclasses.replace(cfg, lora=False), adapter_tok)                 # the model LoRA wrapped
    loaded = PeftModel.from_pretrained(base, f"{folder}/adapter")
    assert generate_answers(loaded, adapter_tok, EXAMPLES, max_new_tokens=6)[0] == ours


def test_resume_across_lora_on_and_off_is_refused_by_name(uer, tmp_path):
    out = tmp_path / "run"
    pt.run_pretraining(config(init=str(uer)), out)
    with pytest.raises(CheckpointError, match="lora: checkpoint .*'r': 8.* vs this run None"):
        pt.run_pretraining(config(init=str(uer), lora=False, max_steps=4), out)


def test_lora_fields_are_sfts_alone():
    with pytest.raises(ConfigError, match="LoRA is an option of objective='sft'"):
        pt.PretrainConfig.for_scale("smoke", objective="causal", lora=True)
    assert "lora_r" in config(lora=False).unused() and "lora_r" not in config().unused()
    assert config(lora_targets="c_attn").lora_targets == ("c_attn",)
    assert pt.PretrainConfig.HELP["lora_r"].startswith("sft, lora: the adapters' rank")
    assert config().table().loc["lora_lr", "from"].startswith("recipe: None, so min(10 x lr, 0.002) = 0.002: ")
    assert "lr" in config(lora_lr=1e-3).unused() and "lr" not in config().unused()
