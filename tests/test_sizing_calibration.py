"""The corpus-sized plan runs at the speed measured here: a few real training steps (``Loop.train_step``) of the
chosen model are timed before steps are chosen, so a slower machine (a slowed step) gets fewer steps; a resumed
run keeps its plan; smoke skips the timing and says so; a corpus far larger than the budget reads is named."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import peoples_daily  # noqa: E402
from _store import write_store  # noqa: E402

from nbkit.recipes import sizing  # noqa: E402


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    return write_store(tmp_path_factory.mktemp("store"), [list(w) for _, w in peoples_daily(60)])


def slowed(monkeypatch, seconds: float) -> list:
    """Make every ``Loop.train_step`` take ``seconds`` longer; returns the list of calls."""
    from nbkit.train.loop import Loop

    real, calls = Loop.train_step, []

    def slow(self, window, mark=None, votes=None):
        calls.append(len(window))
        time.sleep(seconds)
        return real(self, window, mark=mark, votes=votes)

    monkeypatch.setattr(Loop, "train_step", slow)
    return calls


@pytest.mark.slow
def test_measure_speed_times_the_loops_own_step_and_a_slower_step_gets_fewer_steps(monkeypatch):
    fast = sizing.measure_speed("tiny", 60, 32, 8, "cpu", steps=2, warmup=1)
    calls = slowed(monkeypatch, 1.5)
    slow = sizing.measure_speed("tiny", 60, 32, 8, "cpu", steps=2, warmup=1)
    assert len(calls) == 3, "warm-up + timed steps, each the loop's own train_step"
    assert slow["step_s"] >= 1.5 and slow["tokens_per_s"] == pytest.approx(8 * 32 / slow["step_s"], rel=0.05)
    assert slow["tokens_per_s"] < fast["tokens_per_s"]
    assert "measured here: 2 training steps of tiny at 8 x 32" in slow["how"]
    plans = [sizing.size_run(10**9, "cpu", block_size=32, budget_s=600, tokens_per_s=m["tokens_per_s"],
                             measured=m["how"]) for m in (fast, slow)]
    ratio = slow["tokens_per_s"] / fast["tokens_per_s"]
    assert plans[1]["max_steps"] == pytest.approx(plans[0]["max_steps"] * ratio, rel=0.01, abs=1)
    assert plans[1]["max_steps"] < plans[0]["max_steps"]
    assert any(slow["how"] in r and "recorded idle-machine speed is 10,900" in r for r in plans[1]["reasons"])


def test_size_times_the_planned_model_here_and_a_resumed_run_keeps_its_plan(store_dir, tmp_path, monkeypatch,
                                                                              runs_tmp):
    from nbkit.recipes import pretraining as pt

    big = write_store(tmp_path / "big", [list(w) for _, w in peoples_daily(2000)])   # 166 k tokens: 40 passes far off
    cfg = pt.PretrainConfig.for_scale("cpu", corpus=str(big), budget_minutes=0.3,    # 18 s: speed-bound
                                      eval_blocks=8)                                 # evaluations: a small share
    corpus = pt.PretrainCorpus(store=big)
    fast_cfg, fast = pt.size(cfg, corpus, "cpu", out_dir=tmp_path / "fast")
    calls = slowed(monkeypatch, 1.5)
    slow_cfg, slow = pt.size(cfg, corpus, "cpu", out_dir=tmp_path / "run")
    assert len(calls) == 3 and fast["speed_source"].startswith("measured here: 2 training steps of tiny at 64 x 64")
    assert all(any("tokens/s reads in 18 s" in r for r in plan["reasons"]) for plan in (fast, slow))  # speed-bound
    assert slow["tokens_per_s"] < fast["tokens_per_s"] and slow_cfg.max_steps < fast_cfg.max_steps
    assert slow_cfg.max_steps == pytest.approx(fast_cfg.max_steps * slow["tokens_per_s"] / fast["tokens_per_s"],
                                               rel=0.1, abs=1.5)   # in proportion to the speed (less the evaluations)
    assert slow_cfg.max_steps == slow["max_steps"] and (tmp_path / "run" / "plan.json").is_file()
    # the same run resumed from a checkpoint keeps its plan: no timing, same steps, however loaded the machine is
    (tmp_path / "run" / "checkpoints" / "step-000001" / "model").mkdir(parents=True)
    for name in ("trainer_state.pt", "COMPLETE", "model/config.json", "model/model.safetensors"):
        (tmp_path / "run" / "checkpoints" / "step-000001" / name).write_text("")
    monkeypatch.setattr(sizing, "measure_speed", lambda *a, **k: pytest.fail("a resumed run must not re-time"))
    again, plan = pt.size(cfg, corpus, "cpu", out_dir=tmp_path / "run")
    assert again == slow_cfg and "kept from" in plan["reasons"][-1]


def test_smoke_and_a_gpu_plan_without_a_gpu_skip_the_timing_and_say_so(store_dir, monkeypatch, runs_tmp):
    from nbkit.recipes import pretraining as pt

    monkeypatch.setattr(sizing, "measure_speed", lambda *a, **k: pytest.fail("no timing expected"))
    corpus = pt.PretrainCorpus(store=store_dir)
    smoke = pt.PretrainConfig.for_scale("smoke", corpus=str(store_dir))
    same, plan = pt.size(smoke, corpus, "cpu")
    assert same == smoke and "smoke skips the timing" in plan["reasons"][1] and "not measured" in plan["speed_source"]
    _, plan = pt.size(pt.PretrainConfig.for_scale("gpu", corpus=str(store_dir)), corpus, "cuda")
    assert "no CUDA device here to time on" in plan["reasons"][1] and "recorded on an idle H200" in plan["reasons"][1]


def test_a_corpus_far_larger_than_the_budget_names_its_passes_and_one_gpus_time():
    plan = sizing.size_run(700_000_000, "cpu", tokens_per_s=351, measured="measured here", eval_blocks=4096)
    text = " ".join(plan["reasons"])
    assert plan["passes"] < 0.001 and "far larger than this budget reads" in text
    assert f"{plan['passes']:.1e} passes" in text and "one pass would take ~553 h" in text
    assert plan["gpu_one_pass_s"] == pytest.approx(700_000_000 / 520_000) and "on one GPU ~22 min" in text
    assert "small at 520,000 tokens/s, interpolated" in text
    assert plan["eval_blocks"] < 4096 and "eval_blocks 4,096 ->" in text      # evaluations kept to a quarter
    assert plan["estimated_s"] <= 15 * 60 + 1
    assert sizing.size_run(700_000_000, "cuda")["gpu_one_pass_s"] is None    # on a GPU: nothing to compare


def test_the_plan_under_init_is_about_the_run_that_will_happen(store_dir, monkeypatch, runs_tmp, tmp_path):
    """Issue 39.5: the headline named a preset and its lr (`model=narrow ... lr=0.001 [applied]`) that init does not
    use, and the one-GPU estimate used another model's speed (`mini at 609,000 tokens/s`) for a BERT-base."""
    import json

    from nbkit.models.standin import BASE_SIZES, build_standin
    from nbkit.recipes import pretraining as pt

    init = build_standin(tmp_path / "bert-base-chinese")
    conf = json.loads((init / "config.json").read_text())
    (init / "config.json").write_text(json.dumps({**conf, **BASE_SIZES}))   # BERT-base's sizes: only config.json is read
    real = sizing.size_run
    monkeypatch.setattr(sizing, "measure_speed", lambda *a, **k: {"tokens_per_s": 130.0, "how": "timed here"})
    monkeypatch.setattr(sizing, "size_run", lambda n, device, **kw: real(700_000_000, device, **kw))  # a big corpus
    corpus = pt.PretrainCorpus(store=store_dir)
    cfg = pt.PretrainConfig.for_scale("cpu", init=str(init), corpus=str(store_dir))
    sized, plan = pt.size(cfg, corpus, "cpu")
    text = sizing.plan_text(plan)
    head = text.splitlines()[0]
    assert (f"model=bert-base-chinese, batch_size={sized.batch_size}, block_size=128, max_steps={sized.max_steps}, "
            "lr=5e-05," in head), head
    assert "narrow" not in text and "mini" not in text and "609,000" not in text and "lr 0.001" not in text
    assert "M parameters): init's checkpoint" in text and "lr 5e-05 with 6% warm-up (the run's" in text
    gpu = next(r for r in plan["reasons"] if "on one GPU" in r)
    assert "bert-base-chinese at ~" in gpu and "estimated, not measured: base's 441,722 tokens/s" in gpu
    assert plan["gpu_one_pass_s"] == pytest.approx(700_000_000 / float(gpu.split("at ~")[1].split(" ")[0].replace(",", "")),
                                                   rel=1e-3)
    # what you set is what the headline shows, and the time is for it
    mine, plan = pt.size(cfg.replace(max_steps=7), corpus, "cpu")
    assert mine.max_steps == 7 and "max_steps=7," in sizing.plan_text(plan).splitlines()[0]
    assert plan["train_tokens"] == 7 * mine.batch_size * 128 and "with what you set: 7 steps" in plan["reasons"][-1]
    # a GPU plan without a GPU here: the checkpoint's FLOPs estimate, not a preset's recorded speed
    monkeypatch.setattr(sizing, "size_run", real)
    _, plan = pt.size(pt.PretrainConfig.for_scale("gpu", init=str(init), corpus=str(store_dir)), corpus, "cuda")
    assert "estimated, not measured: base's 441,722" in plan["reasons"][1] and plan["model"] == "bert-base-chinese"
    tiny = sizing.checkpoint_figures(build_standin(tmp_path / "tiny-init"), 128)   # hidden 32: no recorded model near
    plan = sizing.size_run(700_000_000, "cpu", tokens_per_s=130.0, init={"name": "tiny-init", "lr": 5e-5,
                                                                        "warmup_ratio": 0.06, **tiny})
    assert plan["gpu_one_pass_s"] is None and "on one GPU: not measured for tiny-init" in " ".join(plan["reasons"])
