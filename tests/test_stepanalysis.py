"""Phase timing and ablations of the loop's own step (Loop.train_step) on a tiny BERT (CPU)."""
import pytest
import torch
import transformers

from nbkit.errors import ConfigError
from nbkit.models.flops import bert_flops_per_token
from nbkit.profiling import profiler as pf
from nbkit.profiling import step_timing as sa
from nbkit.train.loop import Loop

VOCAB = 60


def tiny_bert(positions: int = 32):
    cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=32,
                                  max_position_embeddings=positions)
    torch.manual_seed(0)
    return transformers.BertForMaskedLM(cfg)


BASE = sa.StepConfig(batch_size=4, seq_len=16, steps=3, warmup=1)


@pytest.fixture
def spy(monkeypatch):
    """Record every Loop.train_step call (loop, window size, mark) and run the real step."""
    calls, real = [], Loop.train_step

    def train_step(self, window, mark=None):
        calls.append((self, len(window), mark))
        return real(self, window, mark)

    monkeypatch.setattr(Loop, "train_step", train_step)
    return calls


def test_step_loop_is_a_real_loop_with_the_mlm_collator():
    from nbkit.text.mlm import MLMCollator

    loop = sa.step_loop(tiny_bert(), BASE.replace(grad_accum_steps=2, lr=3e-4), device="cpu")
    assert isinstance(loop, Loop) and isinstance(loop.collate_fn, MLMCollator)
    assert loop.config.max_steps == BASE.warmup + BASE.steps and loop.config.grad_accum_steps == 2
    assert loop.config.lr == 3e-4 and type(loop.optimizer).__name__ == "AdamW"
    assert loop.model.training
    batch = next(loop.batch_stream())
    assert batch["input_ids"].shape == (4, 16)
    masked = batch["labels"] != -100                                   # (4, 16)
    assert masked.any(1).all() and masked.float().mean() < 0.5         # the collator's >= 1 target per row
    tok = sa.ids_tokenizer(VOCAB)
    assert len(tok) == VOCAB and tok.mask_token_id == 4 and tok.pad_token_id == 0
    with pytest.raises(ConfigError, match="special tokens"):
        sa.ids_tokenizer(5)


def test_measure_steps_times_the_loops_train_step(spy):
    loop = sa.step_loop(tiny_bert(), BASE, device="cpu")
    out = sa.measure_steps(loop, BASE)
    assert len(spy) == BASE.warmup + BASE.steps                        # the loop's own step, every time
    assert all(lp is loop and n == 1 and isinstance(m, sa.PhaseTimer) for lp, n, m in spy)
    for p in sa.PHASES:
        assert out[f"{p}_s"] > 0
    assert sum(out[f"{p}_s"] for p in sa.PHASES) == pytest.approx(out["step_s"])
    assert sum(out[f"{p}_share"] for p in sa.PHASES) == pytest.approx(1.0)
    assert out["tokens_per_s"] == pytest.approx(4 * 16 / out["step_s"])
    assert out["flops_per_token"] == pytest.approx(bert_flops_per_token(tiny_bert().config, 16))  # full head
    assert out["mfu"] is None and out["peak_memory_mib"] is None  # CPU: no peak known
    assert out["compiled_graphs"] == 0 and out["recompiles"] == 0
    assert out["precision"] == "fp32" and out["mlm_head"] == "all" and out["loss"] > 0


def test_phase_timer_sums_interleaved_phases():
    timer = sa.PhaseTimer(torch.device("cpu"))
    for phase in ("data", "forward", "backward", "data", "forward", "backward", "optimizer", None):
        timer(phase)
    assert set(timer.totals) == set(sa.PHASES) and all(v >= 0 for v in timer.totals.values())
    timer("forward")
    __import__("time").sleep(0.02)
    timer(None)
    assert timer.totals["forward"] >= 0.02


def test_accumulation_window_and_marks_reach_every_micro_batch(spy):
    cfg = BASE.replace(grad_accum_steps=3, steps=1, warmup=0)
    loop = sa.step_loop(tiny_bert(), cfg, device="cpu")
    marks = []
    loop.train_step([next(loop.batch_stream()) for _ in range(3)], mark=marks.append)
    assert marks == ["data", "forward", "backward"] * 3 + ["optimizer"]
    out = sa.measure_steps(loop, cfg)
    assert spy[-1][1] == 3 and out["tokens_per_s"] == pytest.approx(3 * 4 * 16 / out["step_s"])


def test_make_step_fn_runs_the_loops_train_step_under_the_profiler(spy, tmp_path):
    loop = sa.step_loop(tiny_bert(), BASE, device="cpu")
    step = pf.make_step_fn(loop, windows=2)
    res = pf.profile_steps(step, tmp_path, wait=1, warmup=1, active=1, device="cpu", top=50)
    assert [lp for lp, _, _ in spy] == [loop] * 3 and res.active_steps == 1
    assert step()["tokens"] == 4 * 16
    with pytest.raises(ConfigError, match="at least one window"):
        pf.make_step_fn(loop, windows=0)


def test_step_loop_errors_name_the_fix():
    with pytest.raises(ConfigError, match="unknown"):
        sa.step_loop(tiny_bert(), BASE.replace(precision="fp8"), device="cpu")
    with pytest.raises(ConfigError, match="num_workers"):
        sa.ablation(tiny_bert, BASE, "workers", [0, 1], device="cpu")
    with pytest.warns(UserWarning, match="fp16"):                      # the loop's rule: fp32 on a CPU
        assert sa.step_loop(tiny_bert(), BASE.replace(precision="fp16"), device="cpu").precision.name == "fp32"


def test_training_steps_change_weights():
    model = tiny_bert()
    before = model.bert.encoder.layer[0].output.dense.weight.detach().clone()
    sa.measure_steps(sa.step_loop(model, BASE.replace(lr=1e-2), device="cpu"), BASE)
    assert not torch.equal(before, model.bert.encoder.layer[0].output.dense.weight)


def test_ablation_rows_speedup_relative_to_first_value(spy):
    rows = sa.ablation(tiny_bert, BASE, "attn", ["sdpa", "eager"], device="cpu")
    assert [r["value"] for r in rows] == ["sdpa", "eager"]
    assert rows[0]["speedup"] == 1.0
    assert rows[1]["speedup"] == pytest.approx(rows[1]["tokens_per_s"] / rows[0]["tokens_per_s"])
    assert rows[1]["attn"] == "eager" and rows[1]["factor"] == "attn"
    assert len({id(lp) for lp, _, _ in spy}) == 2                      # one fresh loop per row


@pytest.mark.slow  # torch._dynamo import + tracing: ~10 s on 2 cores
def test_compile_counts_graphs_and_recompiles_on_shape_change():
    # Half the examples are long: the loop pads to a multiple of 64 under compile, so batches
    # with and without a long example have different shapes, and dynamo compiles again.
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": torch.randint(5, VOCAB, (t,), generator=g)} for t in [8, 8, 8, 70] * 4]
    cfg = BASE.replace(compile_backend="eager", steps=3)
    rows = sa.ablation(lambda: tiny_bert(positions=128), cfg, "compile", [False, True], device="cpu", data=data)
    assert rows[0]["compiled_graphs"] == 0
    assert rows[1]["compiled_graphs"] >= 2 and rows[1]["recompiles"] >= 1


@pytest.mark.gpu
def test_cuda_bf16_step_reports_memory_and_mfu_when_peak_known():
    from nbkit.models.flops import peak_tflops
    from nbkit.profiling.microbench import device_name

    cfg = BASE.replace(precision="bf16", batch_size=32, seq_len=32)
    out = sa.measure_steps(sa.step_loop(tiny_bert(), cfg, device="cuda"), cfg)
    assert out["peak_memory_mib"] > 0 and out["device"] == "cuda"
    if peak_tflops(device_name("cuda"), "bf16"):
        assert 0 < out["mfu"] < 1


def test_gpu_utilization_during_reads_nbkit_telemetry():
    from nbkit.gpu.nvml import Nvml
    from nbkit.profiling.step_timing import gpu_utilization_during
    from tests.nvml_fake import FakeGpu, FakeNvml

    fake = FakeNvml([FakeGpu(util=(73, 20), mem_used=4 * 2**30, mem_total=8 * 2**30)])
    result, tel = gpu_utilization_during(lambda: __import__("time").sleep(0.2) or 7,
                                         interval_s=0.02, nvml=Nvml(lib=fake))
    assert result == 7
    assert tel["gpu_util_pct"] == 73 and tel["memory_used_pct"] == 50.0


def test_gpu_utilization_during_without_nvml_runs_fn():
    import pynvml

    from nbkit.gpu.nvml import Nvml
    from nbkit.profiling.step_timing import gpu_utilization_during
    from tests.nvml_fake import FakeNvml

    result, tel = gpu_utilization_during(lambda: 3, nvml=Nvml(lib=FakeNvml([], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)))
    assert result == 3 and tel is None


def test_mlm_head_masked_counts_head_flops_on_scored_tokens_only():
    from nbkit.models.flops import mlm_head_flops
    from nbkit.models.mlm_head import SparseHeadBertForMaskedLM

    model = SparseHeadBertForMaskedLM(tiny_bert().config)
    cfg = BASE.replace(mlm_head="masked")
    out = sa.measure_steps(sa.step_loop(model, cfg, device="cpu"), cfg)
    enc = bert_flops_per_token(model.config, 16, mlm_head=False)
    share = (out["flops_per_token"] - enc) / mlm_head_flops(model.config)   # scored fraction of tokens
    assert 0.02 < share < 0.5 and out["mlm_head"] == "masked"
    assert out["flops_per_token"] < bert_flops_per_token(model.config, 16)
    rows = sa.ablation(lambda: SparseHeadBertForMaskedLM(tiny_bert().config), BASE, "mlm_head",
                       ("all", "masked"), device="cpu")
    assert [r["value"] for r in rows] == ["all", "masked"] and rows[1]["speedup"] > 0
    with pytest.raises(ConfigError, match="supports it"):
        sa.step_loop(tiny_bert(), cfg, device="cpu")
