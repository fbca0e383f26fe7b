"""Continued pretraining from a published checkpoint (``PretrainConfig.init``), on local stand-ins in the layout
of bert-base-chinese and of a ckiplab model (``nbkit.models.standin``): nothing is downloaded."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import texts  # noqa: E402

from nbkit.errors import CheckpointError, ConfigError  # noqa: E402
from nbkit.models.standin import build_standin, chinese_vocab  # noqa: E402
from nbkit.recipes import finetuning as ft  # noqa: E402
from nbkit.recipes import pretraining as pt  # noqa: E402


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    root = tmp_path_factory.mktemp("standins")
    return {"bbc": build_standin(root / "bert-base-chinese"), "ckip": build_standin(root / "ckip", layout="ckiplab")}


def _cfg(init, **kw):
    return pt.PretrainConfig.for_scale("smoke", init=str(init), **kw)


def test_standin_has_bert_base_chinese_layout(standins):
    from transformers import AutoTokenizer

    bbc = standins["bbc"]
    vocab = (bbc / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert len(vocab) == 21128 and vocab == chinese_vocab()
    assert vocab[0] == "[PAD]" and vocab[1] == "[unused1]" and vocab[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert "的" in vocab and "好" in vocab
    config = json.loads((bbc / "config.json").read_text())
    assert config["max_position_embeddings"] == 512 and config["architectures"] == ["BertForMaskedLM"]
    assert "do_lower_case" in json.loads((bbc / "tokenizer_config.json").read_text())
    from safetensors import safe_open

    with safe_open(str(bbc / "model.safetensors"), "pt") as f:
        names = set(f.keys())
    assert {"bert.pooler.dense.weight", "cls.seq_relationship.weight", "bert.embeddings.LayerNorm.gamma"} <= names
    assert AutoTokenizer.from_pretrained(str(bbc)).tokenize("我爱北京") == list("我爱北京")   # one token per character
    assert not (standins["ckip"] / "tokenizer.json").exists() and (standins["ckip"] / "pytorch_model.bin").is_file()


@pytest.mark.parametrize("layout", ["bbc", "ckip"])
def test_init_loads_every_weight_exactly(standins, layout, capsys):
    from transformers import BertForMaskedLM

    init = standins[layout]
    cfg = _cfg(init)
    tok = pt.tokenizer(cfg, pt.PretrainCorpus())
    bert = pt.model(cfg, tok)
    ref = BertForMaskedLM.from_pretrained(str(init))
    mine, theirs = bert.state_dict(), ref.state_dict()
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine), [k for k in mine if not torch.equal(mine[k], theirs[k])]
    emb = bert.bert.embeddings.word_embeddings.weight
    assert bert.cls.predictions.decoder.weight.data_ptr() == emb.data_ptr()          # the decoder stays tied
    if layout == "bbc":                                                                # against the file itself
        from safetensors.torch import load_file

        raw = load_file(str(init / "model.safetensors"))
        assert torch.equal(emb, raw["bert.embeddings.word_embeddings.weight"])
        assert torch.equal(bert.cls.predictions.bias, raw["cls.predictions.bias"])
        assert torch.equal(bert.bert.embeddings.LayerNorm.weight, raw["bert.embeddings.LayerNorm.gamma"])
        assert "not used by MLM: bert.pooler.dense.bias" in capsys.readouterr().out
    assert bert.config.nbkit_pretraining == {"objective": "mlm", "init": str(init)}


def test_sparse_head_loss_equals_bert_for_masked_lm(standins):
    from transformers import BertForMaskedLM

    from nbkit.switches import isolated_rng
    from nbkit.train import Loop, TrainConfig

    init = standins["bbc"]
    cfg = _cfg(init)
    tok = pt.tokenizer(cfg, pt.PretrainCorpus())
    examples = [{"input_ids": tok(t, truncation=True, max_length=64)["input_ids"]} for t in texts(8)]
    collate = pt.collator(cfg.replace(whole_word=False), tok)
    bert = pt.model(cfg, tok)
    loop = Loop(bert, TrainConfig(max_steps=1, batch_size=8, seed=5, progress=False), examples, examples,
                collate_fn=collate)
    got = loop.evaluate()["eval_loss"]
    with isolated_rng(5):                                     # the batch the loop scored (batch 0: seed + 0)
        batch = collate(examples)
    ref = BertForMaskedLM.from_pretrained(str(init)).eval()
    with torch.no_grad():
        want = ref(**batch).loss.item()
    assert int((batch["labels"] != -100).sum()) > 10
    assert got == pytest.approx(want, rel=1e-5)


def test_init_tokenizer_is_kept_and_the_store_is_prepared_with_it(standins, runs_tmp, tmp_path):
    from transformers import AutoTokenizer

    from nbkit.corpus.dataset import StoreMLMDataset

    init = standins["bbc"]
    corpus_file = tmp_path / "c.txt"
    corpus_file.write_text("\n".join(texts(300)) + "\n", encoding="utf-8")
    cfg = _cfg(init, corpus=str(corpus_file))
    corpus = pt.data(cfg)
    tok = pt.tokenizer(cfg, corpus)
    theirs = AutoTokenizer.from_pretrained(str(init))
    sample = texts(20)
    assert [tok(t)["input_ids"] for t in sample] == [theirs(t)["input_ids"] for t in sample]
    assert not (runs_tmp / "smoke" / "tokenizer").exists()                       # no WordPiece trained
    manifest = json.loads((corpus.store / "manifest.json").read_text())
    assert manifest["tokenizer"]["vocab_size"] == 21128
    assert corpus.store.name.split("-tok-")[1].startswith("bert-base-chinese")   # keyed by the tokenizer
    blocks = StoreMLMDataset(corpus.store, cfg.block_size, "train")
    ids = [int(i) for i in blocks[0]["input_ids"][1:11]]
    assert theirs.decode(ids).replace(" ", "") in "".join(texts(300))             # the checkpoint's ids
    # whole-word masking: the store's word starts (rjieba) over single-character tokens
    batch = pt.collator(cfg, tok)([blocks[i] for i in range(8)])
    starts = torch.stack([torch.as_tensor(blocks[i]["word_ids"]) for i in range(8)])   # (B, T) word number
    masked = batch["labels"] != -100
    multi = 0
    for b in range(8):
        for w in set(starts[b][masked[b]].tolist()):
            where = starts[b] == w
            assert bool(masked[b][where].all()), "a word was masked in part"
            multi += int(where.sum()) > 1
    assert multi > 0                                                               # words of several characters
    # fit_to_corpus with init: steps and batch for the store, never another model or the from-scratch lr
    cpu = pt.PretrainConfig.for_scale("cpu", init=str(init), corpus=str(corpus_file))
    assert pt.store_dir(cpu) == corpus.store                                       # the same store, any scale
    import shutil

    from transformers import AutoModelForMaskedLM

    copy = shutil.copytree(init, tmp_path / "bbc-fp16-copy")   # byte-identical tokenizer files, another folder,
    AutoModelForMaskedLM.from_pretrained(str(init)).half().save_pretrained(copy)   # and fp16 weights
    assert json.loads((copy / "config.json").read_text())["dtype"] == "float16"
    assert pt.store_dir(_cfg(copy, corpus=str(corpus_file))) == corpus.store      # no second store of the corpus
    stores = sorted(corpus.store.parent.iterdir())
    assert pt.data(_cfg(copy, corpus=str(corpus_file))).store == corpus.store
    assert sorted(corpus.store.parent.iterdir()) == stores                        # nothing prepared again
    other = shutil.copytree(init, tmp_path / "bbc-more")
    with open(other / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("新词\n")                                                          # another vocabulary
    assert pt.store_dir(_cfg(other, corpus=str(corpus_file))) not in (corpus.store, None)
    sized, plan = pt.size(cpu, corpus, device="cpu")
    assert sized.model == cpu.model and sized.lr == 5e-5 and sized.warmup_ratio == cpu.warmup_ratio
    assert sized.max_steps == plan["max_steps"] and sized.batch_size == plan["batch_size"]
    assert any("init fixes the model" in r for r in plan["reasons"])
    assert any(f"training steps of {init.name}" in r for r in plan["reasons"])    # init's own speed timed


def test_hub_name_offline_without_cache_is_one_clear_error(tmp_path, monkeypatch, runs_tmp):
    import huggingface_hub.constants as hc

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    cfg = pt.PretrainConfig.for_scale("smoke", init="bert-base-chinese")
    with pytest.raises(ConfigError) as err:
        pt.data(cfg)
    text = str(err.value)
    assert "HF_HUB_OFFLINE=1" in text and str(tmp_path / "empty-cache") in text and "HF_HOME" in text
    assert "hf download bert-base-chinese --local-dir DIR" in text and "init=DIR" in text
    with pytest.raises(ConfigError, match="HF_HUB_OFFLINE=1"):
        ft.tokenizer(ft.FinetuneConfig.for_scale("smoke", init="bert-base-chinese"))


def test_hub_name_from_a_filled_cache(standins, tmp_path, monkeypatch):
    import shutil

    import huggingface_hub.constants as hc

    from nbkit.models.loading import resolve_checkpoint

    cache = tmp_path / "hub"
    repo = cache / "models--bert-base-chinese"
    commit = "0" * 40
    shutil.copytree(standins["bbc"], repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(cache))
    assert resolve_checkpoint("bert-base-chinese") == repo / "snapshots" / commit
    cfg = pt.PretrainConfig.for_scale("smoke", init="bert-base-chinese")
    assert pt.init_checkpoint(cfg) == repo / "snapshots" / commit
    assert pt.model(cfg, pt.tokenizer(cfg, pt.PretrainCorpus())).config.vocab_size == 21128
    assert "from-bert-base-chinese-" in cfg.run_dir().name


def test_mismatches_are_named_before_any_work(standins, tmp_path, runs_tmp):
    from nbkit.corpus import prepare_corpus
    from nbkit.text.tokenizer import train_wordpiece

    init = standins["bbc"]
    corpus_file = tmp_path / "c.txt"
    corpus_file.write_text("\n".join(texts(200)) + "\n", encoding="utf-8")
    cfg = _cfg(init, block_size=600, corpus=str(corpus_file))
    with pytest.raises(ConfigError, match=r"block_size=600 exceeds the position table .*max_position_embeddings=512"):
        pt.data(cfg)
    assert not (runs_tmp / "corpus").exists()                                     # nothing prepared
    # a store prepared with another tokenizer
    other = train_wordpiece(texts(200), vocab_size=800, out_dir=tmp_path / "tok", model_max_length=128)
    store = tmp_path / "store"
    prepare_corpus([str(corpus_file)], store, tokenizer=str(tmp_path / "tok"), num_workers=1, progress=False)
    with pytest.raises(ConfigError, match=rf"store vs init: {len(other)} vs 21128 tokens"):
        pt.data(_cfg(init, corpus=str(store)))
    # a checkpoint whose tokenizer has more tokens than its embedding table
    broken = tmp_path / "broken"
    import shutil

    shutil.copytree(init, broken)
    conf = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**conf, "vocab_size": 8000}))
    with pytest.raises(ConfigError, match=r"tokenizer has 21128 tokens but the model's embedding table has 8000"):
        pt.data(_cfg(broken))
    with pytest.raises(ConfigError, match="BERT-architecture"):
        (broken / "config.json").write_text(json.dumps({**conf, "model_type": "electra"}))
        pt.data(_cfg(broken))


def _permuted(tok, out: Path):
    """``tok``'s tokens with the ids of the non-special ones shuffled: same size, other meaning."""
    import random

    from transformers import BertTokenizer

    vocab = tok.get_vocab()
    special = set(tok.all_special_tokens)
    plain = [t for t in sorted(vocab, key=vocab.get) if t not in special]
    ids = [vocab[t] for t in plain]
    random.Random(0).shuffle(ids)
    return BertTokenizer(vocab={**{t: vocab[t] for t in special}, **dict(zip(plain, ids))}, do_lower_case=False)


def test_resume_on_another_tokenizer_is_refused(tmp_path, runs_tmp):
    from _corpus import char_tokenizer

    from nbkit.train import Loop, TrainConfig

    tok = char_tokenizer(n_lines=100)
    other = _permuted(tok, tmp_path)
    assert len(other) == len(tok) and other.get_vocab() != tok.get_vocab()
    cfg = pt.PretrainConfig.for_scale("smoke", model="tiny", max_steps=2, eval_every=2, checkpoint_every=2,
                                      max_train=200, corpus_lines=100,
                                      allow_unk=True)   # 100 lines' characters read ~10 % of the mix as [UNK]
    out = tmp_path / "mlm"
    pt.run_pretraining(cfg, out, tokenizer=tok)
    with pytest.raises(CheckpointError, match=r"tokenizer: checkpoint [0-9a-f]{64} vs this run [0-9a-f]{64}.*resume=False"):
        pt.run_pretraining(cfg.replace(max_steps=4), out, tokenizer=other)
    state = torch.load(next((out / "checkpoints").glob("step-*")) / "trainer_state.pt", weights_only=False)
    assert state["config"]["identity"] == {**pt.tokenizer_identity(tok), "block_size": cfg.block_size, "lora": None}
    pt.run_pretraining(cfg.replace(max_steps=3), out, tokenizer=tok)               # its own tokenizer resumes
    # fine-tuning: the same mechanism
    fcfg = ft.FinetuneConfig.for_scale("smoke", init="random", model="tiny", max_train=64, max_steps=2,
                                       checkpoint_every=1, eval_every=0)
    labeled = ft.data(fcfg)
    fout = tmp_path / "ft"
    for t, ok in ((tok, True), (other, False)):
        encoded, _ = ft.encode(fcfg, t, labeled)
        clf, _ = ft.model(fcfg, t, labeled)
        if ok:
            ft.train(fcfg, clf, t, encoded, fout)
        else:
            with pytest.raises(CheckpointError, match="tokenizer: checkpoint"):
                ft.train(fcfg.replace(max_steps=3), clf, t, encoded, fout)
    loop = Loop(clf, TrainConfig(max_steps=1, batch_size=2, identity=None), encoded["train"])   # no identity: none
    assert loop.config.identity is None


def test_pooling_per_encoder_and_a_plain_cls_export(standins, tmp_path, runs_tmp):
    from transformers import BertForSequenceClassification, pipeline

    from nbkit.models.bert import choose_pooling
    from nbkit.models.pooling import MeanPoolBertForSequenceClassification

    assert choose_pooling(standins["bbc"])[0] == "cls"
    assert choose_pooling(standins["ckip"]) == ("mean", choose_pooling(standins["ckip"])[1])
    assert "no pooler weights" in choose_pooling(standins["ckip"])[1]
    assert choose_pooling(None)[0] == "mean"
    cfg = _cfg(standins["bbc"])
    tok = pt.tokenizer(cfg, pt.PretrainCorpus())
    bert = pt.model(cfg, tok)
    bert.save_pretrained(tmp_path / "continued")
    tok.save_pretrained(tmp_path / "continued")
    assert choose_pooling(tmp_path / "continued") == ("mean", "pretrained by nbkit's MLM-only recipe: its [CLS] "
                                                              "pooler was never trained")
    fcfg = ft.FinetuneConfig.for_scale("smoke", init=str(standins["bbc"]), max_train=64, max_steps=2,
                                       eval_every=0, checkpoint_every=0)
    assert fcfg.pooling is None
    labeled = ft.data(fcfg)
    clf, how = ft.model(fcfg, ft.tokenizer(fcfg), labeled)
    assert type(clf) is BertForSequenceClassification and "cls pooling: the checkpoint carries a trained" in how
    assert torch.equal(clf.bert.pooler.dense.weight, BertForSequenceClassification.from_pretrained(
        str(standins["bbc"])).bert.pooler.dense.weight)                           # the published pooler, kept
    export = ft.export(fcfg, clf, ft.tokenizer(fcfg), labeled, tmp_path / "export")
    clf_pipe = pipeline("text-classification", model=str(export))                 # no trust_remote_code
    assert type(clf_pipe.model) is BertForSequenceClassification
    assert clf_pipe("质量很好")[0]["label"] in labeled.id2label.values()
    mean, how = ft.model(ft.FinetuneConfig.for_scale("smoke", init=str(tmp_path / "continued"), max_train=64),
                         tok, labeled)
    assert isinstance(mean, MeanPoolBertForSequenceClassification) and "nbkit's MLM-only recipe" in how


def test_defaults_switch_with_init_and_the_table_says_so(standins, tmp_path):
    plain, cont = pt.PretrainConfig.for_scale("cpu"), pt.PretrainConfig.for_scale("cpu", init=str(standins["bbc"]))
    assert plain.lr == 1e-3 and cont.lr == 5e-5 and cont.block_size == 128 and cont.batch_size < plain.batch_size
    table = cont.table()
    assert table.loc["lr", "from"].startswith("init: 5e-5") and "Cui et al. 2020" in table.loc["lr", "from"]
    assert table.loc["max_steps", "from"].startswith("scale cpu, init:")
    assert "unused: init is set" in table.loc["model", "from"]
    assert cont.overrides() == {} and cont.replace(lr=1e-4).overrides() == {"lr": 1e-4}
    assert "-from-bert-base-chinese-" in cont.run_dir().name and "-from-" not in plain.run_dir().name
    # fine-tuning a BERT-base-sized encoder: its authors' rate (only config.json is read)
    base = tmp_path / "base-sized"
    base.mkdir()
    (base / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 768}))
    f = ft.FinetuneConfig.for_scale("cpu", init=str(base))
    assert f.lr == 2e-5 and f.table().loc["lr", "from"].startswith("init: 2e-5")
    assert ft.FinetuneConfig.for_scale("cpu", init=str(standins["bbc"])).lr == 5e-4   # hidden 32: the scale's


def test_continued_model_loads_in_plain_transformers(standins, tmp_path, runs_tmp):
    from transformers import AutoModelForMaskedLM, AutoTokenizer, pipeline

    cfg = _cfg(standins["ckip"], max_steps=2, eval_every=2, max_train=100, corpus_lines=100)
    metrics = pt.run_pretraining(cfg, tmp_path / "run")
    model_dir = Path(metrics["model_dir"])
    assert metrics["init"] == str(standins["ckip"]) and metrics["steps"] == 2
    assert type(AutoModelForMaskedLM.from_pretrained(str(model_dir))).__name__ == "BertForMaskedLM"
    filled = pipeline("fill-mask", model=str(model_dir))("今天天气很[MASK]。")
    assert len(filled) == 5
    sample = texts(10)
    theirs, back = AutoTokenizer.from_pretrained(str(standins["ckip"])), AutoTokenizer.from_pretrained(str(model_dir))
    assert [back(t)["input_ids"] for t in sample] == [theirs(t)["input_ids"] for t in sample]


def test_the_jobs_take_init_as_a_flag(standins, runs_tmp):
    from nbkit.jobs import finetune, pretrain

    cfg, out = pretrain.config(pretrain.parser().parse_args(["--scale", "cpu", "--init", str(standins["bbc"])]))
    assert cfg.init == str(standins["bbc"]) and cfg.lr == 5e-5 and "-from-bert-base-chinese-" in out.name
    fcfg, _ = finetune.config(finetune.parser().parse_args(["--scale", "cpu", "--init", str(standins["bbc"])]))
    assert fcfg.init == str(standins["bbc"]) and fcfg.pooling is None


# ----- issue 39: checkpoints as published uploads come (fp16 weights, no model_type, half-downloaded caches) -----
def _copy_with_config(src: Path, dst: Path, drop=(), **changes) -> Path:
    import shutil

    shutil.copytree(src, dst)
    conf = {k: v for k, v in json.loads((dst / "config.json").read_text()).items() if k not in drop}
    (dst / "config.json").write_text(json.dumps({**conf, **changes}))
    return dst


def _saved_in(dtype, standin: Path, out: Path) -> Path:
    """The stand-in re-saved as a half-precision upload: weights stored in ``dtype``, its tokenizer files beside."""
    import shutil

    from transformers import BertForMaskedLM

    BertForMaskedLM.from_pretrained(str(standin)).to(dtype).save_pretrained(out)
    for f in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(standin / f, out / f)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_a_half_precision_checkpoint_trains_in_fp32_master_weights(standins, tmp_path, runs_tmp, dtype, capsys):
    from safetensors import safe_open

    from nbkit.models.loading import stored_dtype

    init = _saved_in(dtype, standins["bbc"], tmp_path / "half")
    with safe_open(str(init / "model.safetensors"), "pt") as f:
        assert f.get_tensor("bert.embeddings.word_embeddings.weight").dtype == dtype    # stored as published
    name = str(dtype).removeprefix("torch.")
    assert stored_dtype(init) == name and stored_dtype(standins["ckip"]) == "float32"     # .bin read too
    cfg = _cfg(init, max_steps=3, eval_every=3, max_train=100, corpus_lines=100)
    bert = pt.model(cfg, pt.tokenizer(cfg, pt.PretrainCorpus()))
    assert {p.dtype for p in bert.parameters()} == {torch.float32}
    assert f"stored in {name}, loaded as float32 master weights" in capsys.readouterr().out   # said in one line
    metrics = pt.run_pretraining(cfg, tmp_path / "run")
    losses = [h["loss"] for h in metrics["history"] if "loss" in h]
    assert len(losses) == 3 and all(map(math.isfinite, losses)) and math.isfinite(metrics["eval_loss"])
    from transformers import AutoModelForMaskedLM

    saved = AutoModelForMaskedLM.from_pretrained(metrics["model_dir"], dtype="auto")
    assert {p.dtype for p in saved.parameters()} == {torch.float32}
    assert all(torch.isfinite(p).all() for p in saved.parameters())
    # fine-tuning loads it the same way, and says so
    fcfg = ft.FinetuneConfig.for_scale("smoke", init=str(init), max_train=64)
    clf, how = ft.model(fcfg, ft.tokenizer(fcfg), ft.data(fcfg))
    assert {p.dtype for p in clf.parameters()} == {torch.float32} and f"weights stored in {name}" in how


@pytest.mark.parametrize("layout", ["bbc", "ckip"])
def test_a_config_without_model_type_loads_from_its_architectures(standins, tmp_path, layout):
    """Older uploads have only `architectures`: pretraining refused them ("a None model") while fine-tuning loaded."""
    init = _copy_with_config(standins[layout], tmp_path / "old", drop=("model_type",))
    cfg = _cfg(init)
    assert pt.init_checkpoint(cfg) == init
    bert = pt.model(cfg, pt.tokenizer(cfg, pt.PretrainCorpus()))
    ref = pt.model(_cfg(standins[layout]), pt.tokenizer(cfg, pt.PretrainCorpus()))
    assert all(torch.equal(a, b) for a, b in zip(bert.state_dict().values(), ref.state_dict().values()))
    fcfg = ft.FinetuneConfig.for_scale("smoke", init=str(init), max_train=64)
    clf, how = ft.model(fcfg, ft.tokenizer(fcfg), ft.data(fcfg))
    assert "loaded encoder from local checkpoint" in how
    for arch in (["BertModel"], ["BertForPreTraining"], ["BertForSequenceClassification"]):
        from nbkit.models.loading import checkpoint_model_type

        assert checkpoint_model_type({"architectures": arch}) == "bert"
    assert checkpoint_model_type({"architectures": ["XLMRobertaForMaskedLM"]}) == "xlm-roberta"
    assert checkpoint_model_type({"architectures": ["GPT2LMHeadModel"]}) == "gpt2"


_TWO = __import__("types").SimpleNamespace(num_labels=2, id2label={0: "neg", 1: "pos"})   # labels, no data


@pytest.mark.parametrize("changes", [{}, {"architectures": ["MyOwnModelForMaskedLM"]}], ids=["nothing", "unknown"])
def test_a_config_naming_no_model_gets_one_answer_from_both_recipes(standins, tmp_path, changes):
    init = _copy_with_config(standins["bbc"], tmp_path / "anon", drop=("model_type", "architectures"), **changes)
    answers = []
    for call in (lambda: pt.data(_cfg(init)), lambda: pt.model(_cfg(init), None),
                 lambda: ft.model(ft.FinetuneConfig.for_scale("smoke", init=str(init), max_train=64), None, _TWO)):
        with pytest.raises(CheckpointError) as err:
            call()
        answers.append(str(err.value).split(": ", 1)[1])
    assert len(set(answers)) == 1, answers                              # the same words, whichever recipe asks
    assert f"{init / 'config.json'} has no model_type" in answers[0] and '"model_type": "bert"' in answers[0]
    other = _copy_with_config(standins["bbc"], tmp_path / "electra", drop=("model_type",),
                              architectures=["ElectraForMaskedLM"])
    with pytest.raises(ConfigError, match="is a 'electra' model; init takes a BERT"):
        pt.data(_cfg(other))
    # fine-tuning takes ELECTRA encoders (issue 52, item 15), but these are BERT's weights under an ELECTRA name
    with pytest.raises(CheckpointError, match="lacks .* weights of the 'electra' encoder ElectraForSequenceClass"):
        ft.model(ft.FinetuneConfig.for_scale("smoke", init=str(other), max_train=64), None, _TWO)


def _hf_cache(tmp_path, monkeypatch, name: str) -> Path:
    """An empty Hugging Face cache under a tmp HF_HOME, offline; returns the snapshot folder of ``name``
    (``hub/models--org--name/snapshots/<hash>``, ``refs/main`` naming it), created empty."""
    import huggingface_hub.constants as hc

    home = tmp_path / "hf-home"
    cache = home / "hub"
    repo = cache / ("models--" + name.replace("/", "--"))
    commit = "a" * 40
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    for var, value in (("HF_HOME", home), ("HF_HUB_CACHE", cache), ("HF_HUB_OFFLINE", "1")):
        monkeypatch.setenv(var, str(value))
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(cache))
    return snapshot


def test_a_cache_snapshot_without_weights_names_the_files_and_the_download(standins, tmp_path, monkeypatch, runs_tmp):
    """An interrupted download: config.json and vocab.txt cached, no weights; transformers' raw OSError before."""
    import shutil

    name = "hfl/chinese-roberta-wwm-ext"
    snapshot = _hf_cache(tmp_path, monkeypatch, name)
    for f in ("config.json", "vocab.txt"):
        shutil.copy(standins["bbc"] / f, snapshot / f)
    calls = {"pretraining data": lambda: pt.data(pt.PretrainConfig.for_scale("smoke", init=name)),
             "pretraining model": lambda: pt.model(pt.PretrainConfig.for_scale("smoke", init=name), None),
             "fine-tuning": lambda: ft.model(ft.FinetuneConfig.for_scale("smoke", init=name), None, _TWO)}
    for what, call in calls.items():
        with pytest.raises(CheckpointError) as err:
            call()
        text = str(err.value)
        assert f"snapshot {snapshot} is incomplete" in text, what
        assert "no weights file (model.safetensors or pytorch_model.bin)" in text and "config.json, vocab.txt" in text
        assert f"`hf download {name}`" in text and f"`hf download {name} --local-dir DIR`" in text
    # a sharded upload with a shard missing: the shard is named
    (snapshot / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    (snapshot / "model-00001-of-00002.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"1 of the 2 shards its model.safetensors.index.json names are "
                                              r"missing: model-00002-of-00002.safetensors"):
        pt.data(pt.PretrainConfig.for_scale("smoke", init=name))
    # a local folder without weights: the same kind of answer
    local = tmp_path / "local"
    local.mkdir()
    shutil.copy(standins["bbc"] / "config.json", local / "config.json")
    with pytest.raises(CheckpointError, match=r"has config.json but no weights file \(model.safetensors or "
                                              r"pytorch_model.bin\) \(it holds: config.json\)"):
        pt.data(_cfg(local))
