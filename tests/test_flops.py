from types import SimpleNamespace

import pytest

from nbkit.models.flops import bert_flops_per_token, bert_matmul_params, mfu, peak_tflops


def tiny_config():
    return SimpleNamespace(hidden_size=4, intermediate_size=8, num_hidden_layers=2, vocab_size=10)


def test_matmul_params_hand_count():
    # per layer: Q,K,V,O 4*4*4=64, FFN 2*4*8=64 -> 128; two layers 256
    # MLM head: transform 16 + decoder 40 = 56
    assert bert_matmul_params(tiny_config(), mlm_head=False) == 256
    assert bert_matmul_params(tiny_config()) == 312


def test_flops_per_token_hand_count():
    # forward = 2*312 + 4*L*T*d = 624 + 4*2*3*4 = 720; training = 2160
    assert bert_flops_per_token(tiny_config(), seq_len=3, training=False) == 720
    assert bert_flops_per_token(tiny_config(), seq_len=3) == 2160


def test_bert_base_close_to_published_count():
    # BERT-base has ~85M encoder weights in matmuls (110M total incl. embeddings).
    cfg = SimpleNamespace(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, vocab_size=21128)
    assert bert_matmul_params(cfg, mlm_head=False) == pytest.approx(84.9e6, rel=0.01)


def test_peak_lookup_longest_match_and_unknown():
    assert peak_tflops("NVIDIA H100 PCIe", "bf16") == 756.0
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bf16") == 989.0
    assert peak_tflops("NVIDIA H200", "tf32") == 494.0
    assert peak_tflops("NVIDIA A100-SXM4-80GB", "bf16") == 312.0
    assert peak_tflops("Tesla T4", "bf16") is None
    assert peak_tflops("cpu", "fp32") is None


def test_mfu():
    assert mfu(1e6, 1e6, 1.0) == pytest.approx(1.0)
    assert mfu(1e6, 1e6, None) is None


def test_formula_matches_torch_flop_counter_on_real_tiny_bert():
    # Independent check: torch's FlopCounterMode counts every matmul (mm, addmm,
    # bmm) the real BertForMaskedLM runs; eager attention so QK^T and PV are bmm.
    import torch
    import transformers
    from torch.utils.flop_counter import FlopCounterMode

    from nbkit.models.flops import pcie_peak_gbps

    cfg = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=32,
                                  max_position_embeddings=16)
    model = transformers.BertForMaskedLM(cfg).eval()
    model.set_attn_implementation("eager")
    batch, seq = 3, 8
    ids = torch.randint(0, 50, (batch, seq))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(input_ids=ids)
    expected = bert_flops_per_token(cfg, seq, training=False) * batch * seq
    assert counter.get_total_flops() == expected
    assert pcie_peak_gbps(4, 16) == pytest.approx(31.5, rel=1e-3)
    assert pcie_peak_gbps(5, 16) == pytest.approx(63.0, rel=1e-3)
    assert pcie_peak_gbps(2, 16) is None


def test_batch_flops_full_head_equals_per_token_mlm_and_zero_head_the_encoder():
    from nbkit.models.flops import bert_batch_flops

    cfg = tiny_config()
    assert bert_batch_flops(cfg, 12, 3, 12) == 12 * bert_flops_per_token(cfg, 3)
    assert bert_batch_flops(cfg, 12, 3, 0) == 12 * bert_flops_per_token(cfg, 3, mlm_head=False)
    assert bert_batch_flops(cfg, 12, 3, 12) > bert_batch_flops(cfg, 12, 3, 2) > bert_batch_flops(cfg, 12, 3, 0)
