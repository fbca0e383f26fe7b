"""The chat template in the tokenizer files (nbkit.text.chat): which markers a vocabulary gets, the assistant-only
mask transformers derives from it, the round trip through the saved files, a checkpoint's own template kept, the
encoding's overflow counts, and the padded batch's loss equal to the per-conversation loss."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import texts  # noqa: E402

from nbkit.errors import ConfigError, DataError  # noqa: E402
from nbkit.text import chat  # noqa: E402

CONVERSATION = [{"role": "system", "content": "你是助手。"},
                {"role": "user", "content": "这条评论是正面还是负面？很好用"},
                {"role": "assistant", "content": "正面"},
                {"role": "user", "content": "列出句中的人名：江泽民会见李鹏"},
                {"role": "assistant", "content": "江泽民、李鹏"}]

#: Meta's Llama 3 instruct template as published (no generation markers), and the same with them
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' "
          "%}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
LLAMA3_TRAINING = ("{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
                   "'<|end_header_id|>\n\n' }}{% if message['role'] == 'assistant' %}{% generation %}"
                   "{{ message['content'] | trim + '<|eot_id|>' }}{% endgeneration %}{% else %}"
                   "{{ message['content'] | trim + '<|eot_id|>' }}{% endif %}{% endfor %}"
                   "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]


@pytest.fixture(scope="module")
def uer(tmp_path_factory):
    """A UER-layout GPT-2 over bert-base-chinese's vocabulary (tiny, random weights)."""
    from nbkit.models.standin import build_standin

    return build_standin(tmp_path_factory.mktemp("uer") / "gpt2", "uer-gpt2")


def bert_vocab_tokenizer(folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def own_tokenizer(tmp_path):
    """notebook 01's kind of tokenizer: nbkit's WordPiece trained on People's Daily, no [unused*] entries."""
    from nbkit.text.tokenizer import train_wordpiece

    return train_wordpiece(texts(200), vocab_size=600, out_dir=tmp_path / "wp", model_max_length=128)


def llama3_tokenizer(template: str):
    """A stand-in for a Llama-3 checkpoint's tokenizer: its special tokens and template over a local vocabulary."""
    from transformers import PreTrainedTokenizerFast

    from nbkit.text.chinese_vocab import bert_chinese_tokenizer, chinese_vocab

    backend = bert_chinese_tokenizer(chinese_vocab())
    backend.post_processor = None
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                  unk_token="[UNK]", pad_token="[PAD]")
    tok.add_special_tokens({"additional_special_tokens": LLAMA3_SPECIALS[1:3]}, replace_extra_special_tokens=False)
    tok.chat_template = template
    return tok


def masked_tokens(tok, messages):
    enc = tok.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    return [t for t, m in zip(tok.convert_ids_to_tokens(enc["input_ids"]), enc["assistant_masks"]) if m], enc


def test_bert_vocabulary_takes_its_unused_slots_and_masks_the_assistant_turns_only(uer):
    tok = bert_vocab_tokenizer(uer)
    n = len(tok)
    info = chat.with_chat_template(tok)
    assert info == {"how": "unused", "end_of_turn_id": 4, "end_of_turn": "[unused4]", "added_tokens": 0}
    assert len(tok) == n                                                   # no new ids: no embedding resize
    assert tok.apply_chat_template(CONVERSATION[:3], tokenize=False) == (
        "[SEP][unused1]你是助手。[unused4][unused2]这条评论是正面还是负面？很好用[unused4][unused3]正面[unused4]")
    marked, enc = masked_tokens(tok, CONVERSATION)                        # two assistant turns and a system message
    assert marked == ["正", "面", "[unused4]", "江", "泽", "民", "、", "李", "鹏", "[unused4]"]
    # the generation prompt is exactly the ids the conversation was trained on, up to the assistant's answer
    prompt = tok.apply_chat_template(CONVERSATION[:4], add_generation_prompt=True)["input_ids"]
    assert prompt == enc["input_ids"][:len(prompt)] and enc["assistant_masks"][len(prompt)] == 1
    assert sum(enc["assistant_masks"][:len(prompt)]) == 3                 # the first answer only
    assert chat.with_chat_template(tok)["how"] == "kept" and len(tok) == n   # a second call changes nothing


def test_the_template_round_trips_through_the_export_files(uer, tmp_path):
    from transformers import AutoTokenizer

    from nbkit.text.causal import document_separator
    from nbkit.text.tokenizer_files import save_tokenizer

    tok = bert_vocab_tokenizer(uer)
    chat.with_chat_template(tok)
    save_tokenizer(tok, tmp_path, cjk_decode=True, start_token=document_separator(tok)[1])   # the causal export's
    chat.store_chat_template(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["chat_template"] == tok.chat_template and not (tmp_path / "chat_template.jinja").exists()
    again = AutoTokenizer.from_pretrained(str(tmp_path))
    for messages in (CONVERSATION, CONVERSATION[1:3]):
        a = tok.apply_chat_template(messages, return_assistant_tokens_mask=True)
        b = again.apply_chat_template(messages, return_assistant_tokens_mask=True)
        assert a["input_ids"] == b["input_ids"] and a["assistant_masks"] == b["assistant_masks"]
    assert chat.with_chat_template(again)["how"] == "kept"


def test_a_vocabulary_without_unused_slots_gets_four_new_tokens_and_the_model_grows(tmp_path):
    from nbkit.models.causal import build_causal_model

    tok = own_tokenizer(tmp_path)
    assert not any(t.startswith("[unused") for t in tok.get_vocab())     # nbkit's own WordPiece has none
    model = build_causal_model("gpt2-tiny", tok, 64)
    n = len(tok)
    info = chat.with_chat_template(tok)
    assert info["how"] == "added" and info["added_tokens"] == 4 and info["end_of_turn"] == "<|end|>"
    assert tok.convert_tokens_to_ids(list(chat.NEW_MARKERS)) == list(range(n, n + 4))
    old = model.get_input_embeddings().weight.detach().clone()
    assert chat.fit_embeddings(model, tok) == 4 and chat.fit_embeddings(model, tok) == 0
    new = model.get_input_embeddings().weight
    assert new.shape[0] == n + 4 and torch.equal(new[:n], old)
    assert model.get_output_embeddings().weight is new                    # still tied
    marked, _ = masked_tokens(tok, CONVERSATION[1:3])
    assert marked == ["正", "面", "<|end|>"]


def test_a_checkpoint_template_is_kept_and_must_mark_the_assistant():
    with pytest.raises(ConfigError, match=r"no \{% generation %\}.*get_training_chat_template"):
        chat.with_chat_template(llama3_tokenizer(LLAMA3))
    tok = llama3_tokenizer(LLAMA3_TRAINING)
    n = len(tok)
    info = chat.with_chat_template(tok)
    assert info["how"] == "kept" and info["end_of_turn"] == "<|eot_id|>" and len(tok) == n
    marked, enc = masked_tokens(tok, CONVERSATION[:3])
    assert marked == ["正", "面", "<|eot_id|>"]
    tokens = tok.convert_ids_to_tokens(enc["input_ids"])
    assert tokens[:2] == ["<|begin_of_text|>", "<|start_header_id|>"] and "[unused1]" not in tokens
    # the same template given for a tokenizer that has none: used as given
    given = llama3_tokenizer(LLAMA3)
    assert chat.with_chat_template(given, chat_template=LLAMA3_TRAINING)["how"] == "given"
    assert given.apply_chat_template(CONVERSATION[:3])["input_ids"] == enc["input_ids"]


def test_a_generation_span_without_the_end_of_turn_token_is_refused():
    outside = LLAMA3_TRAINING.replace("{% generation %}{{ message['content'] | trim + '<|eot_id|>' }}"
                                      "{% endgeneration %}", "{% generation %}{{ message['content'] | trim }}"
                                      "{% endgeneration %}{{ '<|eot_id|>' }}")
    assert outside != LLAMA3_TRAINING
    with pytest.raises(ConfigError, match="never learns to stop"):
        chat.with_chat_template(llama3_tokenizer(outside))


def test_an_unknown_role_is_named_by_the_template(uer):
    tok = bert_vocab_tokenizer(uer)
    chat.with_chat_template(tok)
    with pytest.raises(Exception, match="unknown role tool: use system, user or assistant"):
        tok.apply_chat_template([{"role": "tool", "content": "x"}])


def test_overflow_is_dropped_or_truncated_and_counted(uer):
    tok = bert_vocab_tokenizer(uer)
    chat.with_chat_template(tok)
    short = CONVERSATION[1:3]                                    # 20 tokens
    long_answer = [{"role": "user", "content": "说"}, {"role": "assistant", "content": "好" * 40}]  # 46 tokens
    long_prompt = [{"role": "user", "content": "长" * 40}, {"role": "assistant", "content": "好"}]
    cols, report = chat.encode_conversations(tok, [short, long_answer, long_prompt], max_length=24)
    assert report["n_kept"] == 1 and report["n_dropped_too_long"] == 2 and cols["index"] == [0]
    assert report["length_max"] == 46 and report["n_target_tokens"] == 3
    cols, report = chat.encode_conversations(tok, [short, long_answer, long_prompt], max_length=24,
                                             overflow="truncate")
    assert (report["n_kept"], report["n_truncated"], report["n_dropped_no_target"]) == (2, 2, 1)
    assert cols["index"] == [0, 1] and all(len(ids) <= 24 for ids in cols["input_ids"])
    with pytest.raises(DataError, match="no conversation left.*overflow='truncate'"):
        chat.encode_conversations(tok, [long_prompt], max_length=24)
    with pytest.raises(DataError, match="no conversation left") as err:         # truncating already: not advised
        chat.encode_conversations(tok, [long_prompt], max_length=24, overflow="truncate")
    assert "overflow=" not in str(err.value) and "a larger block_size or shorter conversations" in str(err.value)
    with pytest.raises(ConfigError, match="overflow='cut'"):
        chat.encode_conversations(tok, [short], max_length=24, overflow="cut")


def test_the_padded_batch_loss_is_the_token_weighted_per_conversation_loss(uer):
    import torch.nn.functional as F

    from nbkit.models.causal import build_causal_model

    tok = bert_vocab_tokenizer(uer)
    chat.with_chat_template(tok)
    conversations = [CONVERSATION, CONVERSATION[1:3], CONVERSATION[3:5],
                     [{"role": "user", "content": "你好"}, {"role": "assistant", "content": "你好，有什么可以帮你？"}]]
    cols, _ = chat.encode_conversations(tok, conversations, max_length=128)
    examples = [{"input_ids": i, "assistant_masks": m} for i, m in zip(cols["input_ids"], cols["assistant_masks"])]
    collate = chat.ChatCollator(tok, pad_to_multiple_of=8)
    batch = collate(examples)
    assert batch["input_ids"].shape == (4, -(-max(map(len, cols["input_ids"])) // 8) * 8) and batch["attention_mask"].sum(1).tolist() == [
        len(i) for i in cols["input_ids"]]
    # labels: the next token where it is the assistant's, -100 elsewhere (prompt, markers, padding)
    row = batch["labels"][1]
    ids = torch.tensor(cols["input_ids"][1])
    targets = ids[1:][torch.tensor(cols["assistant_masks"][1][1:], dtype=torch.bool)]
    assert torch.equal(row[row != -100], targets) and tok.convert_ids_to_tokens(targets) == ["正", "面", "[unused4]"]
    model = build_causal_model("gpt2-tiny", tok, 128, seed=0).eval()

    def loss_sum(b):
        logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits     # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), b["labels"].flatten(), reduction="sum"), (b["labels"] != -100).sum()

    with torch.no_grad():
        together, n = loss_sum(batch)
        alone = [loss_sum(collate([ex])) for ex in examples]
    per_token = sum(s for s, _ in alone) / sum(k for _, k in alone)
    assert int(n) == sum(int(k) for _, k in alone) == (3 + 7) + 3 + 7 + 12
    assert torch.allclose(together / n, per_token, rtol=1e-5, atol=1e-6)
    with pytest.raises(DataError, match="empty batch"):
        collate([])


def test_trl_assistant_only_loss_reads_the_same_targets(uer, tmp_path):
    """TRL's SFTTrainer(assistant_only_loss=True) on the same tokenizer scores the same tokens: its labels are unshifted
    (the model shifts them), nbkit's are shifted by the collator."""
    pytest.importorskip("trl", reason="TRL is the comparison, not a dependency")
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from nbkit.models.causal import build_causal_model

    tok = bert_vocab_tokenizer(uer)
    chat.with_chat_template(tok)
    conversations = [CONVERSATION, CONVERSATION[1:3]]
    model = build_causal_model("gpt2-tiny", tok, 128, seed=0)
    args = SFTConfig(output_dir=str(tmp_path), assistant_only_loss=True, report_to=[], max_length=128,
                     per_device_train_batch_size=2, use_cpu=True)
    trainer = SFTTrainer(model=model, args=args, processing_class=tok,
                         train_dataset=Dataset.from_list([{"messages": c} for c in conversations]))
    theirs = trainer.data_collator([trainer.train_dataset[i] for i in range(2)])
    cols, _ = chat.encode_conversations(tok, conversations, max_length=128)
    ours = chat.ChatCollator(tok)([{"input_ids": i, "assistant_masks": m}
                                   for i, m in zip(cols["input_ids"], cols["assistant_masks"])])
    assert torch.equal(theirs["input_ids"][theirs["attention_mask"] == 1], ours["input_ids"][ours["attention_mask"] == 1])
    assert torch.equal(theirs["labels"][:, 1:], ours["labels"][:, :-1])
