"""nbkit Loop vs transformers.Trainer vs a minimal hand-written PyTorch loop.

Same tiny BERT MLM (same initial weights), same pre-masked data, batch size,
optimizer (AdamW, BERT decay groups), linear schedule, grad clipping 1.0 and
steps. Each loop runs ``--warmup`` steps, then ``--steps`` timed steps; the
end of every step is stamped through each loop's own step-end hook. The
headline uses the median step time (robust to load spikes on a shared
machine); total wall time is printed as well. Loops run interleaved for ``--rounds`` rounds
in rotating order so machine noise shows up as spread, not bias. Prints
tokens/s (input positions processed per wall-clock second, padding included)
for every run and the median ratios nbkit/Trainer and nbkit/hand-written.

    python bench/bench_loop.py                 # hidden 128, 2 layers, seq 128, batch 16, 60 steps, CPU fp32
    python bench/bench_loop.py --rounds 3 --threads 1

Target (issue 3): nbkit >= Trainer, and within 3% of the hand-written loop.
The model is a plain ``BertForMaskedLM``, so all three run the MLM head on every
position: this measures loop overhead only. The head on masked positions only
(what ``modeling.build_mlm_model`` gives the loop) is a separate gain, measured
by ``bench/bench_mlm_head.py``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def make_model(a):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                     num_attention_heads=max(a.hidden // 64, 2), intermediate_size=4 * a.hidden,
                     max_position_embeddings=max(512, a.seq))
    return BertForMaskedLM(cfg)


def make_data(a) -> list[dict]:
    g = torch.Generator().manual_seed(0)
    n = a.batch * 8
    ids = torch.randint(5, a.vocab, (n, a.seq), generator=g)            # (N, T)
    chosen = torch.rand(n, a.seq, generator=g) < 0.15                    # (N, T)
    labels = ids.masked_fill(~chosen, -100)
    ids = ids.masked_fill(chosen, 4)
    return [{"input_ids": ids[i], "attention_mask": torch.ones(a.seq, dtype=torch.long), "labels": labels[i]}
            for i in range(n)]


def stack(examples):
    return {k: torch.stack([e[k] for e in examples]) for k in examples[0]}


def run_hand(a, data):
    from transformers import get_scheduler

    from nbkit.train.optim import build_optimizer

    model = make_model(a).train()
    opt = build_optimizer(model, a.lr, 0.01)
    sched = get_scheduler("linear", opt, num_warmup_steps=0, num_training_steps=a.warmup + a.steps)
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch, shuffle=True, collate_fn=stack, drop_last=True)
    step, timer = 0, _Timer(a.warmup)
    while step < a.warmup + a.steps:
        for batch in loader:
            loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            timer.mark(step)
            if step == a.warmup + a.steps:
                break
    return timer


class _Timer:
    """End time of every step after warmup; gives wall time and the median step time (s)."""

    def __init__(self, warmup):
        self.warmup, self.marks = warmup, []

    def mark(self, step):
        if step >= self.warmup:
            self.marks.append(time.perf_counter())

    @property
    def wall(self) -> float:
        return self.marks[-1] - self.marks[0]

    @property
    def median_step(self) -> float:
        return statistics.median(b - a for a, b in zip(self.marks, self.marks[1:]))


def run_nbkit(a, data):
    from nbkit.train import Loop, TrainConfig

    timer = _Timer(a.warmup)

    class Hook:
        def on_step_end(self, loop):
            timer.mark(loop.state.step)
    cfg = TrainConfig(max_steps=a.warmup + a.steps, batch_size=a.batch, lr=a.lr, warmup_ratio=0.0,
                      precision="fp32", log_every=a.warmup + a.steps, progress=False)
    Loop(make_model(a), cfg, data, collate_fn=stack, callbacks=[Hook()], device="cpu").fit()
    return timer


def run_trainer(a, data):
    from transformers import Trainer, TrainerCallback, TrainingArguments

    timer = _Timer(a.warmup)

    class Hook(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            timer.mark(state.global_step)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, max_steps=a.warmup + a.steps, per_device_train_batch_size=a.batch,
                                 learning_rate=a.lr, weight_decay=0.01, lr_scheduler_type="linear", max_grad_norm=1.0,
                                 logging_steps=10**6, save_strategy="no", report_to=[], use_cpu=True,
                                 disable_tqdm=True, dataloader_num_workers=0, dataloader_drop_last=True)
        Trainer(model=make_model(a), args=args, train_dataset=data, data_collator=stack, callbacks=[Hook()]).train()
    return timer


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    data = make_data(a)
    runners = {"nbkit": run_nbkit, "trainer": run_trainer, "hand": run_hand}
    tokens = a.steps * a.batch * a.seq
    speed: dict[str, list[float]] = {k: [] for k in runners}   # from the median step time
    wall: dict[str, list[float]] = {k: [] for k in runners}    # from total wall time
    print(f"tiny BERT MLM: hidden {a.hidden}, {a.layers} layers, vocab {a.vocab}, seq {a.seq}, batch {a.batch}, "
          f"{a.steps} timed steps after {a.warmup}; CPU fp32, {torch.get_num_threads()} threads")
    names = list(runners)
    for r in range(a.rounds):
        order = names[r % 3:] + names[:r % 3]
        for name in order:
            t = runners[name](a, data)
            speed[name].append(a.batch * a.seq / t.median_step)
            wall[name].append(tokens / t.wall)
            print(f"round {r + 1} {name:8s} {speed[name][-1]:10,.0f} tokens/s (median step)  "
                  f"{wall[name][-1]:10,.0f} tokens/s (wall, {t.wall:.2f} s)", flush=True)
    for label, table in (("median step", speed), ("wall", wall)):
        med = {k: statistics.median(v) for k, v in table.items()}
        for k, v in table.items():
            print(f"[{label}] {k:8s} {med[k]:10,.0f} tokens/s  (runs: {', '.join(f'{x:,.0f}' for x in v)})")
        print(f"[{label}] ratio nbkit/trainer = {med['nbkit'] / med['trainer']:.3f}  (target >= 1.00); "
              f"nbkit/hand = {med['nbkit'] / med['hand']:.3f}  (target >= 0.97)")


if __name__ == "__main__":
    main()
