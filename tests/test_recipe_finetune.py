"""The fine-tuning recipe (nbkit.recipes.finetuning): defaults per scale, overrides, each stage at smoke, the job."""
import dataclasses
import json
import re

import pytest

from nbkit.errors import ConfigError
from nbkit.recipes.finetuning import FinetuneConfig


@pytest.mark.parametrize("name", ["smoke", "cpu", "gpu"])
@pytest.mark.parametrize("task", ["reviews", "news"])
def test_defaults_per_task(name, task):
    cfg = FinetuneConfig.for_scale(name, task=task)
    assert cfg.task == task and cfg.class_weights == (None if task == "reviews" else "balanced")
    assert cfg.overrides() == {} and cfg.run_tag() == ""


def test_cpu_recipe_is_the_one_notebook_03_used():
    """The cpu numbers must not move: the values the notebook's finetune_config used before the recipe."""
    cfg = FinetuneConfig.for_scale("cpu")
    assert (cfg.model, cfg.max_length, cfg.batch_size, cfg.epochs, cfg.lr, cfg.pooling, cfg.seed, cfg.max_train) == \
        ("narrow", 64, 32, 2.0, 5e-4, None, 0, None)
    from nbkit.models.bert import choose_pooling

    assert choose_pooling(None)[0] == "mean"     # pooling None chooses per encoder: mean from random weights
    assert (cfg.warmup_ratio, cfg.scheduler, cfg.weight_decay, cfg.keep_last, cfg.group_by_length) == \
        (0.1, "linear", 0.01, 1, True)
    from nbkit.recipes.finetuning import train_config

    t = train_config(cfg, n_train=13_000, out_dir="x")
    assert (t.max_steps, t.eval_every, t.checkpoint_every, t.log_every) == (813, 203, 406, 10)
    assert train_config(cfg, 13_000).checkpoint_every is None        # no output dir: no checkpoints
    assert train_config(cfg.replace(eval_every=0), 13_000).eval_every is None


def test_overrides_win_none_keeps_and_all_means_everything():
    cfg = FinetuneConfig.for_scale("smoke", lr=1e-2, seed=None, max_train="all", epochs=3)
    assert cfg.lr == 1e-2 and cfg.seed == 0 and cfg.max_train is None and cfg.epochs == 3
    assert cfg.overrides() == {"lr": 1e-2, "max_train": None, "epochs": 3}
    assert cfg.run_tag() == "-epochs3-lr0.01-max_trainall"
    table = cfg.table()
    assert table.loc["lr", "from"] == "override" and table.loc["max_length", "from"] == "scale smoke"
    assert table.loc["warmup_ratio", "from"].startswith("recipe: 10 %") and len(table) == len(dataclasses.fields(cfg))
    assert re.search(r"\n  lr +  = 0\.01,\n", repr(cfg))   # one field a line, aligned


def test_unknown_field_and_task_are_config_errors_naming_the_valid_ones():
    with pytest.raises(ConfigError, match=r"learning_rate: not a FinetuneConfig field; the fields are .*\blr\b"):
        FinetuneConfig.for_scale("smoke", learning_rate=1e-3)
    with pytest.raises(ConfigError, match="reviews, news, own"):
        FinetuneConfig.for_scale("smoke", task="weather")


@pytest.mark.filterwarnings("ignore:class .* has recall 0", "ignore:degenerate classifier")
def test_each_stage_at_smoke_then_export_loads(tiny_task, tmp_path):
    from nbkit.recipes import finetuning as ft

    labeled, tok = tiny_task
    cfg = FinetuneConfig.for_scale("smoke", max_length=8, batch_size=8, max_steps=4, progress=False, init="random")
    encoded, trunc = ft.encode(cfg, tok, labeled)
    assert set(encoded) == {"train", "validation", "test"} and max(map(len, encoded["train"]["input_ids"])) <= 8
    assert 0 < trunc["train"]["truncated_fraction"] <= 1
    clf, how = ft.model(cfg, tok, labeled)
    assert "from scratch" in how and clf.config.num_labels == 3
    assert getattr(clf.config, "classifier_pooling", None) == "mean"
    loop, result = ft.train(cfg, clf, tok, encoded, tmp_path / "run")
    assert loop.state.step == 4 and result.metrics["finetune_s"] > 0
    assert (tmp_path / "run" / "checkpoints").is_dir()               # every 2 steps
    scores = ft.evaluate(cfg, loop.model, tok, labeled)
    n_test = len(labeled.splits["test"])
    assert scores["report"]["n"] == n_test and len(scores["test_pred"]) == n_test
    assert scores["baseline_report"]["n"] == scores["baseline_cut_report"]["n"] == n_test
    assert len(scores["table"]) == 3
    summary = ft.save(cfg, tmp_path / "run", loop, result, labeled, trunc, scores, how)
    on_disk = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert on_disk["config"]["max_length"] == 8 and on_disk["test_accuracy"] == summary["test_accuracy"]
    assert on_disk["baseline_cut_accuracy"] == scores["baseline_cut_report"]["accuracy"]
    out = ft.export(cfg, loop.model, tok, labeled, tmp_path / "model")
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(out).model_max_length == 8


@pytest.mark.filterwarnings("ignore:class .* has recall 0", "ignore:degenerate classifier")
def test_run_finetuning_same_seed_same_result_and_starts_from_a_checkpoint(tiny_task, tmp_path):
    from nbkit.recipes import finetuning as ft

    labeled, tok = tiny_task
    cfg = FinetuneConfig.for_scale("smoke", task="own", max_length=16, batch_size=8, max_steps=3, progress=False,
                                   checkpoint_every=0, eval_every=0, init="random")
    a = ft.run_finetuning(cfg, tmp_path / "a", labeled=labeled, tokenizer=tok, export_model=True)
    b = ft.run_finetuning(cfg, tmp_path / "b", labeled=labeled, tokenizer=tok)
    assert a["train"]["train_loss"] == b["train"]["train_loss"] and a["test_accuracy"] == b["test_accuracy"]
    assert (tmp_path / "a" / "model" / "config.json").is_file()
    c = ft.run_finetuning(cfg.replace(init=str(tmp_path / "a" / "model")), tmp_path / "c", labeled=labeled,
                          tokenizer=tok)
    assert "loaded" in c["init"] and json.loads((tmp_path / "c" / "metrics.json").read_text())["task"] == "own"


@pytest.mark.filterwarnings("ignore:class .* has recall 0", "ignore:degenerate classifier")
def test_job_is_a_thin_wrapper_that_runs_at_smoke(tiny_task, tmp_path, monkeypatch):
    """`python -m nbkit.jobs.finetune --scale smoke ...` runs the recipe with its flags as overrides."""
    from nbkit.jobs import finetune as job
    from nbkit.recipes import finetuning as ft
    from nbkit.recipes import tokenizer as tk

    labeled, tok = tiny_task
    monkeypatch.setattr(ft, "data", lambda cfg: labeled)
    monkeypatch.setattr(tk, "load", lambda scale: tok)
    monkeypatch.setattr(ft, "default_encoder", lambda scale: None)
    assert job.main(["--scale", "smoke", "--output-dir", str(tmp_path), "--max-steps", "2", "--batch-size", "4",
                     "--lr", "0.003", "--grad-accum-steps", "1", "--resume", "none"]) == 0
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["config"]["lr"] == 0.003 and m["config"]["batch_size"] == 4 and m["train"]["steps"] == 2
    assert m["config"]["resume"] is False and m["config"]["max_length"] == FinetuneConfig.for_scale("smoke").max_length


@pytest.mark.filterwarnings("ignore:class .* has recall 0", "ignore:degenerate classifier")
def test_a_run_never_resumes_checkpoints_that_began_from_another_encoder(tiny_task, tmp_path, monkeypatch):
    """A fresh user's case: notebook 03 with `pretrained` wrote to the preset's folder, resumed its finished
    checkpoint ("nothing to train") and reported that run's accuracy as the new encoder's."""
    from nbkit.recipes import finetuning as ft

    labeled, tok = tiny_task
    cfg = FinetuneConfig.for_scale("smoke", max_length=16, batch_size=8, max_steps=2, progress=False,
                                   checkpoint_every=1, eval_every=0)
    run = tmp_path / "run"
    ft.run_finetuning(cfg.replace(init="random"), run, labeled=labeled, tokenizer=tok, export_model=True)
    enc = tmp_path / "enc" / "model"
    enc.parent.mkdir()
    import shutil

    shutil.copytree(run / "model", enc)
    mine = cfg.replace(init=str(enc))
    with pytest.raises(ConfigError, match=r"trained from .*'random'.* this run starts from .*resume=False"):
        ft.model(mine, tok, labeled, out_dir=run)
    ft.model(mine.replace(resume=False), tok, labeled, out_dir=run)    # train anew: allowed
    ft.model(mine, tok, labeled, out_dir=run)                          # same encoder: resumes
    weights = next(enc.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes() + b"\0")                  # same path, new content
    with pytest.raises(ConfigError, match="trained from"):
        ft.model(mine, tok, labeled, out_dir=run)
    monkeypatch.setenv("NBKIT_RUNS_DIR", str(tmp_path / "runs"))
    preset = FinetuneConfig.for_scale("smoke")
    plain, mine, other = (preset.run_dir(), preset.replace(init=str(enc)).run_dir(),
                          preset.replace(init=str(tmp_path / "x" / "model")).run_dir())
    assert plain.name == "sentiment" and mine.name.startswith("sentiment-from-enc-") and len({plain, mine, other}) == 3
    assert preset.replace(init=str(enc) + "/").run_dir() == mine
    assert preset.replace(seed=3, init=str(enc)).run_dir().name.startswith("sentiment-seed3-from-enc-")
    assert preset.replace(init="random").run_dir().name == "sentiment-random"


def test_epochs_count_global_batches_under_torchrun(tiny_task, tmp_path, monkeypatch):
    """Each rank reads 1/world_size of an epoch, so ``epochs`` passes take 1/world_size of the steps."""
    from nbkit.recipes import finetuning as ft
    from nbkit.train.ddp import group

    cfg = FinetuneConfig.for_scale("smoke", max_length=8, batch_size=8, epochs=2, max_steps=None, progress=False)
    assert ft.train_config(cfg, 100).max_steps == 25                      # ceil(100 * 2 / 8)
    assert ft.train_config(cfg, 100, world_size=2).max_steps == 13        # ceil(100 * 2 / 16)
    assert ft.train_config(cfg.replace(grad_accum_steps=2), 100, world_size=4).max_steps == 4
    labeled, tok = tiny_task
    encoded, _ = ft.encode(cfg, tok, labeled)
    n = len(encoded["train"])
    clf, _ = ft.model(cfg.replace(init="random"), tok, labeled)
    monkeypatch.setattr(group, "launch_world_size", lambda env=None: 3)   # what torchrun would give
    loop, _ = ft.train(cfg.replace(eval_every=0), clf, tok, encoded)
    assert loop.config.max_steps == -(-n * 2 // (8 * 3))


def test_the_finetune_job_names_notebook_03s_folder_for_the_same_settings(tmp_path, monkeypatch):
    """Overrides and the encoder name the job's folder as they name notebook 03's (cfg.run_dir), so a job with
    another lr, or from another encoder, never resumes or overwrites the plain run."""
    from nbkit.jobs import finetune as job

    monkeypatch.setenv("NBKIT_RUNS_DIR", str(tmp_path / "runs"))
    enc = tmp_path / "mlm-wiki" / "model"
    enc.mkdir(parents=True)
    for flags, kw in (([], {}), (["--lr", "0.002", "--seed", "3"], {"lr": 0.002, "seed": 3}),
                      (["--init", str(enc)], {"init": str(enc)})):
        _, out = job.config(job.parser().parse_args(["--scale", "smoke", *flags]))
        assert out == FinetuneConfig.for_scale("smoke", **kw).run_dir()
    names = {job.config(job.parser().parse_args(["--scale", "smoke", *f]))[1].name
             for f in ([], ["--lr", "0.002"], ["--init", str(enc)])}
    assert len(names) == 3 and "sentiment" in names


def test_a_pretrained_encoder_brings_its_own_tokenizer(tiny_task, tmp_path, runs_tmp):
    """notebook 03 and the finetune job read text with the encoder's tokenizer (a store-trained model has
    its own vocabulary); without an encoder, notebook 01's."""
    from nbkit.models.bert import build_config
    from nbkit.recipes import finetuning as ft
    from nbkit.text.tokenizer_files import save_tokenizer

    _, tok = tiny_task
    save_tokenizer(tok, tmp_path / "mlm-own" / "model")
    build_config("tiny", len(tok)).save_pretrained(tmp_path / "mlm-own" / "model")   # a model folder's config
    cfg = FinetuneConfig.for_scale("smoke")
    own = ft.tokenizer(cfg.replace(init=str(tmp_path / "mlm-own" / "model")))
    assert own.get_vocab() == tok.get_vocab()
    assert ft.tokenizer(cfg.replace(init="random")).get_vocab() != tok.get_vocab()   # notebook 01's vocabulary


def test_skip_examples_is_a_field_a_job_flag_and_a_parameter_kept_out_of_the_run_folder():
    """Issue 52 item 4: TrainConfig(skip_examples) had no recipe field or job flag, so a notebook or job user could
    not get past the examples a non-finite loss names; and a setting in the folder's name would start a new run
    instead of resuming."""
    from nbkit.jobs import finetune as ft_job
    from nbkit.jobs import pretrain as pt_job
    from nbkit.recipes.finetuning import train_config
    from nbkit.recipes.pretraining import PretrainConfig
    from nbkit.recipes.pretraining import train_config as pt_train_config

    for job, cls in ((ft_job, FinetuneConfig), (pt_job, PretrainConfig)):
        plain, _ = job.config(job.parser().parse_args(["--scale", "smoke"]))
        cfg, out = job.config(job.parser().parse_args(["--scale", "smoke", "--skip-examples", "17", "5,9"]))
        assert cfg.skip_examples == (17, 5, 9) and "skip_examples" in cfg.given()
        assert out == plain.run_dir() and cfg.run_tag() == plain.run_tag() == ""      # the same folder: it resumes
        assert cls.for_scale("smoke", skip_examples="[5, 7]").skip_examples == (5, 7)  # papermill -p passes text
        with pytest.raises(ConfigError, match=r"skip_examples=.*'x' is not a whole number.*--skip-examples 5 17"):
            cls.for_scale("smoke", skip_examples=["5", "x"])
        with pytest.raises(ConfigError, match=r"-1 is not a whole number >= 0"):
            cls.for_scale("smoke", skip_examples=[-1])
    t = train_config(FinetuneConfig.for_scale("smoke", skip_examples=[9, 2]), 100, out_dir="x")
    assert t.skip_examples == (2, 9)
    p = PretrainConfig.for_scale("smoke", skip_examples=[4])
    assert pt_train_config(p, "x").skip_examples == (4,)


@pytest.mark.filterwarnings("ignore:class .* has recall 0", "ignore:degenerate classifier")
def test_a_non_finite_loss_names_the_file_and_line_of_your_examples_and_skip_examples_resumes_past_them(
        tmp_path, monkeypatch):
    """Issue 52 item 4: one bad row of the user's CSV (here: a character whose embedding output is NaN) stops every
    resume at the same step. The stop names each example of the step's batch by index and by file and line, and
    the way past it in the recipe's terms (parameter, job flag); the rerun with skip_examples writes to the same
    folder, resumes and trains to the end, counting what it left out."""
    import csv

    import torch

    from nbkit import text
    from nbkit.errors import NonFiniteLossError
    from nbkit.recipes import finetuning as ft

    monkeypatch.setenv("NBKIT_RUNS_DIR", str(tmp_path / "runs"))
    rows = [(f"{w}第{i}次", lab) for lab, w in (("好", "很好满意"), ("差", "太差失望")) for i in range(30)]
    rows.insert(37, ("太差☢失望", "差"))                                       # the bad row: file line 39
    path = tmp_path / "mine.csv"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows([("text", "label"), *rows])
    cfg = FinetuneConfig.for_scale("smoke", task="own", train_file=str(path), max_length=16, batch_size=4,
                                   max_steps=12, progress=False, checkpoint_every=1, eval_every=0, init="random",
                                   report_to="none", group_by_length=False, resume=True)
    labeled = ft.data(cfg)
    tok = text.train_wordpiece([t for t, _ in rows], vocab_size=50, out_dir=tmp_path / "tok", model_max_length=64)
    bad_id = tok.convert_tokens_to_ids("☢")
    assert bad_id != tok.unk_token_id
    bad = list(labeled.splits["train"]["text"]).index("太差☢失望")
    encoded, _ = ft.encode(cfg, tok, labeled)
    assert encoded["train"].describe_example(bad) == f"{path} line 39"

    def fit(c):
        clf, _ = ft.model(c, tok, labeled)
        clf.base_model.embeddings.word_embeddings.register_forward_hook(
            lambda mod, inp, out: out.masked_fill((inp[0] == bad_id).unsqueeze(-1), float("nan")))
        return ft.train(c, clf, tok, encoded, out_dir=c.run_dir())

    with pytest.raises(NonFiniteLossError) as err:
        fit(cfg)
    msg = str(err.value)
    assert f"{bad} ({path} line 39)" in msg, msg
    named = [int(i) for i in re.findall(r"(\d+) \(" + re.escape(str(path)) + r" line \d+\)", msg)]
    assert bad in named and len(named) == 4                                            # the step's batch of 4
    assert f"skip_examples={named}" in msg and f"--skip-examples {' '.join(map(str, named))}" in msg
    again = cfg.replace(skip_examples=[bad])
    assert again.run_dir() == cfg.run_dir()                                            # resumes the same run
    _, result = fit(again)
    assert result.metrics["steps"] == 12 and result.metrics["skip_examples"] == [bad]
    assert result.metrics["skipped_examples"] >= 1 and torch.isfinite(torch.tensor(result.metrics["train_loss"]))


@pytest.mark.filterwarnings("ignore:the trained vocabulary has")
def test_notebook_03_loads_notebook_02s_model_while_a_rerun_in_another_kernel_replaces_it(tmp_path, monkeypatch):
    """Issue 52 item 12: notebook 02 rerun in another kernel swaps runs/<scale>/mlm/model (atomic_dir: the old
    folder leaves the name, then the new one takes it). A notebook 03 reading it in that moment took the encoder
    for absent (random weights, without a word) or failed to load it. The writer here stops between its two
    renames until the reader's first try has failed (events, no timed waits); the reader then gets the new save
    whole: the tokenizer, and the classifier with the identity of the weights it loaded."""
    import os
    import threading
    from pathlib import Path

    import loop_helpers

    from nbkit import atomic, text
    from nbkit.models import loading
    from nbkit.recipes import finetuning as ft
    from nbkit.runs import step_path

    monkeypatch.setenv("NBKIT_RUNS_DIR", str(tmp_path / "runs"))
    tok = text.train_wordpiece([f"很好满意第{i}次太差失望" for i in range(20)], vocab_size=40,
                               out_dir=tmp_path / "tok", model_max_length=64)
    target = step_path("smoke", "mlm") / "model"

    def save(seed: int) -> None:                                # notebook 02's save: one swap of model/
        with atomic.atomic_dir(target) as tmp:
            loop_helpers.tiny_mlm(seed, vocab_size=len(tok)).save_pretrained(tmp)
            tok.save_pretrained(tmp)

    save(1)
    cfg = FinetuneConfig.for_scale("smoke", task="own", max_length=16, progress=False)
    assert ft.encoder(cfg) == target
    monkeypatch.setattr(ft, "id2label_of", lambda labeled: {0: "差", 1: "好"})
    labeled = type("Labeled", (), {"num_labels": 2})()
    window, tried = threading.Event(), threading.Event()
    real_rename, real_resolve = os.rename, loading.resolve_checkpoint

    def rename(src, dst):
        real_rename(src, dst)
        if Path(src) == target:                                 # the name is gone until the second rename
            window.set()
            assert tried.wait(60)

    def resolve(*args, **kw):                                   # both loads find the folder through it first
        try:
            return real_resolve(*args, **kw)
        except Exception:
            tried.set()                                         # the reader failed in the window: let it finish
            raise

    monkeypatch.setattr(loading, "resolve_checkpoint", resolve)
    for seed, stage in ((2, "tokenizer"), (3, "model")):
        window.clear(), tried.clear()
        monkeypatch.setattr(atomic.os, "rename", rename)
        writer = threading.Thread(target=save, args=(seed,), daemon=True)
        writer.start()
        assert window.wait(60)
        assert ft.encoder(cfg) == target                        # before: None, i.e. random weights
        if stage == "tokenizer":
            assert ft.tokenizer(cfg).get_vocab() == tok.get_vocab()
        else:
            (clf, how) = ft.model(cfg, tok, labeled, out_dir=tmp_path / "run")
            recorded = json.loads((tmp_path / "run" / "encoder.json").read_text())
            assert recorded["sha256"] == ft.encoder_identity(target, cfg)["sha256"]   # the weights it loaded
            import torch
            from transformers import AutoModelForMaskedLM

            saved = AutoModelForMaskedLM.from_pretrained(target).bert.embeddings.word_embeddings.weight
            assert torch.equal(clf.state_dict()["bert.embeddings.word_embeddings.weight"], saved)
        assert tried.is_set()                                   # the first try did fall in the window
        writer.join(60)
        monkeypatch.setattr(atomic.os, "rename", real_rename)
        assert not atomic.being_replaced(target)
