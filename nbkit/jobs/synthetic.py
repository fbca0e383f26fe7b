"""A tiny built-in token-prediction job: exercises DDP, the launcher and resume end to end on CPU.

It uses every DDP point the real loop needs (``nbkit.train.distributed``), with a plain
loop of about 60 lines: resumable sharded sampler, accumulation normalised by the
label tokens of the whole window *across ranks*, ``no_sync`` on all but the last
micro-batch, metrics reduced over ranks, rank-0-only checkpoints and metrics lines.
Numbers are chosen so a 2-process gloo run takes a few seconds on 2 CPU cores.

The data: ``num_samples`` sequences of ``SEQ_LEN`` token ids in ``[0, VOCAB)``; the
label of token ``t`` is ``(t * 7 + 3) % VOCAB``, and each sequence hides a
different number of labels (-100), so ranks hold unequal label-token counts and a
per-rank normalisation would give a different gradient than one process.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from nbkit import jsonio
from nbkit.jobs.common import checkpoint_name
from nbkit.train import ddp_loop
from nbkit.train import distributed as D
from nbkit.train.ckpt_cleanup import discard_checkpoint

VOCAB, SEQ_LEN, DIM = 32, 8, 16


class TinyTokenModel(nn.Module):
    """Embedding -> tanh MLP -> vocabulary logits; ``forward(input_ids (B, T)) -> logits (B, T, V)``."""

    def __init__(self, vocab: int = VOCAB, dim: int = DIM):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.hidden = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, input_ids):
        h = torch.tanh(self.hidden(self.emb(input_ids)))  # (B, T, C)
        return self.out(h)  # (B, T, V)


def synthetic_dataset(num_samples: int, seed: int = 0) -> torch.utils.data.TensorDataset:
    """``(input_ids (N, T), labels (N, T))`` with 1..T label tokens per sequence; the same for a seed."""
    g = torch.Generator().manual_seed(seed + 12345)
    ids = torch.randint(0, VOCAB, (num_samples, SEQ_LEN), generator=g)  # (N, T)
    labels = (ids * 7 + 3) % VOCAB  # (N, T)
    keep = torch.arange(SEQ_LEN)[None, :] < (torch.arange(num_samples)[:, None] % SEQ_LEN + 1)  # (N, T)
    return torch.utils.data.TensorDataset(ids, labels.masked_fill(~keep, -100))


def _save(output_dir: Path, step: int, model, opt, sampler) -> Path:
    """Rank 0 writes ``checkpoint-NNNNNNN/state.pt`` atomically (temp dir of this pid, then rename;
    an older folder of that step is renamed away before it is deleted: ``ckpt_cleanup``)."""
    final = output_dir / checkpoint_name(step)
    tmp = output_dir / f"{final.name}.tmp-{os.getpid()}"  # per process: two jobs never share it
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    torch.save({"step": step, "model": D.unwrap_model(model).state_dict(), "optimizer": opt.state_dict(),
                "sampler": sampler.state_dict()}, tmp / "state.pt")
    discard_checkpoint(final)
    os.replace(tmp, final)
    return final


def run_synthetic(output_dir: Path, max_steps: int = 6, batch_size: int = 4, grad_accum: int = 2,
                  lr: float = 0.2, seed: int = 0, checkpoint_every: int | None = None,
                  resume: Path | None = None, log_every: int = 1, num_samples: int = 64,
                  step_sleep: float = 0.0, backend: str | None = None) -> dict:
    """Train ``TinyTokenModel`` for ``max_steps`` optimizer steps in this process (any rank).

    Global batch per step = ``world_size * batch_size * grad_accum`` sequences. Rank 0
    prints ``NBKIT_METRICS {"step", "loss", "tokens", "samples", "world_size", "elapsed_s"}``
    every ``log_every`` steps, writes checkpoints every ``checkpoint_every`` steps and,
    at the end, ``final.pt`` (unwrapped ``state_dict``) and ``metrics.json``.
    ``step_sleep`` (s) slows each step down, for interrupt tests. Returns the final metrics.
    """
    from nbkit.train.metrics_stream import emit_metrics

    info = D.init_distributed(backend)
    output_dir = Path(output_dir)
    torch.manual_seed(seed)
    model = TinyTokenModel()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    data = synthetic_dataset(num_samples, seed)
    sampler = ddp_loop.make_sampler(len(data), shuffle=True, seed=seed, dist_info=info)
    step = 0
    if resume is not None:
        state = torch.load(Path(resume) / "state.pt", map_location="cpu", weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sampler.load_state_dict(state["sampler"])
        step = int(state["step"])
    model = D.wrap_ddp(model, info)
    loader = torch.utils.data.DataLoader(data, batch_size=batch_size, sampler=sampler)
    batches, t0, metrics = iter(loader), time.perf_counter(), {}

    def next_batch():
        nonlocal batches
        try:
            return next(batches)
        except StopIteration:
            sampler.set_epoch(sampler.epoch + 1)
            batches = iter(loader)
            return next(batches)

    while step < max_steps:
        window = [next_batch() for _ in range(grad_accum)]
        local_tokens = sum(int((y != -100).sum()) for _, y in window)
        n_tokens = D.global_label_tokens(local_tokens)  # label tokens in the window, all ranks
        loss_sum = 0.0
        for i, (x, y) in enumerate(window):
            x, y = x.to(info.device), y.to(info.device)
            with D.maybe_no_sync(model, is_last_microbatch=i == grad_accum - 1):
                logits = model(x)  # (B, T, V)
                ce = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1), ignore_index=-100,
                                     reduction="sum")
                # DDP averages gradients over ranks: * world_size makes it sum / n_tokens
                (ce * info.world_size / n_tokens).backward()
            loss_sum += float(ce.detach())
            sampler.advance(x.shape[0])
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        tot = D.all_reduce_dict({"loss_sum": loss_sum, "samples": sum(len(x) for x, _ in window)})
        metrics = {"step": step, "loss": tot["loss_sum"] / n_tokens, "tokens": n_tokens,
                   "samples": int(tot["samples"]), "world_size": info.world_size,
                   "elapsed_s": round(time.perf_counter() - t0, 3)}
        if info.is_main and (step % log_every == 0 or step == max_steps):
            emit_metrics(metrics)
        if checkpoint_every and step % checkpoint_every == 0:
            if info.is_main:
                _save(output_dir, step, model, opt, sampler)
            D.barrier()  # nobody resumes from or deletes a half-written checkpoint
        if step_sleep:
            time.sleep(step_sleep)
    if info.is_main:
        output_dir.mkdir(parents=True, exist_ok=True)
        torch.save(D.unwrap_model(model).state_dict(), output_dir / "final.pt")
        jsonio.write_json(output_dir / "metrics.json", metrics)
    D.barrier()
    del model, opt  # the DDP wrapper holds the process group: free it before leaving
    D.cleanup()
    return metrics
