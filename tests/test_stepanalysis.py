"""Phase timing and ablations of the explicit MLM step on a tiny BERT (CPU)."""
import pytest
import torch
import transformers

from nbkit.errors import ConfigError
from nbkit.models.flops import bert_flops_per_token
from nbkit.profiling import steps as sa

VOCAB = 60


def tiny_bert():
    cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=32,
                                  max_position_embeddings=32)
    torch.manual_seed(0)
    return transformers.BertForMaskedLM(cfg)


BASE = sa.StepConfig(batch_size=4, seq_len=16, steps=3, warmup=1)


def test_masking_collator_masks_about_15_percent_and_labels_only_there():
    torch.manual_seed(0)
    ds = sa.RandomMLMDataset(VOCAB, seq_len=64, n=64, seed=1)
    batch = sa.MaskingCollator(mask_id=4)([ds[i] for i in range(64)])
    masked = batch["labels"] != -100                                  # (64, 64)
    assert 0.12 < masked.float().mean().item() < 0.18
    assert (batch["input_ids"][masked] == 4).all()
    assert (batch["labels"][masked] == ds.ids[masked]).all()
    assert (batch["input_ids"][~masked] == ds.ids[~masked]).all()


def test_measure_steps_phases_tokens_and_flops():
    loader = sa.random_mlm_loader(VOCAB, BASE, n_batches=4)
    out = sa.measure_steps(tiny_bert(), loader, BASE, device="cpu")
    for p in sa.PHASES:
        assert out[f"{p}_s"] > 0
    assert sum(out[f"{p}_s"] for p in sa.PHASES) == pytest.approx(out["step_s"])
    assert sum(out[f"{p}_share"] for p in sa.PHASES) == pytest.approx(1.0)
    assert out["tokens_per_s"] == pytest.approx(4 * 16 / out["step_s"])
    model_cfg = tiny_bert().config
    assert out["flops_per_token"] == bert_flops_per_token(model_cfg, 16)
    assert out["mfu"] is None and out["peak_memory_mib"] is None  # CPU: no peak known
    assert out["compiled_graphs"] == 0 and out["recompiles"] == 0


def test_measure_steps_errors_name_the_fix():
    short = sa.random_mlm_loader(VOCAB, BASE, n_batches=2)
    with pytest.raises(ConfigError, match="at least"):
        sa.measure_steps(tiny_bert(), short, BASE, device="cpu")
    with pytest.raises(ConfigError, match="bf16 or fp32"):
        sa.measure_steps(tiny_bert(), short, BASE.replace(precision="fp16"), device="cpu")
    with pytest.raises(ConfigError, match="num_workers"):
        sa.ablation(tiny_bert, BASE, "workers", [0, 1], device="cpu")


def test_training_steps_reduce_loss_direction_and_change_weights():
    model = tiny_bert()
    before = model.bert.encoder.layer[0].output.dense.weight.detach().clone()
    sa.measure_steps(model, sa.random_mlm_loader(VOCAB, BASE, 4), BASE, device="cpu")
    assert not torch.equal(before, model.bert.encoder.layer[0].output.dense.weight)


def test_ablation_rows_speedup_relative_to_first_value():
    rows = sa.ablation(tiny_bert, BASE, "attn", ["sdpa", "eager"], device="cpu")
    assert [r["value"] for r in rows] == ["sdpa", "eager"]
    assert rows[0]["speedup"] == 1.0
    assert rows[1]["speedup"] == pytest.approx(rows[1]["tokens_per_s"] / rows[0]["tokens_per_s"])
    assert rows[1]["attn"] == "eager" and rows[1]["factor"] == "attn"


@pytest.mark.slow  # torch._dynamo import + tracing: ~10 s on 2 cores
def test_compile_counts_graphs_and_recompiles_on_shape_change():
    # A loader whose sequence length changes after the first batch forces dynamo
    # to compile again: that must show up as a recompilation.
    def loader_factory(cfg, n):
        coll = sa.MaskingCollator()
        lens = [cfg.seq_len] + [cfg.seq_len // 2] * (n - 1)
        return [coll([{"input_ids": torch.randint(5, VOCAB, (t,))} for _ in range(cfg.batch_size)])
                for t in lens]

    cfg = BASE.replace(compile_backend="eager", steps=2)
    rows = sa.ablation(tiny_bert, cfg, "compile", [False, True], device="cpu",
                       loader_factory=loader_factory)
    assert rows[0]["compiled_graphs"] == 0
    assert rows[1]["compiled_graphs"] >= 2 and rows[1]["recompiles"] >= 1


def test_to_device_drops_only_an_all_ones_mask():
    full = {"input_ids": torch.ones(2, 4, dtype=torch.long), "attention_mask": torch.ones(2, 4)}
    assert set(sa.to_device(full, "cpu")) == {"input_ids"}
    padded = {"input_ids": torch.ones(2, 4, dtype=torch.long),
              "attention_mask": torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])}
    out = sa.to_device(padded, "cpu")
    assert torch.equal(out["attention_mask"], padded["attention_mask"])


@pytest.mark.gpu
def test_cuda_bf16_step_reports_memory_and_mfu_when_peak_known():
    from nbkit.models.flops import peak_tflops
    from nbkit.profiling.microbench import device_name

    cfg = BASE.replace(precision="bf16", batch_size=32, seq_len=32)
    out = sa.measure_steps(tiny_bert(), sa.random_mlm_loader(VOCAB, cfg, 4), cfg, device="cuda")
    assert out["peak_memory_mib"] > 0 and out["device"] == "cuda"
    if peak_tflops(device_name("cuda"), "bf16"):
        assert 0 < out["mfu"] < 1


def test_gpu_utilization_during_reads_nbkit_telemetry():
    from nbkit.gpu.nvml import Nvml
    from nbkit.profiling.steps import gpu_utilization_during
    from tests.nvml_fake import FakeGpu, FakeNvml

    fake = FakeNvml([FakeGpu(util=(73, 20), mem_used=4 * 2**30, mem_total=8 * 2**30)])
    result, tel = gpu_utilization_during(lambda: __import__("time").sleep(0.2) or 7,
                                         interval_s=0.02, nvml=Nvml(lib=fake))
    assert result == 7
    assert tel["gpu_util_pct"] == 73 and tel["memory_used_pct"] == 50.0


def test_gpu_utilization_during_without_nvml_runs_fn():
    import pynvml

    from nbkit.gpu.nvml import Nvml
    from nbkit.profiling.steps import gpu_utilization_during
    from tests.nvml_fake import FakeNvml

    result, tel = gpu_utilization_during(lambda: 3, nvml=Nvml(lib=FakeNvml([], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)))
    assert result == 3 and tel is None


def test_mlm_head_masked_counts_head_flops_on_scored_tokens_only():
    from nbkit.models.flops import mlm_head_flops
    from nbkit.models.mlm_head import SparseHeadBertForMaskedLM

    model = SparseHeadBertForMaskedLM(tiny_bert().config)
    cfg = BASE.replace(mlm_head="masked")
    out = sa.measure_steps(model, sa.random_mlm_loader(VOCAB, cfg, n_batches=4), cfg, device="cpu")
    enc = bert_flops_per_token(model.config, 16, "encoder")
    share = (out["flops_per_token"] - enc) / mlm_head_flops(model.config)   # scored fraction of tokens
    assert 0.02 < share < 0.5 and out["mlm_head"] == "masked"
    assert out["flops_per_token"] < bert_flops_per_token(model.config, 16)
    rows = sa.ablation(lambda: SparseHeadBertForMaskedLM(tiny_bert().config), BASE, "mlm_head",
                       ("all", "masked"), device="cpu")
    assert [r["value"] for r in rows] == ["all", "masked"] and rows[1]["speedup"] > 0
    with pytest.raises(ConfigError, match="supports it"):
        sa.measure_steps(tiny_bert(), sa.random_mlm_loader(VOCAB, cfg, n_batches=4), cfg, device="cpu")
