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


def test_the_exports_bare_pipeline_call_is_generates_greedy_line_and_stays_in_the_context(gpt64, tmp_path):
    """Item 2: the bare call ran transformers' pipeline defaults (256 sampled tokens) past 64 positions."""
    import sys

    from transformers import pipeline

    from nbkit.evaluate.generation import generate

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _corpus import texts

    model, tok, out = gpt64
    saved = json.loads((out / "generation_config.json").read_text())
    assert saved["do_sample"] is False and saved["max_length"] == 64 and "max_new_tokens" not in saved
    pipe = pipeline("text-generation", model=str(out))
    bare = pipe("今天天气")[0]["generated_text"]
    assert bare == generate(model, tok, "今天天气")                                    # each one's default
    assert len(tok(bare, add_special_tokens=False)["input_ids"]) == 63                  # up to the context: the
    # separator and 63 tokens fill 64 positions
    assert pipe("今天天气", max_new_tokens=30)[0]["generated_text"] == generate(model, tok, "今天天气",
                                                                              max_new_tokens=30)  # notebook 06
    long = "".join(texts(5))                                                             # > 64 tokens
    assert len(tok(long)["input_ids"]) > 64
    cut = pipe(long, max_new_tokens=10, handle_long_generation="hole")[0]["generated_text"]  # the documented call
    assert cut.startswith(long) and len(cut) > len(long)
    with pytest.raises(DataError, match=r"tokens and one new token, .* past the model's context of 64 tokens"):
        generate(model, tok, long)                                                       # nbkit's own refusal


@pytest.mark.parametrize("kwargs", [{}, {"truncation": True}], ids=["bare", "truncation"])
def test_the_bare_pipeline_call_refuses_a_prompt_that_fills_the_context_naming_both_lengths(gpt64, kwargs):
    """Item 2 (rest): a prompt longer than the context raised IndexError in GPT-2's position table, with or without
    truncation=True; with max_length = the context transformers refuses it before the model runs."""
    import sys

    from transformers import pipeline

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _corpus import texts

    _, tok, out = gpt64
    assert json.loads((out / "tokenizer_config.json").read_text())["model_max_length"] == 64
    long = "".join(texts(5))
    assert len(tok(long)["input_ids"]) > 64
    with pytest.raises(ValueError, match=r"Input length of input_ids is \d+, but `max_length` is set to 64"):
        pipeline("text-generation", model=str(out))(long, **kwargs)


def test_generation_settings_the_export_does_not_take_are_refused_by_name(tmp_path):
    """A fixed max_new_tokens is not exported (it overrides max_length); asking for it says so, not a TypeError."""
    from nbkit.objectives.causal import check_generation_keys

    assert check_generation_keys(None) == {} and check_generation_keys({"no_repeat_ngram_size": 3}) == {
        "no_repeat_ngram_size": 3}
    with pytest.raises(ConfigError, match=r"\['max_new_tokens'\] are not exported \(no fixed length .*pass "
                                          r"max_new_tokens to the pipeline call"):
        check_generation_keys({"max_new_tokens": 30})
    with pytest.raises(ConfigError, match="takes repetition_penalty, no_repeat_ngram_size"):
        check_generation_keys({"temperature": 0.7})


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
    mine = generate(model, tok, "今天天气", full_text=False, repetition_penalty=1.5, max_new_tokens=30)
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


_FRESH_RUN = """
import os, sys
sys.path.insert(0, {tests!r})
from loop_helpers import mlm_collate, tiny_mlm, token_data
from nbkit.train import Loop, TrainConfig
out = {out!r}
cfg = TrainConfig(max_steps=1, batch_size=4, progress=False, precision="fp32", output_dir=out, resume={resume})
try:
    loop = Loop(tiny_mlm(), cfg, token_data(), collate_fn=mlm_collate)
    loop.fit()
    print("TRAINED")
except Exception as exc:
    print("ERROR", type(exc).__name__, exc)
print("LEFT", sorted(os.listdir(os.path.join(out, "checkpoints"))))
"""


def _run_with_read_only(target: Path, out: Path, resume: bool) -> str:
    """A loop run in ``out`` while ``target`` is read-only: ``chmod a-w`` for a user, a read-only bind mount
    in a private mount namespace for root (whom permissions do not stop)."""
    import os
    import subprocess
    import sys

    prog = out.parent / "fresh_run.py"
    prog.write_text(_FRESH_RUN.format(tests=str(Path(__file__).parent), out=str(out), resume=resume))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    if os.geteuid() != 0:
        mode = target.stat().st_mode
        target.chmod(0o555)
        try:
            run = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=300, env=env)
        finally:
            target.chmod(mode)
    else:
        import shutil

        if not shutil.which("unshare"):
            pytest.skip("root without unshare: no way to make a folder read-only for this process")
        cmd = f"mount --bind {target} {target} && mount -o remount,bind,ro {target} && {sys.executable} {prog}"
        run = subprocess.run(["unshare", "-m", "bash", "-c", cmd], capture_output=True, text=True, timeout=300,
                             env=env)
        if "mount" in run.stderr and run.returncode:
            pytest.skip(f"bind mount not permitted here: {run.stderr.strip()[:200]}")
    assert "LEFT" in run.stdout, run.stdout + run.stderr[-2000:]
    return run.stdout


@pytest.mark.parametrize("what", ["checkpoints", "step"])
def test_a_read_only_checkpoint_folder_is_named_before_training_and_nothing_is_moved(tmp_path, what):
    """Item 7: a read-only checkpoints/ gave a raw PermissionError from set_aside; a read-only step-* left an
    empty previous-* behind."""
    import subprocess
    import sys

    out = tmp_path / "run"
    first = subprocess.run([sys.executable, "-c", _FRESH_RUN.format(tests=str(Path(__file__).parent), out=str(out),
                                                                    resume=False)],
                           capture_output=True, text=True, timeout=300,
                           env={**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert "TRAINED" in first.stdout, first.stdout + first.stderr[-2000:]
    step = next((out / "checkpoints").glob("step-*"))
    target = out / "checkpoints" if what == "checkpoints" else step
    got = _run_with_read_only(target, out, resume=False)
    assert "ERROR ConfigError" in got and str(target) in got and "not writable" in got and "chmod -R u+w" in got, got
    assert "TRAINED" not in got and f"LEFT ['{step.name}']" in got                  # no previous-*, nothing moved


def test_set_aside_puts_back_what_it_moved_when_one_entry_cannot_move(tmp_path, monkeypatch):
    import os

    from nbkit.atomic import set_aside
    from nbkit.errors import WriteError

    for name in ("step-000001", "step-000002"):
        (tmp_path / name).mkdir()
    rename = os.rename

    def refuse_the_second(src, dst):
        if Path(src).name == "step-000002" and "previous-" in str(dst):
            raise PermissionError(13, "Permission denied")
        rename(src, dst)

    monkeypatch.setattr(os, "rename", refuse_the_second)
    with pytest.raises(WriteError, match=r"Could not move .*step-000002 aside .*nothing was moved.*chmod -R u\+w"):
        set_aside(tmp_path, ["step-000001", "step-000002"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000001", "step-000002"]


def test_a_file_given_to_a_bundled_task_is_refused_not_ignored(tmp_path):
    """Item 7: FinetuneConfig(train_file=...) without task='own' trained on the bundled reviews without a word."""
    from nbkit.recipes import finetuning as ft

    mine = tmp_path / "mine.csv"
    mine.write_text("text,label\n很好,pos\n很差,neg\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"train_file=.*mine.csv' given with task='reviews'.*ignore them\. "
                                          r"Fix: task='own'"):
        ft.FinetuneConfig.for_scale("smoke", train_file=str(mine))
    with pytest.raises(ConfigError, match="test_file=.*task='news'"):
        ft.FinetuneConfig.for_scale("smoke", task="news", test_file=str(mine))
    own = ft.FinetuneConfig.for_scale("smoke", task="own", train_file=str(mine))
    assert own.train_file == str(mine) and ft.FinetuneConfig.for_scale("smoke").train_file is None


def _gpt2_bpe():
    """A GPT-2 style byte-level BPE (``GPT2TokenizerFast``, eos ``<|endoftext|>``) trained on People's Daily."""
    import sys

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2TokenizerFast

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _corpus import texts

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts(300), trainers.BpeTrainer(vocab_size=800, special_tokens=["<|endoftext|>"],
                                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return GPT2TokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                             unk_token="<|endoftext|>", model_max_length=64)


def _llama_sentencepiece():
    """A Llama-style SentencePiece BPE (``LlamaTokenizerFast``: ``▁`` word marks, byte fallback, ``<s>`` added
    before every text, eos ``</s>``) trained on People's Daily."""
    import sys

    from tokenizers import Tokenizer, decoders, models, normalizers, trainers
    from transformers import LlamaTokenizerFast

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _corpus import texts

    sp = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    sp.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    sp.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    sp.train_from_iterator(texts(300), trainers.BpeTrainer(vocab_size=800, special_tokens=["<unk>", "<s>", "</s>"]))
    return LlamaTokenizerFast(tokenizer_object=sp, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                              add_bos_token=True, add_eos_token=False, model_max_length=64)


@pytest.mark.parametrize("kind", ["gpt2-bpe", "llama-sentencepiece"])
def test_generate_and_the_exported_pipeline_read_a_bpe_prompt_alike(kind, tmp_path):
    """Item 10: the export completed WordPiece tokenizers only, so the pipeline encoded a BPE prompt without the
    separator (GPT-2) or with ``<s>`` (Llama) where generate (and training) put the separator first."""
    from transformers import AutoTokenizer, pipeline

    from nbkit.evaluate.generation import generate
    from nbkit.models.causal import build_causal_model
    from nbkit.models.export import export_causal_lm
    from nbkit.text.causal import prompt_ids

    tok = _gpt2_bpe() if kind == "gpt2-bpe" else _llama_sentencepiece()
    model = build_causal_model("gpt2-tiny" if kind == "gpt2-bpe" else "llama-tiny", tok, 64, seed=0).eval()
    out = export_causal_lm(model, tok, tmp_path / "export")
    pipe = pipeline("text-generation", model=str(out))
    for prompt in ("今天天气", "中国人民 and 2024"):
        mine = prompt_ids(tok, prompt)
        assert AutoTokenizer.from_pretrained(out)(prompt)["input_ids"] == mine          # the separator first
        theirs = pipe(prompt, max_new_tokens=30, return_tensors=True)[0]["generated_token_ids"]
        ref = model.generate(input_ids=torch.tensor([mine]), attention_mask=torch.ones(1, len(mine), dtype=torch.long),
                             max_new_tokens=30, do_sample=False)[0].tolist()
        assert list(theirs) == ref                                                        # greedy, token for token
        assert pipe(prompt)[0]["generated_text"] == generate(model, tok, prompt)


def test_a_test_file_without_entities_reports_f1_as_undefined_not_zero(tmp_path, capsys):
    """Item 8: a test split with no entities reported F1 0.0 with interval [0.0, 0.0]."""
    import warnings

    from nbkit.evaluate.ner import entity_f1_diff, entity_f1_interval, entity_scores
    from nbkit.jobs import finetune

    sample = Path(__file__).resolve().parents[1] / "notebooks" / "data" / "sample_ner.conll"
    plain = ["今天天气很好。", "我们明天再去看看吧。", "这本书写得不错，值得一读。", "价格有点贵，但是质量还可以。"]
    test = tmp_path / "test.conll"
    test.write_text("\n\n".join("\n".join(f"{c}\tO" for c in s) for s in plain) + "\n", encoding="utf-8")
    gold = [["O"] * len(s) for s in plain]
    spurious = [["B-PER", "I-PER"] + ["O"] * (len(s) - 2) for s in plain]
    assert entity_scores(gold, gold)["f1"] is None and entity_scores(gold, spurious)["precision"] == 0.0
    assert "hold no entity" in entity_scores(gold, gold)["undefined"]
    assert entity_f1_interval(gold, gold, n_boot=20) is None
    assert entity_f1_diff(gold, gold, spurious, n_boot=20)["value"] is None
    standin = build_standin(tmp_path / "bert")
    out = tmp_path / "out"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc = finetune.main(["--scale", "smoke", "--task", "ner", "--train-file", str(sample), "--test-file", str(test),
                            "--init", str(standin), "--max-steps", "2", "--n-boot", "20", "--report-to", "none",
                            "--output-dir", str(out)])
    assert rc == 0, capsys.readouterr().out[-3000:]
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["n_test"] == 4
    assert metrics["test_entity_f1"] is None and metrics["test_entity_recall"] is None
    assert metrics["test_entity_f1_interval"] is None and metrics["baseline_entity_f1"] is None
    assert "hold no entity" in metrics["test_entity_undefined"] and metrics["diff_entity_f1"]["value"] is None
    assert any("hold no entity" in str(w.message) for w in caught)                    # said, not only filed


def _unk_tokenizer_beside(folder: Path) -> Path:
    """Replace the tokenizer files of ``folder`` by what a user saves from transformers 5's
    ``BertTokenizerFast(vocab_file=...)``: it maps every Chinese character to [UNK]."""
    from transformers import BertTokenizerFast

    broken = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"))
    assert broken.tokenize("今天天气") == ["[UNK]"] * 4
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (folder / name).unlink(missing_ok=True)
    broken.save_pretrained(str(folder))
    return folder


def test_a_tokenizer_that_reads_everything_as_unk_is_refused_before_training(tmp_path, runs_tmp):
    """Item 13: such a tokenizer trained a model on nothing but [UNK] without a word (loss 0.003)."""
    import warnings

    sys_path = str(Path(__file__).resolve().parent)
    import sys

    sys.path.insert(0, sys_path)
    from _corpus import texts

    from nbkit.errors import DataError

    bert = _unk_tokenizer_beside(build_standin(tmp_path / "bert"))
    cfg = pt.PretrainConfig.for_scale("smoke", init=str(bert), max_train=100, corpus_lines=100)
    corpus = pt.data(cfg)
    tok = pt.tokenizer(cfg, corpus)
    with pytest.raises(DataError, match=r"\d+\.\d% of the training text's tokens .* are \[UNK\], above 5% \(e\.g\. "
                                        r"'.', '.', '.' become \[UNK\]\).*BertTokenizerFast\(vocab_file=\.\.\.\).*"
                                        r"BertTokenizer\.from_pretrained\(dir\).*allow_unk=True"):
        pt.blocks(cfg, tok, corpus)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(pt.blocks(cfg.replace(allow_unk=True), tok, corpus)["train"]) > 0           # the flag goes on
    assert any("[UNK]" in str(w.message) for w in caught)
    # a corpus prepared into a store with the GPT-2's own (broken) tokenizer: the store's ids are checked
    gpt = _unk_tokenizer_beside(build_standin(tmp_path / "uer", layout="uer-gpt2"))
    (tmp_path / "corpus.txt").write_text("\n".join(texts(300)), encoding="utf-8")
    ccfg = pt.PretrainConfig.for_scale("smoke", objective="causal", init=str(gpt), corpus=str(tmp_path / "corpus.txt"))
    store = pt.data(ccfg)
    with pytest.raises(DataError, match=r"of the corpus store .* are \[UNK\].*allow_unk=True"):
        pt.blocks(ccfg, pt.tokenizer(ccfg, store), store)
    good = build_standin(tmp_path / "good")                                             # a sound tokenizer passes
    ok = pt.PretrainConfig.for_scale("smoke", init=str(good), max_train=100, corpus_lines=100)
    assert len(pt.blocks(ok, pt.tokenizer(ok, corpus), corpus)["train"]) > 0
