"""The real ``nbkit.train.loop.Loop`` on a tiny BERT MLM, as a script for torchrun and as a function.

``python -m torch.distributed.run --nproc-per-node=2 tests/ddp_loop_job.py OUT --batch-size 4``
trains with DDP (gloo on CPU); ``run(OUT, batch_size=8)`` in one process trains on the
same global batch. The masks are made once per example from its index (pre-masked data)
and the collator only pads, so both runs see exactly the same labels; dropout is off
(ranks draw different random numbers), so the gradients agree up to float rounding.
Examples have different lengths and label counts, so padding and uneven label tokens
across ranks are exercised.

``stop_at`` ends the run early with the schedule of ``steps`` (the loop stops and saves
as a run that was interrupted after a checkpoint would have). ``--step-sleep S`` sleeps S
seconds after each step (a callback), so the launcher tests can interrupt a running job.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from loop_helpers import MASK_ID, VOCAB, tiny_mlm  # noqa: E402

N_TRAIN, N_EVAL = 40, 12


def premasked(n: int, seed: int) -> list[dict]:
    """``n`` examples of 8..16 tokens; example i masks 1 + i % 5 positions, chosen from its own seed."""
    out = []
    for i in range(n):
        g = torch.Generator().manual_seed(seed * 10_000 + i)
        ids = torch.randint(5, VOCAB, (8 + i % 9,), generator=g)            # (T_i,)
        pos = torch.randperm(len(ids), generator=g)[: 1 + i % 5]
        labels = torch.full_like(ids, -100)
        labels[pos] = ids[pos]
        out.append({"input_ids": ids.masked_fill(labels != -100, MASK_ID), "labels": labels})
    return out


def pad_collate(examples: list[dict]) -> dict:
    """Right-pad to the longest example: input_ids 0, attention_mask 0, labels -100. No randomness."""
    T = max(len(e["input_ids"]) for e in examples)
    ids = torch.zeros(len(examples), T, dtype=torch.long)                   # (B, T)
    labels = torch.full((len(examples), T), -100, dtype=torch.long)         # (B, T)
    for r, e in enumerate(examples):
        ids[r, : len(e["input_ids"])] = e["input_ids"]
        labels[r, : len(e["labels"])] = e["labels"]
    return {"input_ids": ids, "attention_mask": (torch.arange(T)[None, :] < torch.tensor(
        [len(e["input_ids"]) for e in examples])[:, None]).long(), "labels": labels}


class Sleep:
    """Loop callback: sleep ``seconds`` after every optimizer step."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def on_step_end(self, loop):
        import time

        time.sleep(self.seconds)


def run(out, batch_size: int, steps: int = 4, accum: int = 2, ckpt_every: int = 2,
        stop_at: int | None = None, resume: bool = False, step_sleep: float = 0.0):
    """Train (resuming from ``out`` when ``resume``); rank 0 writes ``params.pt`` and ``history.json``."""
    from nbkit.jobs.launch import MetricsPrinter
    from nbkit.train import Loop, TrainConfig

    torch.set_num_threads(1)
    model = tiny_mlm(seed=0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    cfg = TrainConfig(max_steps=steps, batch_size=batch_size, grad_accum_steps=accum, lr=2e-3,
                      warmup_ratio=0.25, checkpoint_every=ckpt_every, keep_last=3, output_dir=out,
                      log_every=1, progress=False, precision="fp32", resume=resume)
    loop = Loop(model, cfg, premasked(N_TRAIN, 1), eval_data=premasked(N_EVAL, 2), collate_fn=pad_collate,
                callbacks=[MetricsPrinter()] + ([Sleep(step_sleep)] if step_sleep else []), device="cpu")
    if stop_at is not None:
        loop.config.max_steps = stop_at  # the scheduler keeps the `steps` schedule
    result = loop.fit()
    if loop.dist.is_main:
        torch.save({k: v.detach().clone() for k, v in loop.model.state_dict().items()}, Path(out) / "params.pt")
        Path(out, "history.json").write_text(json.dumps(result.history))
    return loop, result


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--stop-at", type=int, default=None)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--step-sleep", type=float, default=0.0)
    ap.add_argument("--ckpt-every", type=int, default=2)
    a = ap.parse_args(argv)
    run(a.out, a.batch_size, steps=a.steps, stop_at=a.stop_at, resume=a.resume, step_sleep=a.step_sleep,
        ckpt_every=a.ckpt_every)
    from nbkit.train.ddp.group import cleanup

    cleanup()


if __name__ == "__main__":
    main()
