"""The loss the loop and its evaluation share: cross-entropy summed over label tokens, so accumulation
can divide by the label tokens of the whole window (design.md section 7).
"""
from __future__ import annotations

import math
from collections import Counter

import torch
import torch.nn.functional as F

from nbkit.errors import ConfigError


def token_loss_sum(logits: torch.Tensor, labels: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """Cross-entropy summed over label tokens (labels != -100), each weighted by its class.

    logits (B, T, V) or (B, C); labels (B, T) or (B,); weight (C,) or None. Returns a scalar (fp32 under
    autocast); divide by :func:`label_weight_sum` of the window for the mean.
    """
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), weight=weight,
                           ignore_index=-100, reduction="sum")


def label_weight_sum(labels: torch.Tensor, weight: torch.Tensor | None) -> float:
    """The divisor matching :func:`token_loss_sum`: label tokens, or the sum of their class weights."""
    scored = labels[labels != -100]
    return float(len(scored)) if weight is None else float(weight[scored].sum())


def label_counts(data) -> Counter:
    """Examples per class id in ``data`` (``labels``, else ``label``: one int per example).

    Raises:
        ConfigError: per-token (MLM) labels, or neither field.
    """
    names = getattr(data, "column_names", None) or list(data[0])
    key = next((k for k in ("labels", "label") if k in names), None)
    if key is None:
        raise ConfigError(f"class_weights needs the training labels, but the examples have no 'labels' or 'label' "
                          f"(fields: {names}); encode with text.encode_classification, or class_weights=None")
    labels = data[key] if getattr(data, "column_names", None) else [data[i][key] for i in range(len(data))]
    counts: Counter = Counter()
    for y in labels:
        if hasattr(y, "dim") and y.dim() == 0:
            y = int(y)
        if not isinstance(y, int):
            raise ConfigError("class_weights applies to sequence classification (one int label per example); "
                              "these examples have a label per token (MLM). Use class_weights=None.")
        counts[y] += 1
    return counts


def class_weights(spec, train_data, num_labels: int | None) -> torch.Tensor | None:
    """Weight per class, (K,) float32 on CPU, or None for ``spec=None``.

    spec: ``"balanced"`` (``n / (K * count)`` from ``train_data``; 0 for a class absent from it) or K
    non-negative numbers; num_labels: K (None: largest id + 1).

    Raises:
        ConfigError: an unknown ``spec``, a wrong-length, negative or non-finite list, ids outside 0..K-1,
            or per-token labels.
    """
    if spec is None:
        return None
    if isinstance(spec, str):
        if spec != "balanced":
            raise ConfigError(f"class_weights={spec!r}: use 'balanced', a list of one weight per class, or None")
        counts = label_counts(train_data)
        k = num_labels or max(counts) + 1
        bad = sorted(c for c in counts if not 0 <= c < k)
        if bad:
            raise ConfigError(f"label ids {bad} are outside 0..{k - 1} (the model has {k} labels); "
                              "build the model with num_labels covering every class")
        n = sum(counts.values())
        return torch.tensor([n / (k * counts[c]) if counts[c] else 0.0 for c in range(k)], dtype=torch.float32)
    weights = [float(w) for w in spec]
    if num_labels is not None and len(weights) != num_labels:
        raise ConfigError(f"class_weights has {len(weights)} entries but the model has {num_labels} labels; "
                          "give one weight per class id (or class_weights='balanced')")
    if any(not math.isfinite(w) or w < 0 for w in weights) or not any(weights):
        raise ConfigError(f"class_weights={weights} must be finite, >= 0 and not all 0")
    return torch.tensor(weights, dtype=torch.float32)


#: rows of hidden states per chunk of :func:`linear_cross_entropy_sum` by device type: (rows, V) fp32 logits live
#: at a time, small enough to stay in cache from the matmul to the gradients (docs/pretraining.md)
CHUNK_ROWS = {"cpu": 128, "cuda": 256}


class _LinearCrossEntropy(torch.autograd.Function):
    """Forward computes the loss and both gradients chunk by chunk; backward scales them by the incoming grad."""

    @staticmethod
    def forward(ctx, hidden, weight, labels, chunk_rows):
        cast = torch.get_autocast_dtype(hidden.device.type) if torch.is_autocast_enabled(hidden.device.type) else None
        compute = cast or hidden.dtype                                   # the matmuls' dtype, as autocast would
        with torch.autocast(hidden.device.type, enabled=False):
            w = weight.to(compute)                                       # (V, d)
            grad_h = torch.empty_like(hidden)                            # (N, d)
            grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)   # (V, d) fp32 sum
            loss = torch.zeros((), dtype=torch.float32, device=hidden.device)
            for s in range(0, hidden.shape[0], chunk_rows):
                h = hidden[s:s + chunk_rows].to(compute)                 # (n, d)
                y = labels[s:s + chunk_rows]                             # (n,)
                logits = (h @ w.T).float()                               # (n, V) fp32
                lse = torch.logsumexp(logits, dim=-1)                    # (n,)
                loss += (lse - logits.gather(1, y[:, None]).squeeze(1)).sum()
                g = logits.sub_(lse[:, None]).exp_()                     # softmax, in place: d loss / d logits
                g[torch.arange(len(y), device=g.device), y] -= 1.0       # minus the one-hot target
                g = g.to(compute)
                grad_h[s:s + chunk_rows] = (g @ w).to(hidden.dtype)
                if compute == torch.float32:
                    grad_w.addmm_(g.T, h)                                # (V, d) += (V, n) @ (n, d)
                else:
                    grad_w += (g.T @ h).float()
        ctx.save_for_backward(grad_h, grad_w.to(weight.dtype))
        return loss

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        return grad_h * grad_out, grad_w * grad_out, None, None


def linear_cross_entropy_sum(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor,
                             chunk_rows: int | None = None) -> torch.Tensor:
    """``token_loss_sum(hidden @ weight.T, labels)`` without ever holding the (N, V) logits: an output layer
    (a bias-free linear, e.g. GPT-2's tied ``wte`` or Llama's ``lm_head``) fused with its cross-entropy.

    hidden (N, d) the final hidden states of the scored positions; weight (V, d) the output layer; labels (N,)
    class ids in 0..V-1 (drop -100 positions before: ``hidden[labels != -100]``). Returns the CE sum over the N
    rows, a scalar fp32 tensor whose backward gives ``hidden`` and ``weight`` their gradients. ``chunk_rows``
    None: :data:`CHUNK_ROWS` for the device. Cost per row: 6 x d x V FLOPs (the three matmuls), as unfused.

    The chunked design of Liger-Kernel's ``LigerFusedLinearCrossEntropy`` (Hsu et al. 2024, arXiv:2410.10989):
    per chunk of ``chunk_rows`` rows the logits are made, turned into the loss and ``softmax - onehot``, and
    multiplied back into d/d hidden and d/d weight right away, so the forward pass does the backward's work and
    the backward only scales it. Under autocast the matmuls run in the autocast dtype (as ``nn.Linear`` would)
    and log-softmax in fp32; d/d weight is accumulated in fp32.

    Raises:
        ConfigError: shapes that do not match (named), or ``chunk_rows`` < 1.
    """
    if hidden.dim() != 2 or weight.dim() != 2 or labels.shape != hidden.shape[:1] or hidden.shape[1] != weight.shape[1]:
        raise ConfigError(f"linear_cross_entropy_sum needs hidden (N, d), weight (V, d), labels (N,); got "
                          f"{tuple(hidden.shape)}, {tuple(weight.shape)}, {tuple(labels.shape)}")
    if chunk_rows is None:
        chunk_rows = CHUNK_ROWS.get(hidden.device.type, CHUNK_ROWS["cuda"])
    if chunk_rows < 1:
        raise ConfigError(f"chunk_rows={chunk_rows} must be >= 1 (default by device: {CHUNK_ROWS})")
    return _LinearCrossEntropy.apply(hidden, weight, labels, chunk_rows)
