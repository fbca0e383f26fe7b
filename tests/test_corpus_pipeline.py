"""The pipeline side of the corpus store: run sizing, preparing-or-reusing a store, waiting ranks."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import peoples_daily  # noqa: E402
from _store import write_store  # noqa: E402

from nbkit.errors import DataError  # noqa: E402
from nbkit.recipes.sizing import MAX_PASSES, MIN_TOKENS, size_run  # noqa: E402


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    return write_store(tmp_path_factory.mktemp("store"), [list(w) for _, w in peoples_daily(60)])


def test_size_run_grows_the_model_with_the_corpus_and_reads_a_big_one_about_once():
    small, wiki = size_run(1_000_000, "cuda"), size_run(700_000_000, "cuda")
    assert small["model"] == "mini" and wiki["model"] == "small"      # 20 tokens per parameter: 35 M -> small
    assert small["train_tokens"] >= 0.99 * min(MIN_TOKENS, MAX_PASSES * 1_000_000)   # 40 passes win here
    assert small["passes"] <= MAX_PASSES and "40 passes" in small["reasons"][2]
    assert 0.9 < wiki["passes"] < 1.2                                  # one pass (within the 4 h budget)
    huge = size_run(5_000_000_000, "cuda")
    assert huge["model"] == "base" and huge["lr"] == 1e-4 and huge["warmup_ratio"] == 0.1
    assert huge["passes"] < 1 and huge["estimated_s"] <= 4 * 3600 + 60          # capped by the time budget
    assert all(isinstance(r, str) and r for r in huge["reasons"]) and len(huge["reasons"]) == 4


def test_size_run_under_torchrun_counts_every_process_in_a_step():
    one, two = size_run(1_000_000, "cuda"), size_run(1_000_000, "cuda", world_size=2)   # capped by passes
    assert two["train_tokens"] == pytest.approx(one["train_tokens"], rel=1e-3)            # same passes ...
    assert two["max_steps"] in (one["max_steps"] // 2, one["max_steps"] // 2 + 1)         # ... in half the steps
    assert "x 2 processes" in two["reasons"][2]
    big1, big4 = size_run(10**11, "cuda"), size_run(10**11, "cuda", world_size=4)  # 4 h-bound
    assert big4["train_tokens"] == pytest.approx(4 * big1["train_tokens"], rel=1e-3)
    assert big4["estimated_s"] == pytest.approx(big1["estimated_s"], rel=1e-3)
    speed = big1["tokens_per_s"]                  # the time-bound reason names all processes' speed once, not x 4
    assert f"what {4 * speed:,.0f} tokens/s ({speed:,.0f} per process x 4 processes) reads" in big4["reasons"][2]
    with pytest.raises(ValueError, match="world_size"):
        size_run(1000, "cpu", world_size=0)


def test_size_run_on_cpu_stays_narrow_and_inside_its_budget():
    plan = size_run(50_000_000, "cpu")
    assert plan["model"] in ("tiny", "narrow") and plan["batch_size"] == 64
    assert plan["estimated_s"] <= 15 * 60 + 30
    tiny_corpus = size_run(10_000, "cuda:0", block_size=64)
    assert tiny_corpus["passes"] <= MAX_PASSES + 1e-9 and "too small" in tiny_corpus["reasons"][0]
    capped = size_run(10_000, "cpu", block_size=64, max_passes=10)   # the run's own cap, stated in the plan
    assert capped["passes"] <= 10 + 1e-9 and capped["max_steps"] < tiny_corpus["max_steps"]
    assert "the run's max_passes" in capped["reasons"][2]
    assert size_run(10_000, "cpu", block_size=64, max_passes=100)["passes"] <= MAX_PASSES + 1e-9
    with pytest.raises(ValueError, match="max_passes"):
        size_run(1000, "cpu", max_passes=0)
    with pytest.raises(ValueError, match="device"):
        size_run(1000, "tpu")
    with pytest.raises(ValueError):
        size_run(0, "cpu")


def test_corpus_store_reads_a_prepared_directory_as_it_is(store_dir):
    from nbkit.corpus.store import corpus_store

    assert corpus_store(store_dir) == store_dir


def test_corpus_store_prepares_raw_input_into_the_runs_dir(tmp_path, monkeypatch, runs_tmp, store_dir):
    import shutil

    import nbkit.corpus
    from nbkit.corpus.store import corpus_store, store_dir_for

    calls = []

    def fake_prepare(inputs, out_dir, **settings):
        calls.append((inputs, Path(out_dir), settings))
        shutil.copytree(store_dir, out_dir, dirs_exist_ok=True)

    monkeypatch.setattr(nbkit.corpus, "prepare_corpus", fake_prepare, raising=False)
    got = corpus_store(str(tmp_path / "*.txt"), text_field="body")
    assert got == store_dir_for(str(tmp_path / "*.txt")) and got.is_relative_to(runs_tmp)
    assert calls == [(str(tmp_path / "*.txt"), got, {"text_field": "body"})]
    assert store_dir_for(["a.txt", "b.txt"]) != store_dir_for(["a.txt"])


def test_wait_for_store_returns_when_the_manifest_appears_and_times_out_clearly(tmp_path, store_dir):
    import shutil

    from nbkit.corpus.store import wait_for_store

    now = [0.0]
    target = tmp_path / "s"

    def sleep(s):                      # the "rank 0" finishes after three polls
        now[0] += s
        if now[0] >= 3:
            shutil.copytree(store_dir, target, dirs_exist_ok=True)

    manifest = wait_for_store(target, timeout_s=60, poll_s=1, clock=lambda: now[0], sleep=sleep)
    assert manifest["complete"] is True and now[0] == 3
    now[0] = 0.0
    with pytest.raises(DataError, match="waited 5 s .* shared filesystem"):
        wait_for_store(tmp_path / "never", timeout_s=5, poll_s=1, clock=lambda: now[0],
                       sleep=lambda s: now.__setitem__(0, now[0] + s))


def test_a_fresh_wait_passes_a_manifest_whose_input_changed_on_disk_until_rank_0_rewrites_it(tmp_path, store_dir):
    import shutil

    from nbkit import jsonio
    from nbkit.corpus.store import stale_sources, wait_for_store

    target = tmp_path / "s"
    shutil.copytree(store_dir, target)
    text = tmp_path / "input.txt"
    text.write_text("一段文字\n", encoding="utf-8")
    manifest = jsonio.loads_strict((target / "manifest.json").read_text(encoding="utf-8"))
    st = text.stat()
    src = {"path": str(text), "size_bytes": st.st_size, "mtime": st.st_mtime, "kind": "txt"}
    current = {**manifest, "sources": [src]}
    old = {**manifest, "sources": [{**src, "size_bytes": st.st_size - 1}]}     # prepared before an edit
    jsonio.write_json(target / "manifest.json", old)
    assert stale_sources(old) == [str(text)] and stale_sources(current) == []
    now = [0.0]

    def sleep(s):                      # rank 0 prepares the store again: its manifest is rewritten after 2 polls
        now[0] += s
        if now[0] >= 2:
            jsonio.write_json(target / "manifest.json", current)

    assert wait_for_store(target, poll_s=1, clock=lambda: now[0], sleep=sleep)["sources"] == old["sources"]   # plain
    assert wait_for_store(target, poll_s=1, clock=lambda: now[0], sleep=sleep, fresh=True)["sources"] == [src]
    assert now[0] == 2


def test_plateau_check_samples_a_store_instead_of_reading_it_all(store_dir):
    from transformers import AutoTokenizer

    from nbkit.corpus.dataset import StoreMLMDataset
    from nbkit.evaluate.probes import plateau_check, unigram_entropy

    ds = StoreMLMDataset(store_dir, 32)
    tok = AutoTokenizer.from_pretrained(store_dir / "tokenizer")
    check = plateau_check(3.0, ds, tok)
    full = unigram_entropy([ds[i]["input_ids"].numpy() for i in range(len(ds))], tok.all_special_ids)
    assert check.unigram_entropy == pytest.approx(full)         # a small store: the sample is all of it
    assert len(ds.sample_blocks(10)) == 10


def test_recipe_size_applies_the_plan_but_keeps_what_the_user_set(store_dir, monkeypatch, runs_tmp):
    from nbkit.recipes import pretraining as pt
    from nbkit.recipes import sizing

    real = sizing.size_run
    monkeypatch.setattr(sizing, "measure_speed", lambda *a, **k: {"tokens_per_s": 10_900.0, "how": "timed"})
    monkeypatch.setattr(sizing, "size_run", lambda n, device, **kw: real(700_000_000, device, **kw))  # a big corpus
    cfg, plan = pt.size(pt.PretrainConfig.for_scale("gpu", corpus=str(store_dir)), pt.PretrainCorpus(store=store_dir), "cuda")
    assert cfg.model == "small" and cfg.max_steps == plan["max_steps"] and plan["applied"] == "applied"
    assert cfg.warmup_ratio == plan["warmup_ratio"] and cfg.eval_every == plan["eval_every"]
    mine, plan = pt.size(pt.PretrainConfig.for_scale("gpu", lr=3e-4, corpus=str(store_dir)), pt.PretrainCorpus(store=store_dir), "cuda")
    assert mine.lr == 3e-4 and mine.model == "small" and "lr" in plan["applied"]
    monkeypatch.setattr(sizing, "size_run", real)
    few, plan = pt.size(pt.PretrainConfig.for_scale("cpu", corpus=str(store_dir), max_passes=2), pt.PretrainCorpus(store=store_dir), "cpu")
    assert plan["passes"] <= 2 + 1e-9 and few.max_steps == plan["max_steps"]    # the plan is what will run
    smoke = pt.PretrainConfig.for_scale("smoke", corpus=str(store_dir))
    assert pt.size(smoke, pt.PretrainCorpus(store=store_dir), "cuda")[0] == smoke
    assert pt.size(smoke.replace(fit_to_corpus=False, scale="gpu"), pt.PretrainCorpus(store=store_dir), "cuda")[1] is None
    assert pt.size(pt.PretrainConfig.for_scale("gpu"), pt.PretrainCorpus(splits={"train": []}), "cuda") == (pt.PretrainConfig.for_scale("gpu"), None)


def test_a_flag_or_parameter_equal_to_the_recipes_value_still_counts_as_set(store_dir, monkeypatch, runs_tmp):
    """`--batch-size 64` where 64 is the recipe's default: the plan used to replace it (here with 128) without a
    word, as it did `--max-steps` equal to the default."""
    from nbkit.jobs import pretrain as job
    from nbkit.recipes import pretraining as pt
    from nbkit.recipes import sizing

    real = sizing.size_run
    monkeypatch.setattr(sizing, "measure_speed", lambda *a, **k: {"tokens_per_s": 10_900.0, "how": "timed"})
    monkeypatch.setattr(sizing, "size_run", lambda n, device, **kw: real(700_000_000, device, **kw))  # a big corpus
    recipe, corpus = pt.PretrainConfig.for_scale("cpu"), pt.PretrainCorpus(store=store_dir)
    sized, plan = pt.size(pt.PretrainConfig.for_scale("cpu", corpus=str(store_dir)), corpus, "cuda")
    assert (sized.batch_size, sized.max_steps) != (recipe.batch_size, recipe.max_steps)   # the plan's, when not set
    cfg, _ = job.config(job.parser().parse_args(["--scale", "cpu", "--corpus", str(store_dir), "--batch-size",
                                                 str(recipe.batch_size), "--max-steps", str(recipe.max_steps)]))
    assert cfg.given() >= {"batch_size", "max_steps", "corpus"} and "batch_size" not in cfg.overrides()
    mine, plan = pt.size(cfg, corpus, "cuda")
    assert (mine.batch_size, mine.max_steps) == (recipe.batch_size, recipe.max_steps)
    assert plan["applied"] == "applied, except what you set: batch_size, max_steps"
    assert (plan["batch_size"], plan["max_steps"]) == (recipe.batch_size, recipe.max_steps)   # the plan is the run
    assert "model" not in mine.given() and mine.model == plan["model"]      # the plan's values are not yours
    as_notebook = pt.PretrainConfig.for_scale("cpu", corpus=str(store_dir), batch_size=recipe.batch_size,
                                              max_steps=None)          # a parameter left None is not set
    kept, plan = pt.size(as_notebook, corpus, "cuda")
    assert kept.batch_size == recipe.batch_size and plan["applied"] == "applied, except what you set: batch_size"


def test_pretrain_recipe_trains_from_a_store(store_dir, tmp_path, runs_tmp, capsys):
    """Notebook 02's and the job's code path with corpus=a tiny store: store tokenizer, store blocks, metrics;
    the corpus plan printed as the notebook prints it."""
    from nbkit.recipes.pretraining import PretrainConfig, run_pretraining

    cfg = PretrainConfig.for_scale("smoke", max_steps=2, corpus=str(store_dir), log_every=1, progress=False)
    metrics = run_pretraining(cfg, tmp_path / "mlm")
    out = capsys.readouterr().out
    assert "run sized for the corpus: " in out and "[not applied: the smoke scale keeps its CI sizes]" in out
    assert metrics["steps"] == 2 and metrics["eval_loss"] > 0 and metrics["block_size"] == 64
    assert not (runs_tmp / "smoke" / "tokenizer").exists()          # the store's tokenizer, not notebook 01's
    assert (tmp_path / "mlm" / "model" / "tokenizer.json").is_file()
    # a fresh user's crash: the store's tokenizer said 512 for a 64-position model, so truncation=True on a long
    # text overflowed the position table; the saved model's tokenizer now cuts at its positions
    import os

    from transformers import pipeline

    model = tmp_path / "mlm" / "model"
    positions = json.loads((model / "config.json").read_text())["max_position_embeddings"]
    assert json.loads((model / "tokenizer_config.json").read_text())["model_max_length"] == positions
    fill = pipeline("fill-mask", model=str(model), tokenizer=str(model))
    assert len(fill("很" + fill.tokenizer.mask_token + "好" * 300, tokenizer_kwargs={"truncation": True})) == 5
    from nbkit.atomic import current_umask

    assert os.stat(next(model.glob("*.safetensors"))).st_mode & 0o777 == 0o666 & ~current_umask()  # not 0600


def test_one_store_per_corpus_whatever_the_scale_or_how_the_paths_were_typed(tmp_path, monkeypatch, runs_tmp):
    from nbkit.corpus.store import is_prepared, store_dir_for

    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    relative = store_dir_for(["data/wiki.jsonl", "data/txt/"])
    absolute = store_dir_for([str(tmp_path / "data" / "wiki.jsonl"), str(tmp_path / "data" / "txt")])
    assert relative == absolute and relative.parent == runs_tmp / "corpus"
    assert store_dir_for(["data/wiki.jsonl"]) != relative
    assert not is_prepared(["data/wiki.jsonl", "data/txt/"]) and not is_prepared(None)   # a list of inputs: no raise
