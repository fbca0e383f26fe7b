"""Tiny models, data and a subprocess training script for the loop tests.

Run as a script (``python tests/loop_helpers.py OUT_DIR ...``) it trains a
tiny BERT MLM with checkpoints; options make it SIGKILL itself after a step
or pause forever inside a checkpoint write (so a test can kill it there).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)  # determinism and speed on a shared 2-core machine

VOCAB, MASK_ID = 60, 4


def tiny_config(**kw):
    from transformers import BertConfig

    base = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=64, pad_token_id=0)
    base.update(kw)
    return BertConfig(**base)


def tiny_mlm(seed: int = 0, **kw):
    from transformers import BertForMaskedLM

    torch.manual_seed(seed)
    return BertForMaskedLM(tiny_config(**kw))


def tiny_classifier(seed: int = 0, num_labels: int = 2, **kw):
    from transformers import BertForSequenceClassification

    torch.manual_seed(seed)
    return BertForSequenceClassification(tiny_config(num_labels=num_labels, **kw))


def token_data(n: int = 48, length: int = 16, seed: int = 0) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    return [{"input_ids": torch.randint(5, VOCAB, (length,), generator=g)} for _ in range(n)]


def mlm_collate(examples: list[dict]) -> dict:
    """Masks 15% of tokens with torch's global RNG (as an MLM collator does)."""
    ids = torch.stack([e["input_ids"] for e in examples])       # (B, T)
    chosen = torch.rand(ids.shape) < 0.15                       # (B, T)
    chosen[:, 0] = True                                         # at least one label per row
    labels = ids.masked_fill(~chosen, -100)
    return {"input_ids": ids.masked_fill(chosen, MASK_ID), "attention_mask": torch.ones_like(ids), "labels": labels}


def cls_data(n: int = 32, length: int = 12, seed: int = 0) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ids = torch.randint(5, VOCAB, (length,), generator=g)
        out.append({"input_ids": ids, "label": int(ids[0] > VOCAB // 2)})
    return out


def cls_collate(examples: list[dict]) -> dict:
    ids = torch.stack([e["input_ids"] for e in examples])
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
            "labels": torch.tensor([e["label"] for e in examples])}


def main(argv=None):
    from nbkit.train import Loop, TrainConfig

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--ckpt-every", type=int, default=3)
    ap.add_argument("--accum", type=int, default=2)
    ap.add_argument("--kill-after", type=int, default=None, help="SIGKILL self after this step")
    ap.add_argument("--hang-in-save", type=int, default=None, help="hang inside the save of this step")
    ap.add_argument("--marker", default=None, help="file touched when hanging")
    a = ap.parse_args(argv)

    if a.hang_in_save is not None:
        from nbkit import atomic

        real = atomic.fsync_tree

        def fsync_then_hang(root: Path):
            real(root)
            if root.name.startswith(f"step-{a.hang_in_save:06d}.tmp"):
                Path(a.marker).write_text("hanging")
                time.sleep(600)
        atomic.fsync_tree = fsync_then_hang

    class Killer:
        def on_step_end(self, loop):
            if a.kill_after is not None and loop.state.step == a.kill_after:
                os.kill(os.getpid(), signal.SIGKILL)

    cfg = TrainConfig(max_steps=a.steps, batch_size=4, grad_accum_steps=a.accum, lr=2e-3, warmup_ratio=0.25,
                      checkpoint_every=a.ckpt_every, keep_last=2, output_dir=a.out, log_every=1, progress=False)
    result = Loop(tiny_mlm(), cfg, token_data(), collate_fn=mlm_collate, callbacks=[Killer()]).fit()
    Path(a.out, "history.json").write_text(json.dumps(result.history))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
