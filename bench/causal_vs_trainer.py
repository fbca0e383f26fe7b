"""Benchmark: causal (GPT-style) pretraining, nbkit's loop vs ``transformers.Trainer`` on the same GPT-2.

Both arms build the same model (``nbkit.recipes.pretraining.model`` with ``objective="causal"``: a
``GPT2LMHeadModel`` from preset ``--model``, weights from the seed), read the same store (the training reviews
prepared with the recipe's tokenizer by ``nbkit.recipes.pretraining.data``) as the same packed blocks
(``StoreCausalDataset``), at the same batch, block size, lr, AdamW, clipping 1.0 and precision (fp32 on a CPU,
bf16 on a bf16 GPU). nbkit: ``nbkit.train.Loop`` with ``CausalCollator`` (labels shifted by the collator, the
loop's own cross-entropy, its output layer fused with the loss: ``nbkit.train.loss.linear_cross_entropy_sum``). Trainer: the same blocks through ``DataCollatorForLanguageModeling(mlm=False)`` (the
model shifts the labels itself), as a Trainer user runs it. The process, timing and memory machinery is
``bench/continued_pretraining.py``'s (``Peak``, ``StepClock``, ``alternate``, ``compare``): each arm in its own
process, the arms alternating for ``--rounds`` rounds, tokens/s = ``batch x block`` over the median step time.

    python bench/causal_vs_trainer.py                                  # gpt2-narrow, CPU, 2 threads
    python bench/causal_vs_trainer.py --device cuda --model gpt2-mini --batch 64 --block 128 --steps 50

Writes ``--out`` (strict JSON, default ``bench/results/causal_vs_trainer_<device>_<date>.json``); the README
rows are rendered from it by ``scripts/causal_table.py``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from continued_pretraining import LoopFlops, Peak, StepClock, alternate, compare, with_mfu  # noqa: E402


def recipe(a):
    """The causal config both arms read their settings from."""
    from nbkit.recipes.pretraining import PretrainConfig

    return PretrainConfig.for_scale("cpu", objective="causal", model=a.model, corpus=a.store, batch_size=a.batch,
                                    block_size=a.block, max_steps=a.warmup + a.steps, precision=a.precision,
                                    progress=False, fit_to_corpus=False, num_workers=0)


def _setup(a):
    from nbkit.recipes import pretraining as pt

    cfg = recipe(a)
    corpus = pt.PretrainCorpus(store=Path(a.store))
    tok = pt.tokenizer(cfg, corpus)
    return cfg, tok, pt.blocks(cfg, tok, corpus), pt.model(cfg, tok)


def arm_nbkit(a) -> dict:
    import dataclasses

    from nbkit.recipes import pretraining as pt
    from nbkit.train import Loop

    cfg, tok, blocks, model = _setup(a)
    tcfg = dataclasses.replace(pt.train_config(cfg, tempfile.mkdtemp()), output_dir=None, eval_every=None,
                               checkpoint_every=None, keep_steps=(), log_every=10**6)
    clock, flops = StepClock(a.warmup), LoopFlops(a.warmup)

    class Hook:
        def on_step_end(self, loop):
            if loop.device.type == "cuda":
                import torch

                torch.cuda.synchronize()
            clock.mark(loop.state.step)
            flops.mark(loop)

    loop = Loop(model, tcfg, blocks["train"], None, collate_fn=pt.collator(cfg, tok), callbacks=[Hook()],
                device=a.device)
    loop.setup()                                   # the model on its device before the memory baseline
    peak = Peak(a.device)
    result = loop.fit()
    return with_mfu({**clock.summary(a.batch * a.block), **peak.stop(), "precision": result.metrics["precision"],
                     "fused_loss": loop._fused_weight is not None,
                     "train_loss": result.metrics["train_loss"], "model_class": type(model).__name__,
                     "n_parameters": sum(p.numel() for p in model.parameters())}, flops.per_token(), a.device)


def arm_trainer(a) -> dict:
    import torch
    from transformers import DataCollatorForLanguageModeling, Trainer, TrainerCallback, TrainingArguments

    from nbkit.train.optim import warmup_steps

    cfg, tok, blocks, model = _setup(a)
    clock = StepClock(a.warmup)

    class Hook(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if a.device.startswith("cuda"):
                torch.cuda.synchronize()
            clock.mark(state.global_step)

    lm_collate = DataCollatorForLanguageModeling(tok, mlm=False)   # labels = input_ids; the model shifts them

    def collate(examples):
        return lm_collate([{"input_ids": e["input_ids"]} for e in examples])

    cuda = a.device.startswith("cuda")
    bf16 = cuda and torch.cuda.is_bf16_supported() and a.precision in ("auto", "bf16")
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, max_steps=a.warmup + a.steps, per_device_train_batch_size=a.batch,
                                 learning_rate=cfg.lr,
                                 warmup_steps=warmup_steps(a.warmup + a.steps, cfg.warmup_ratio),  # nbkit's schedule
                                 weight_decay=cfg.weight_decay,
                                 lr_scheduler_type="linear", max_grad_norm=1.0, logging_steps=10**6,
                                 save_strategy="no", report_to=[], use_cpu=not cuda, bf16=bf16,
                                 disable_tqdm=True, dataloader_num_workers=0, remove_unused_columns=False)
        trainer = Trainer(model=model, args=args, train_dataset=blocks["train"], data_collator=collate,
                          callbacks=[Hook()])
        model.to(a.device)
        peak = Peak(a.device)
        out_ = trainer.train()
    from nbkit.models.flops import causal_flops_per_token

    return with_mfu({**clock.summary(a.batch * a.block), **peak.stop(), "precision": "bf16" if bf16 else "fp32",
                     "train_loss": out_.training_loss, "model_class": type(model).__name__,
                     "n_parameters": sum(p.numel() for p in model.parameters())},
                    causal_flops_per_token(model.config, a.block), a.device)


def prepare(a) -> None:
    """The store of training reviews (``a.store``), prepared once with the recipe's tokenizer."""
    from nbkit.data.corpora import load_sentiment
    from nbkit.recipes import pretraining as pt

    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    texts = work / "reviews_train.txt"
    if not texts.is_file():
        train = load_sentiment(seed=0).splits["train"]["text"]
        texts.write_text("".join(t.replace("\n", " ") + "\n" for t in train), encoding="utf-8")
    a.store = str(texts)
    a.store = str(pt.data(recipe(a)).store)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt2-narrow", help="causal preset (nbkit.models.causal.PRESETS)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per arm")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2, help="arms alternate, in rotating order")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu, cuda, or auto")
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--work", default="runs/bench_causal")
    ap.add_argument("--out", default=None)
    ap.add_argument("--machine", default=None, help='recorded as the machine, e.g. "2-core CPU shared with 6 others"')
    ap.add_argument("--arm", choices=("nbkit", "trainer"), default=None, help=argparse.SUPPRESS)
    ap.add_argument("--store", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--result", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(a.threads)
    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    from nbkit import jsonio

    if a.arm:                                   # a child: one arm, its result as JSON
        jsonio.write_json(a.result, (arm_nbkit if a.arm == "nbkit" else arm_trainer)(a))
        return
    prepare(a)
    common = ["--model", a.model, "--steps", str(a.steps), "--warmup", str(a.warmup), "--batch", str(a.batch),
              "--block", str(a.block), "--threads", str(a.threads), "--device", a.device, "--precision", a.precision,
              "--store", a.store]
    runs = alternate(__file__, common, a.rounds)
    med, ratios = compare(runs)
    from nbkit.models.causal import PRESETS

    out = a.out or str(ROOT / "bench" / "results" / f"causal_vs_trainer_{a.device}_{time.strftime('%Y-%m-%d')}.json")
    jsonio.write_json(out, {
        "what": "causal (GPT-style) pretraining of the same GPT2LMHeadModel: nbkit Loop (CausalCollator) vs "
                "transformers.Trainer (DataCollatorForLanguageModeling(mlm=False)), same store blocks, batch, lr, "
                "precision",
        "model": a.model, "preset": PRESETS.get(a.model), "device": a.device, "threads": a.threads,
        "batch": a.batch, "block": a.block, "tokens_per_step": a.batch * a.block, "warmup_steps": a.warmup,
        "timed_steps": a.steps, "rounds": a.rounds, "runs": runs, "median": med, "ratio_nbkit_over_trainer": ratios,
        "machine": a.machine or f"{os.cpu_count()} CPUs", "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
