"""Causal (GPT-style) pretraining, ``PretrainConfig(objective="causal")``: the config, the packed blocks and their
shifted labels, the GPT-2 / Llama presets and their FLOPs, and a tiny run through ``run_pretraining`` at smoke."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import char_tokenizer, texts  # noqa: E402

from nbkit.errors import ConfigError, DataError  # noqa: E402
from nbkit.recipes import pretraining as pt  # noqa: E402


def test_objective_is_a_context_field_with_its_own_defaults():
    cfg = pt.PretrainConfig.for_scale("cpu", objective="causal")
    assert cfg.objective == "causal" and cfg.model == "gpt2-narrow" and cfg.overrides() == {}
    assert cfg.run_tag() == "" and cfg.run_dir().name == "causal"
    assert cfg.table().loc["model", "from"] == "scale cpu, causal"
    assert "unused: objective is causal" in cfg.table().loc["mlm_probability", "from"]
    assert pt.PretrainConfig.for_scale("cpu").objective == "mlm"                     # MLM stays the default
    assert pt.PretrainConfig.for_scale("cpu").run_dir().name == "mlm"
    assert pt.PretrainConfig.for_scale("smoke", objective="causal").model == "gpt2-tiny"
    llama = pt.PretrainConfig.for_scale("cpu", objective="causal", model="llama-narrow", seed=3)
    assert llama.overrides() == {"model": "llama-narrow", "seed": 3}
    assert llama.run_dir().name == "causal-modelllama-narrow-seed3"
    with pytest.raises(ConfigError, match=r"objective='gpt': use one of 'mlm', 'causal'"):
        pt.PretrainConfig.for_scale("cpu", objective="gpt")
    with pytest.raises(ConfigError, match=r"model='narrow' is not a causal preset.*gpt2-tiny"):
        pt.PretrainConfig.for_scale("cpu", objective="causal", model="narrow")
    with pytest.raises(ConfigError, match=r"model='gpt2-mini' is not a mlm preset .*it is a causal preset: set "
                                          r"objective='causal'"):
        pt.PretrainConfig.for_scale("cpu", model="gpt2-mini")


def test_the_job_flag_comes_from_the_field():
    from nbkit.jobs import pretrain

    cfg, out = pretrain.config(pretrain.parser().parse_args(["--scale", "smoke", "--objective", "causal",
                                                            "--model", "llama-tiny"]))
    assert (cfg.objective, cfg.model) == ("causal", "llama-tiny") and out.name == "causal-modelllama-tiny"
    assert "--objective" in pretrain.parser().format_help()


def test_collator_shifts_labels_and_marks_what_has_no_target():
    from nbkit.text.causal import CausalCollator

    tok = char_tokenizer()
    batch = CausalCollator(tok)([{"input_ids": [5, 6, 7, 8], "next_id": 9}, {"input_ids": [10, 11]},
                                 {"input_ids": [12, 13, 14], "next_id": -100}])
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8], [10, 11, 0, 0], [12, 13, 14, 0]]
    assert batch["labels"].tolist() == [[6, 7, 8, 9], [11, -100, -100, -100], [13, 14, -100, -100]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0]]
    with pytest.raises(DataError, match="empty batch"):
        CausalCollator(tok)([])


def test_blocks_are_packed_with_the_separator_between_documents():
    from datasets import Dataset

    from nbkit.text.mlm import document_separator, make_blocks

    tok = char_tokenizer()
    docs = texts(40)
    blocks = make_blocks(Dataset.from_dict({"text": docs}), tok, 32, causal=True)
    sep, token = document_separator(tok)
    assert token == "[SEP]" and sep == tok.sep_token_id
    stream = [t for d in docs for t in (*tok(d, add_special_tokens=False)["input_ids"], sep)]
    got = [t for row in blocks["input_ids"] for t in row]
    assert got == stream[:len(got)] and len(got) == len(stream) // 32 * 32          # the tail dropped
    assert all(len(r) == 32 for r in blocks["input_ids"]) and tok.cls_token_id not in got
    assert blocks["next_id"][:-1] == [r[0] for r in blocks["input_ids"][1:]]         # the next block's first token
    assert got.count(sep) == sum(1 for t in stream[:len(got)] if t == sep) > 5
    with pytest.raises(ConfigError, match="block_size=200 exceeds tokenizer.model_max_length=128"):
        make_blocks(Dataset.from_dict({"text": docs}), tok, 200, causal=True)
    with pytest.raises(DataError, match="no block of 64"):
        make_blocks(Dataset.from_dict({"text": ["短"]}), tok, 64, causal=True)


@pytest.mark.slow  # prepares a small store
def test_store_blocks_read_the_stream_as_prepared(tmp_path, runs_tmp):
    from nbkit.corpus import prepare_corpus
    from nbkit.corpus.dataset import StoreCausalDataset, StoreMLMDataset
    from nbkit.text.tokenizer import train_wordpiece

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(texts(300)) + "\n", encoding="utf-8")
    tok = train_wordpiece(texts(300), vocab_size=800, out_dir=tmp_path / "tok", model_max_length=128)
    store = tmp_path / "store"
    prepare_corpus([str(corpus)], store, tokenizer=str(tmp_path / "tok"), num_workers=1, progress=False)
    ds, mlm = StoreCausalDataset(store, 32, "train"), StoreMLMDataset(store, 32, "train")
    assert len(ds) == ds.n_tokens // 32 and "StoreCausalDataset" in repr(ds)
    first, second = ds[0], ds[1]
    assert first["input_ids"].shape == (32,) and first["next_id"] == int(second["input_ids"][0])
    tail = ds.n_tokens - len(ds) * 32                                                 # tokens after the last block
    assert (ds[len(ds) - 1]["next_id"] == -100) == (tail == 0)
    stream = torch.cat([ds[i]["input_ids"] for i in range(4)])
    assert torch.equal(stream[:30], mlm[0]["input_ids"][1:-1])                       # the same stream, no [CLS]
    assert int((stream == tok.sep_token_id).sum()) >= 1 and tok.cls_token_id not in stream.tolist()
    cfg = pt.PretrainConfig.for_scale("smoke", objective="causal", corpus=str(store), block_size=32)
    corpus_ = pt.data(cfg)
    assert corpus_.store == store and isinstance(pt.blocks(cfg, pt.tokenizer(cfg, corpus_), corpus_)["validation"],
                                                 StoreCausalDataset)
    sized, plan = pt.size(cfg.replace(scale="cpu"), corpus_, device="cpu", out_dir=tmp_path / "plan")
    assert sized.model.startswith("gpt2-") and any(r.startswith("causal: ") for r in plan["reasons"])
    _, smoke = pt.size(cfg, corpus_, device="cpu", out_dir=tmp_path / "smoke-plan")   # shown, not applied
    assert smoke["model"].startswith("gpt2-") and smoke["sized_as"] in ("tiny", "narrow")


def test_presets_build_from_config_and_count_their_flops():
    from transformers import GPT2LMHeadModel, LlamaForCausalLM

    from nbkit.models.causal import PRESETS, build_causal_model, positions
    from nbkit.models.flops import causal_flops_per_token, causal_matmul_params

    tok = char_tokenizer()
    gpt = build_causal_model("gpt2-tiny", tok, 64)
    llama = build_causal_model("llama-tiny", tok, 64)
    assert isinstance(gpt, GPT2LMHeadModel) and isinstance(llama, LlamaForCausalLM)
    assert positions(gpt.config) == 64 == positions(llama.config)
    assert gpt.config.eos_token_id == tok.sep_token_id and gpt.config.bos_token_id == tok.cls_token_id
    assert gpt.lm_head.weight.data_ptr() == gpt.transformer.wte.weight.data_ptr()    # tied, as GPT-2
    assert llama.lm_head.weight.data_ptr() == llama.model.embed_tokens.weight.data_ptr()
    assert type(llama.model.norm).__name__ == "LlamaRMSNorm" and llama.config.hidden_act == "silu"
    assert build_causal_model("gpt2-tiny", tok, 64, seed=1).state_dict().keys() == gpt.state_dict().keys()
    same = build_causal_model("gpt2-tiny", tok, 64)
    assert all(torch.equal(a, b) for a, b in zip(gpt.state_dict().values(), same.state_dict().values()))
    for model in (gpt, llama):   # matmul weights = every weight but embeddings, norms and biases
        n = sum(p.numel() for name, p in model.named_parameters() if p.dim() == 2 and "wpe" not in name)
        assert causal_matmul_params(model.config) == n
        assert causal_flops_per_token(model.config, 64) == 6 * n + 12 * 2 * 64 * 64
    from transformers import GPT2Config

    small = GPT2Config(vocab_size=50257, **PRESETS["gpt2-small"][1])
    from transformers import GPT2LMHeadModel as G

    with torch.device("meta"):
        assert round(sum(p.numel() for p in G(small).parameters()) / 1e6) == 124    # GPT-2 small itself
    with pytest.raises(ConfigError, match=r"block_size=200 outside 2..128"):
        build_causal_model("gpt2-tiny", tok, 200)
    with pytest.raises(ConfigError, match="unknown causal preset 'gpt3'"):
        build_causal_model("gpt3", tok, 64)


@pytest.mark.slow  # two tiny runs at smoke (~20 s on a busy 2-core machine)
@pytest.mark.filterwarnings("ignore:checkpoint at step")
def test_run_pretraining_causal_at_smoke_resumes_exactly(tmp_path, runs_tmp):
    from transformers import AutoModelForCausalLM

    cfg = pt.PretrainConfig.for_scale("smoke", objective="causal", max_steps=6, eval_every=3, log_every=1,
                                      progress=False, lr=3e-3)
    corpus = pt.data(cfg)
    tok = pt.tokenizer(cfg, corpus)
    out = tmp_path / "causal"
    metrics = pt.run_pretraining(cfg, out, tokenizer=tok, save_steps=(3,))
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["objective"] == "causal" and saved["steps"] == 6 and saved["model"] == "gpt2-tiny"
    assert saved["eval_loss"] < saved["untrained_eval_loss"]                         # it learnt something
    assert saved["eval_perplexity"] == pytest.approx(__import__("math").exp(saved["eval_loss"]))
    assert saved["tokens_per_s"] > 0 and saved["eval_tokens"] > 0
    losses = [h["loss"] for h in saved["history"] if "loss" in h]
    assert losses[-1] < losses[0]
    model_dir = out / "model"
    conf = json.loads((model_dir / "config.json").read_text())
    assert conf["architectures"] == ["GPT2LMHeadModel"] and conf["nbkit_pretraining"]["objective"] == "causal"
    final = AutoModelForCausalLM.from_pretrained(model_dir).state_dict()
    # resume: the step-3 checkpoint alone in another folder, trained on to step 6, ends with the same weights
    again = tmp_path / "again"
    (again / "checkpoints").mkdir(parents=True)
    shutil.copytree(out / "checkpoints" / "step-000003", again / "checkpoints" / "step-000003")
    resumed = pt.run_pretraining(cfg, again, tokenizer=tok)
    assert resumed["steps"] == 6 and resumed["eval_loss"] == pytest.approx(metrics["eval_loss"], abs=0)
    other = AutoModelForCausalLM.from_pretrained(again / "model").state_dict()
    assert all(torch.equal(final[k], other[k]) for k in final)


def test_the_loop_counts_a_causal_models_flops_and_scores_every_next_token():
    from nbkit.models.causal import build_causal_model
    from nbkit.models.flops import causal_flops_per_token
    from nbkit.text.causal import CausalCollator
    from nbkit.train import Loop, TrainConfig

    tok = char_tokenizer()
    model = build_causal_model("llama-tiny", tok, 16)
    data = [{"input_ids": torch.randint(5, len(tok), (16,)), "next_id": 7} for _ in range(8)]
    collate = CausalCollator(tok)
    loop = Loop(model, TrainConfig(max_steps=1, batch_size=4, log_every=1, progress=False, precision="fp32"),
                data, data, collate_fn=collate)
    out = loop.train_step([collate(data[:4])])
    assert out["flops"] == pytest.approx(4 * 16 * causal_flops_per_token(model.config, 16))
    assert out["n_label"] == 4 * 16                                                  # every position has a target
    metrics = loop.evaluate()
    assert metrics["eval_tokens"] == 8 * 16 and metrics["eval_perplexity"] > 1


@pytest.mark.parametrize("preset", ["gpt2-tiny", "llama-tiny"])
def test_the_fused_output_layer_trains_as_the_full_logits_do(preset):
    """The loop's fused head + CE (no (B, T, V) logits) gives the unfused loop's loss, gradient norm and update;
    padding (label -100) is skipped by both."""
    from nbkit.models.causal import build_causal_model
    from nbkit.text.causal import CausalCollator
    from nbkit.train import Loop, TrainConfig

    tok = char_tokenizer()
    data = [{"input_ids": torch.randint(5, len(tok), (16 - i % 3,))} for i in range(4)]  # ragged: padded
    collate = CausalCollator(tok)
    outs, weights = [], []
    for fused in (True, False):
        model = build_causal_model(preset, tok, 16, seed=0, dropout=0.0)
        loop = Loop(model, TrainConfig(max_steps=2, batch_size=4, progress=False, precision="fp32",
                                       fused_loss=fused), data, collate_fn=collate)
        loop.setup()
        assert (loop._fused_weight is not None) == fused
        outs.append(loop.train_step([collate(data)]))
        weights.append([p.detach().clone() for p in model.parameters()])
    assert outs[0]["n_label"] == outs[1]["n_label"] < 4 * 16
    assert outs[0]["loss"] == pytest.approx(outs[1]["loss"], rel=1e-5)
    assert outs[0]["grad_norm"] == pytest.approx(outs[1]["grad_norm"], rel=1e-4)
    for a, b in zip(*weights):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.multiproc
@pytest.mark.slow  # torchrun with 2 gloo ranks on CPU
def test_the_causal_job_under_torchrun(tmp_path, runs_tmp):
    from transformers import AutoModelForCausalLM

    from nbkit.jobs import launch as L

    out = tmp_path / "causal"
    args = ["--scale", "smoke", "--objective", "causal", "--model", "llama-tiny", "--max-steps", "2", "--log-every",
            "1", "--resume", "none", "--output-dir", str(out)]
    got = []
    h = L.launch("nbkit.jobs.pretrain", nproc_per_node=2, args=args, on_metrics=got.append,
                 log_dir=tmp_path / "logs", device="cpu", show=False,
                 env={"OMP_NUM_THREADS": "1", "NBKIT_RUNS_DIR": str(runs_tmp)})
    assert h.wait(timeout=300) == 0, "\n".join(h.lines[-30:])
    assert [m["step"] for m in got if "loss" in m] == [1, 2]
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["objective"], metrics["world_size"], metrics["steps"]) == ("causal", 2, 2)
    assert type(AutoModelForCausalLM.from_pretrained(out / "model")).__name__ == "LlamaForCausalLM"
