"""The SFT objective (nbkit.objectives.sft) through the training loop: demo conversations encoded and padded, a
model from a UER-layout GPT-2, from nbkit's own causal run (markers added, embeddings grown) or from random weights,
gradient checkpointing, and the export that pipeline("text-generation") answers a list of messages with."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import texts  # noqa: E402

from nbkit.errors import ConfigError, DataError  # noqa: E402
from nbkit.objectives.sft import OBJECTIVE as SFT  # noqa: E402
from nbkit.recipes import pretraining as pt  # noqa: E402

MESSAGES = [{"role": "user", "content": "这条评论是正面还是负面？\n很好用"}]


@pytest.fixture(scope="module")
def uer(tmp_path_factory):
    from nbkit.models.standin import build_standin

    return build_standin(tmp_path_factory.mktemp("uer") / "gpt2", "uer-gpt2")


def config(**kw):
    """A smoke SFT config, People's Daily read as notebook 07 reads it at smoke."""
    kw = {"block_size": 64, "max_train": 12, "corpus_lines": 600, "progress": False, "report_to": "none", **kw}
    return pt.PretrainConfig.for_scale("smoke", objective="sft", **kw)


def fit(model, cfg, tok, blocks, out_dir, steps=4):
    from nbkit.train import Loop, TrainConfig

    tcfg = TrainConfig(max_steps=steps, batch_size=4, lr=1e-3, eval_every=steps, output_dir=out_dir, progress=False,
                       report_to="none", log_every=1)
    loop = Loop(model, tcfg, blocks["train"], blocks["validation"], collate_fn=SFT.collator(cfg, tok))
    return loop, loop.fit()


@pytest.fixture(scope="module")
def demo_corpus():
    return SimpleNamespace(**dict(zip(("splits", "report"), SFT.data(config()))))   # the recipe's PretrainCorpus


def test_demo_data_follow_the_notebooks_splits_and_fit_the_context(demo_corpus, uer, capsys):
    from transformers import AutoTokenizer

    cfg = config(init=str(uer))
    splits = demo_corpus.splits
    assert {len(splits[s]) for s in ("train", "validation", "test")} == {36}          # 12 per task and split
    assert "lines=600, seed=0" in demo_corpus.report["ner_source"]                    # notebook 07's smoke split
    assert max(len(ex["text"]) for ex in splits["train"]) <= 32                        # half the 64-token context
    tok = AutoTokenizer.from_pretrained(str(uer))
    blocks = SFT.blocks(cfg, tok, demo_corpus)
    out = capsys.readouterr().out
    assert "sft train: " in out and "answer tokens" in out
    assert len(blocks["train"]) >= 30 and max(len(r) for r in blocks["train"]["input_ids"]) <= 64
    assert tok.chat_template and len(tok) == 21128                                    # [unused*] slots: no new ids


def test_sft_from_a_uer_gpt2_trains_and_its_export_answers_through_the_pipeline(demo_corpus, uer, tmp_path):
    from transformers import AutoTokenizer, pipeline

    from nbkit.evaluate.instruct import generate_answers

    cfg = config(init=str(uer))
    tok = AutoTokenizer.from_pretrained(str(uer))
    model = SFT.model(cfg, tok)
    assert model.config.eos_token_id == [tok.convert_tokens_to_ids("[unused4]"), tok.sep_token_id]
    blocks = SFT.blocks(cfg, tok, demo_corpus)
    loop, result = fit(model, cfg, tok, blocks, tmp_path / "run")
    assert result.metrics["eval_loss"] == result.metrics["eval_loss"]                 # finite, not NaN
    out = tmp_path / "model"
    SFT.export(cfg, loop.model, tok, out)
    saved = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert saved["chat_template"] == tok.chat_template and not (out / "chat_template.jinja").exists()
    gen = json.loads((out / "generation_config.json").read_text(encoding="utf-8"))
    assert gen["eos_token_id"] == model.config.eos_token_id and "max_new_tokens" not in gen
    assert gen["max_length"] == model.config.n_positions                               # up to the context
    pipe = pipeline("text-generation", model=str(out))
    said = pipe(MESSAGES, max_new_tokens=6)[0]["generated_text"]
    assert [m["role"] for m in said] == ["user", "assistant"]
    example = {"task": "sentiment", "text": "很好用", "gold": "positive",
               "messages": [*MESSAGES, {"role": "assistant", "content": "正面"}]}
    ours, unfinished = generate_answers(loop.model, tok, [example], max_new_tokens=6)
    assert said[-1]["content"] == ours[0] and unfinished in (0, 1)                   # the same greedy answer
    again = AutoTokenizer.from_pretrained(str(out))
    a, b = (t.apply_chat_template(example["messages"], return_assistant_tokens_mask=True) for t in (tok, again))
    assert a["input_ids"] == b["input_ids"] and a["assistant_masks"] == b["assistant_masks"]


def test_nbkit_own_causal_run_gets_four_markers_and_grows(tmp_path, demo_corpus):
    from nbkit.models.causal import build_causal_model
    from nbkit.models.export import export_causal_lm
    from nbkit.text.tokenizer import train_wordpiece

    tok = train_wordpiece(texts(300), vocab_size=800, out_dir=tmp_path / "wp", model_max_length=128)
    pretrained = tmp_path / "causal" / "model"                                          # notebook 06's layout
    export_causal_lm(build_causal_model("gpt2-tiny", tok, 64), tok, pretrained)
    n = len(tok)
    cfg = config(init=str(pretrained))
    model = SFT.model(cfg, tok)
    assert len(tok) == n + 4 and model.get_input_embeddings().weight.shape[0] == n + 4
    assert model.config.eos_token_id[0] == tok.convert_tokens_to_ids("<|end|>")
    other = train_wordpiece(texts(40), vocab_size=300, out_dir=tmp_path / "wp2", model_max_length=128)
    with pytest.raises(ConfigError, match="does not match the one saved with the model"):
        SFT.model(cfg, other)
    with pytest.raises(ConfigError, match="block_size=128 exceeds"):
        SFT.model(config(init=str(pretrained), block_size=128), tok)


def test_without_init_or_notebook_06_it_warns_and_starts_random(tmp_path, monkeypatch, capsys):
    from nbkit.text.tokenizer import train_wordpiece

    monkeypatch.setenv("NBKIT_RUNS_DIR", str(tmp_path / "runs"))
    tok = train_wordpiece(texts(100), vocab_size=400, out_dir=tmp_path / "wp", model_max_length=128)
    model = SFT.model(config(model="gpt2-tiny"), tok)
    assert "RANDOM weights of 'gpt2-tiny'" in capsys.readouterr().out
    assert model.get_input_embeddings().weight.shape[0] == len(tok)                   # markers included from the start


def test_gradient_checkpointing_is_a_setting_with_the_same_gradients(uer):
    from transformers import AutoTokenizer

    from nbkit.text.chat import encode_conversations

    cfg = config(init=str(uer), dropout=0.0)
    tok = AutoTokenizer.from_pretrained(str(uer))
    plain = SFT.model(cfg, tok)
    saving = SFT.model(SimpleNamespace(**{**vars(cfg), "gradient_checkpointing": True}), tok)   # the field, once merged
    assert saving.is_activation_checkpointing and not plain.is_activation_checkpointing
    cols, _ = encode_conversations(tok, [[*MESSAGES, {"role": "assistant", "content": "正面"}]], 64)
    batch = SFT.collator(cfg, tok)([{"input_ids": cols["input_ids"][0], "assistant_masks": cols["assistant_masks"][0]}])
    grads = []
    for model in (plain.train(), saving.train()):
        labels = batch["labels"]
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten()).backward()
        grads.append(model.get_input_embeddings().weight.grad.clone())
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_the_users_files_are_split_by_eval_fraction(tmp_path, capsys):
    rows = [{"instruction": f"问题{i}", "output": f"回答{i}"} for i in range(20)]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    splits, report = SFT.data(config(corpus=str(path), eval_fraction=0.1))
    assert len(splits["train"]) == 18 and len(splits["validation"]) == 2 and report["shapes"]["alpaca"] == 20
    assert "conversations: 20 of 20 records kept (20 alpaca); dropped: none" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"                                        # a skipped record is said on screen
    bad.write_text(path.read_text(encoding="utf-8") + '{"messages": [{"role": "robot", "content": "x"}]}\n',
                   encoding="utf-8")
    SFT.data(config(corpus=str(bad), eval_fraction=0.1, bad_records="skip"))
    assert "20 of 21 records kept" in (out := capsys.readouterr().out) and "bad.jsonl line 21" in out
    assert {r["origin"] for s in splits.values() for r in s} == {f"mine.jsonl line {i}" for i in range(1, 21)}
    with pytest.raises(DataError, match="eval_fraction=0.01 of 20 distinct conversations holds out 0"):
        SFT.data(config(corpus=str(path), eval_fraction=0.01))
    assert "max_train" in SFT.unused(config(corpus=str(path))) and "mix" in SFT.unused(config())


def test_a_copy_of_a_training_conversation_is_never_held_out(tmp_path, capsys):
    rows = [{"instruction": f"问题{i % 5}", "output": f"回答{i % 5}"} for i in range(60)]   # 5 distinct, 12 copies
    path = tmp_path / "repeats.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    splits, report = SFT.data(config(corpus=str(path), eval_fraction=0.2))
    train = {json.dumps(r["messages"], sort_keys=True) for r in splits["train"]}
    held = {json.dumps(r["messages"], sort_keys=True) for r in splits["validation"]}
    assert len(held) == 1 and not held & train and len(splits["validation"]) == 12   # one of 5, with all its copies
    assert report["n_duplicates"] == 55 and len(splits["train"]) == 48
    assert "55 repeat an earlier one exactly" in capsys.readouterr().out


def test_a_llama_checkpoint_is_tuned_the_same_way(tmp_path, demo_corpus):
    from transformers import AutoTokenizer

    from nbkit.models.standin import build_standin

    folder = build_standin(tmp_path / "llama", "llama")
    tok = AutoTokenizer.from_pretrained(str(folder))
    cfg = config(init=str(folder))
    model = SFT.model(cfg, tok)
    assert type(model).__name__ == "LlamaForCausalLM" and model.config.vocab_size == len(tok) == 21128
    assert model.config.eos_token_id == [tok.convert_tokens_to_ids("[unused4]"), tok.convert_tokens_to_ids("[SEP]")]
    _, result = fit(model, cfg, tok, SFT.blocks(cfg, tok, demo_corpus), tmp_path / "run", steps=2)
    assert result.metrics["eval_loss"] == result.metrics["eval_loss"]


def test_run_pretraining_with_objective_sft_trains_saves_and_the_export_chats(uer, tmp_path):
    """The whole recipe with objective="sft": same loop, checkpoints and metrics.json; the saved folder answers a list
    of messages through pipeline("text-generation") and stops at the end-of-turn marker."""
    from transformers import pipeline

    cfg = config(init=str(uer), max_steps=4, eval_every=2)
    assert cfg.lr == 5e-4 and "corpus_lines" not in cfg.unused()      # SFT's rows, not continued pretraining's
    metrics = pt.run_pretraining(cfg, tmp_path / "run")
    assert metrics["objective"] == "sft" and metrics["steps"] == 4 and metrics["eval_loss"] > 0
    assert metrics["init"] == str(uer)                                  # what it started from, as recorded
    assert sorted(metrics["checkpoints"]) == [2, 4]
    chat = pipeline("text-generation", model=metrics["model_dir"])
    out = chat(MESSAGES, max_new_tokens=8, do_sample=False)[0]["generated_text"]
    assert out[0] == MESSAGES[0] and out[-1]["role"] == "assistant"
