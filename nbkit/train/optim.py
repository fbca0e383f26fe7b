"""Optimizer and LR schedule for BERT: AdamW without weight decay on biases and LayerNorm weights (the
original BERT recipe's ``exclude_from_weight_decay``), warmup, then linear/cosine/constant.
"""
from __future__ import annotations

import math

import torch

from nbkit.errors import ConfigError

SCHEDULERS = ("linear", "cosine", "constant_with_warmup")


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Trainable parameters in a decayed and a non-decayed group (every LayerNorm parameter, by type or
    Hugging Face's name, and every bias); tied parameters appear once, empty groups are dropped.
    """
    no_decay_ids: set[int] = set()
    for mod_name, module in model.named_modules():
        is_norm = isinstance(module, torch.nn.LayerNorm) or "layernorm" in mod_name.lower().replace("_", "")
        for p_name, p in module.named_parameters(recurse=False):
            if is_norm or p_name == "bias":
                no_decay_ids.add(id(p))
    decay, no_decay = [], []
    for p in model.parameters():  # de-duplicates tied parameters
        if p.requires_grad:
            (no_decay if id(p) in no_decay_ids else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


def build_optimizer(model: torch.nn.Module, lr: float, weight_decay: float,
                    betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, device=None) -> torch.optim.AdamW:
    """AdamW over :func:`param_groups`, fused (the whole update in one kernel) when the parameters train
    on CUDA: ``device`` (where they will be moved before the first step), else where they are now.

    Raises ``ConfigError`` for a non-positive learning rate.
    """
    if not lr > 0:
        raise ConfigError(f"lr={lr} must be > 0; BERT pretraining typically uses 1e-4 to 1e-3.")
    groups = param_groups(model, weight_decay)
    on_cuda = (torch.device(device).type == "cuda" if device is not None
               else all(p.is_cuda for g in groups for p in g["params"]))
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=True if on_cuda else None)


def warmup_steps(max_steps: int, warmup_ratio: float) -> int:
    """Warmup length in optimizer steps, ``ceil(max_steps * warmup_ratio)`` (as ``transformers.Trainer``)."""
    if not 0.0 <= warmup_ratio < 1.0:
        raise ConfigError(f"warmup_ratio={warmup_ratio} must be in [0, 1); 0.06 is a common choice.")
    return math.ceil(max_steps * warmup_ratio)


def build_scheduler(optimizer: torch.optim.Optimizer, name: str, max_steps: int, warmup_ratio: float):
    """A ``transformers.get_scheduler`` schedule stepped once per optimizer step. Its shape is kept as
    ``nbkit_schedule`` (scheduler, max_steps, warmup_ratio) in its state, so a resume can rebuild it.
    Raises ``ConfigError`` for an unknown name.
    """
    from transformers import get_scheduler

    if name not in SCHEDULERS:
        raise ConfigError(f"scheduler={name!r} is unknown; use one of {', '.join(SCHEDULERS)}.")
    sched = get_scheduler(name, optimizer, num_warmup_steps=warmup_steps(max_steps, warmup_ratio),
                          num_training_steps=max_steps)
    sched.nbkit_schedule = {"scheduler": name, "max_steps": max_steps, "warmup_ratio": warmup_ratio}
    return sched
