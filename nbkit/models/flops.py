"""Model FLOPs for BERT and GPT-2 / Llama, and the peak throughput of known GPUs, for MFU (model FLOPs utilisation, PaLM,
Chowdhery et al. 2022, appendix B: achieved model FLOP/s / the device's peak FLOP/s).

Per token, training = 3 x forward, forward = ``2 N + 4 L T d``: ``N`` the weights in a matmul per
token (per layer ``4 d^2 + 2 d i``, plus the task head), ``L`` layers, ``T`` sequence length, ``d``
hidden size; ``4 L T d`` counts ``QK^T`` and ``attention @ V``. Embedding lookups cost no matmul.
"""
from __future__ import annotations

# Dense (no sparsity) peak tensor-core TFLOP/s from NVIDIA's datasheets and whitepapers (RTX: fp32 accumulate);
# sparsity doubles the marketing figures, MFU uses the dense number.
PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "H200": {"bf16": 989.0, "fp16": 989.0, "tf32": 494.0, "fp32": 67.0},
    "H100 SXM": {"bf16": 989.0, "fp16": 989.0, "tf32": 494.0, "fp32": 67.0},
    "H100 80GB HBM3": {"bf16": 989.0, "fp16": 989.0, "tf32": 494.0, "fp32": 67.0},
    "H100 PCIe": {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.0},
    "A100": {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5},
    "A10": {"bf16": 125.0, "fp16": 125.0, "tf32": 62.5, "fp32": 31.2},
    "L40S": {"bf16": 362.0, "fp16": 362.0, "tf32": 183.0, "fp32": 91.6},
    "L4": {"bf16": 121.0, "fp16": 121.0, "tf32": 60.0, "fp32": 30.3},
    "V100": {"fp16": 125.0, "fp32": 15.7},
    "T4": {"fp16": 65.0, "fp32": 8.1},
    "RTX 4090": {"bf16": 165.0, "fp16": 165.0, "tf32": 82.6, "fp32": 82.6},
    "RTX 3090": {"bf16": 71.0, "fp16": 71.0, "tf32": 35.6, "fp32": 35.6},
}


def peak_tflops(device_name: str, precision: str) -> float | None:
    """Dense peak TFLOP/s of a GPU for ``precision`` (bf16, fp16, tf32, fp32), or None when the device or
    precision is unknown (MFU not shown rather than guessed). ``device_name`` as torch or NVML report it;
    the longest matching :data:`PEAK_TFLOPS` key wins ("H100 PCIe" over "H100").
    """
    name = device_name.upper().replace("NVIDIA", "").replace("GEFORCE", "").strip()
    best = max((k for k in PEAK_TFLOPS if k.upper() in name), key=len, default="H100 SXM" if "H100" in name else None)
    return None if best is None else PEAK_TFLOPS[best].get(precision)


def bert_matmul_params(config, mlm_head: bool = True) -> int:
    """Weights used in a matmul per token: the encoder layers plus, with ``mlm_head``, the MLM head
    (``d^2 + d V`` on every position). ``config``: a ``BertConfig``.
    """
    d, i, n_layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    per_layer = 4 * d * d + 2 * d * i
    head = d * d + d * config.vocab_size if mlm_head else 0
    return n_layers * per_layer + head


def bert_flops_per_token(config, seq_len: int, mlm_head: bool = True, training: bool = True) -> float:
    """Model FLOP per token at sequence length ``seq_len``: ``6 N + 12 L T d`` when ``training``, else ``2 N + 4 L T d``."""
    forward = 2 * bert_matmul_params(config, mlm_head) + 4 * config.num_hidden_layers * seq_len * config.hidden_size
    return float(3 * forward if training else forward)


def mfu(tokens_per_s: float, flops_per_token: float, peak: float | None) -> float | None:
    """Model FLOPs utilisation in [0, 1]: ``tokens_per_s * flops_per_token / (peak * 1e12)``, ``peak`` in TFLOP/s; None without a peak."""
    if not peak:
        return None
    return tokens_per_s * flops_per_token / (peak * 1e12)


# Host-to-device copy peak in GB/s per direction per PCIe lane (PCI-SIG: 8/16/32 GT/s, 128b/130b encoding).
PCIE_LANE_GBPS: dict[int, float] = {3: 8 * 128 / 130 / 8, 4: 16 * 128 / 130 / 8, 5: 32 * 128 / 130 / 8}


def pcie_peak_gbps(generation: int | None, width: int | None = 16) -> float | None:
    """Theoretical one-direction PCIe bandwidth in GB/s for ``generation`` x ``width`` lanes (NVML's current
    link, ``nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.width.current``); None below Gen3 or unknown.
    """
    if generation not in PCIE_LANE_GBPS or not width:
        return None
    return PCIE_LANE_GBPS[generation] * width


def mlm_head_flops(config, training: bool = True) -> float:
    """Model FLOP of the masked-LM head for one scored position: ``2 (d^2 + d V)`` forward, 3x that when
    ``training``; add it to ``bert_flops_per_token(config, T, mlm_head=False)`` per scored token (sparse head).
    """
    forward = 2 * (bert_matmul_params(config) - bert_matmul_params(config, mlm_head=False))
    return float(3 * forward if training else forward)


def bert_batch_flops(config, n_tokens: int, seq_len: int, head_positions: int) -> float:
    """Training model FLOP of one BERT batch: the encoder on ``n_tokens`` (padding included) at ``seq_len``,
    the MLM head on ``head_positions`` of them (every token for ``BertForMaskedLM``, the scored ones for
    the sparse head, 0 for classification).
    """
    return (n_tokens * bert_flops_per_token(config, seq_len, mlm_head=False)
            + head_positions * mlm_head_flops(config))


def causal_matmul_params(config) -> int:
    """Weights in a matmul per token of a GPT-2 or Llama causal LM: per layer attention (GPT-2 ``4 d^2``; Llama
    ``2 d^2`` for q, o plus ``2 d d_kv`` for k, v with grouped heads) and MLP (GPT-2 ``2 d i``; Llama's SwiGLU
    ``3 d i``), plus the output layer ``d V`` on every position. ``config``: a ``GPT2Config``/``LlamaConfig``."""
    d, n_layers, v = config.hidden_size, config.num_hidden_layers, config.vocab_size
    if config.model_type == "llama":
        heads = config.num_attention_heads
        d_kv = (getattr(config, "num_key_value_heads", None) or heads) * (getattr(config, "head_dim", None) or d // heads)
        per_layer = 2 * d * d + 2 * d * d_kv + 3 * d * config.intermediate_size
    else:
        per_layer = 4 * d * d + 2 * d * (getattr(config, "n_inner", None) or 4 * d)
    return n_layers * per_layer + d * v


def causal_flops_per_token(config, seq_len: int, training: bool = True) -> float:
    """Model FLOP per token of a causal LM at ``seq_len``: ``6 N + 12 L T d`` when ``training``, else
    ``2 N + 4 L T d`` (:func:`causal_matmul_params`; attention counted in full, as PaLM's MFU does, not halved
    for the causal mask)."""
    forward = 2 * causal_matmul_params(config) + 4 * config.num_hidden_layers * seq_len * config.hidden_size
    return float(3 * forward if training else forward)
