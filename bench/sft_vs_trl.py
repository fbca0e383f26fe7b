"""Benchmark: nbkit's SFT (``PretrainConfig(objective="sft")``) against TRL's ``SFTTrainer`` with
``assistant_only_loss=True``, and nbkit's SFT with LoRA against full SFT.

The setup, shared by every arm: the recipe's stages with ``objective="sft"`` at scale ``cpu`` (the runs folder
``--work``/runs, so notebook 01's tokenizer is trained there once and no notebook 06 model is found): the tokenizer
(nbkit's WordPiece with its chat template and four added role markers, :func:`nbkit.text.chat.with_chat_template`),
the model (``GPT2LMHeadModel`` of preset ``--model`` built from config, weights from the seed: the speed and memory
of a step do not depend on them), the conversations (the demo set of :mod:`nbkit.data.instruct`, those that fit
``--block`` tokens, written once as an OpenAI-``messages`` JSON-lines file that every arm reads as the recipe's
``corpus``, ``eval_fraction`` of it held out), batch, lr, warm-up, weight decay, AdamW, clipping 1.0, fp32, steps.

- ``nbkit``: :func:`nbkit.recipes.pretraining.blocks` / ``collator`` / ``train_config`` and ``nbkit.train.Loop``
  (one conversation per row padded to the batch's longest, labels on the assistant's tokens, the loop's
  cross-entropy fused with the output layer);
- ``trl``: ``trl.SFTTrainer`` given the same conversations as ``messages`` (it encodes them with the same template:
  the same ids and assistant mask), ``SFTConfig(assistant_only_loss=True, packing=False, max_length=--block)``, as
  a TRL user runs it; before training, its collator's labels on 4 conversations are checked against nbkit's;
- ``lora``: the ``nbkit`` arm with ``lora=True`` (``nbkit.models.lora.apply_lora``: rank ``--rank``, alpha 2 x rank,
  every attention projection).

Each arm runs in its own process (so peak memory is its own), in the order nbkit, trl, lora in odd rounds and
reversed in even ones (A B B A). Measured: tokens/s = the non-padding tokens (``attention_mask`` ones, prompt and
answer) of the timed steps' batches over those steps' wall time, after ``--warmup`` steps (also padded and label
tokens/s); peak RSS (``/proc/self/statm`` every 20 ms, ``Peak`` of ``bench/continued_pretraining.py``) and its
rise over the RSS with the model built; trainable parameters; the held-out loss on the assistant's tokens of the
validation conversations before and after training, computed the same way for every arm. Timings on a CPU shared
with other jobs are noisy: read the per-round ratios beside the medians.

    OMP_NUM_THREADS=1 python bench/sft_vs_trl.py          # gpt2-narrow, 2 rounds, about 5 minutes on 2 shared cores
    python bench/sft_vs_trl.py --device cuda --model gpt2-small --batch 32 --rounds 1   # bf16; CUDA peak memory too

Writes ``--out`` (strict JSON through ``nbkit.jsonio``, default ``bench/results/sft_vs_trl_<device>_<date>.json``),
which ``scripts/sft_bench_table.py`` renders into docs/instruct.md.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from continued_pretraining import Peak, StepClock, device_and_precision  # noqa: E402

ARMS = ("nbkit", "trl", "lora")
KEYS = ("tokens_per_s", "padded_tokens_per_s", "label_tokens_per_s", "peak_rss_mib", "rss_rise_mib",
        "trainable_parameters", "eval_loss", "untrained_eval_loss", "seconds_in_process")
CUDA_KEYS = ("cuda_peak_mib", "cuda_rise_mib")   # on a GPU: torch.cuda.max_memory_allocated, and its rise


def recipe(a, **kw):
    """The SFT config every arm reads its settings from (``--data`` as its corpus)."""
    from nbkit.recipes.pretraining import PretrainConfig

    return PretrainConfig.for_scale("cpu", objective="sft", model=a.model, corpus=a.data, block_size=a.block,
                                    batch_size=a.batch, max_steps=a.warmup + a.steps, eval_fraction=a.eval_fraction,
                                    precision=a.precision, progress=False, num_workers=0, report_to="none", **kw)


class Counting:
    """A collate function that records each batch's non-padding, padded and label token counts, in order, after
    the first ``skip`` calls (a check's batches, no training step's)."""

    def __init__(self, collate, skip: int = 0):
        self.collate, self.counts, self.skip = collate, [], skip

    def __call__(self, examples):
        batch = self.collate(examples)
        if self.skip:
            self.skip -= 1
            return batch
        self.counts.append((int(batch["attention_mask"].sum()), batch["input_ids"].numel(),
                            int((batch["labels"] != -100).sum())))
        return batch

    def rates(self, clock: StepClock, warmup: int, steps: int) -> dict:
        """Tokens per second of the timed steps (the batches ``warmup .. warmup + steps - 1``, one per step)."""
        timed = self.counts[warmup:warmup + steps]
        wall = clock.marks[-1] - clock.marks[0]
        real, padded, labels = (sum(c[i] for c in timed) for i in range(3))
        return {"tokens_per_s": real / wall, "padded_tokens_per_s": padded / wall, "label_tokens_per_s": labels / wall,
                "timed_tokens": real, "timed_padded_tokens": padded, "padding_share": 1 - real / padded,
                "timed_wall_s": wall}


def held_out_loss(model, cfg, tok, dataset) -> float:
    """Mean cross-entropy (nats) over the assistant's tokens of ``dataset`` (encoded conversations), batches of
    ``cfg.batch_size`` padded by nbkit's collator, each token weighted once."""
    import torch

    from nbkit.recipes import pretraining as pt

    collate = pt.collator(cfg, tok)
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for i in range(0, len(dataset), cfg.batch_size):
            rows = [dataset[j] for j in range(i, min(i + cfg.batch_size, len(dataset)))]
            batch = {k: v.to(model.device) for k, v in collate(rows).items()}
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits  # (B, T, V)
            labels = batch["labels"]                                                                      # (B, T)
            total += float(torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(),
                                                             reduction="sum"))
            count += int((labels != -100).sum())
    model.train()
    return total / count


def _setup(a, **kw):
    """The recipe's stages: config, conversations, tokenizer (template applied), encoded splits, model."""
    from nbkit.recipes import pretraining as pt

    cfg = recipe(a, **kw)
    corpus = pt.data(cfg)
    tok = pt.tokenizer(cfg, corpus)
    blocks = pt.blocks(cfg, tok, corpus)
    return cfg, corpus, tok, blocks, pt.model(cfg, tok)


def arm_nbkit(a, lora: bool) -> dict:
    import dataclasses

    from nbkit.models.lora import trainable_parameters
    from nbkit.recipes import pretraining as pt
    from nbkit.train import Loop

    t0 = time.perf_counter()
    cfg, corpus, tok, blocks, model = _setup(a, **({"lora": True, "lora_r": a.rank, "lora_alpha": 2 * a.rank}
                                                   if lora else {}))
    untrained = held_out_loss(model, cfg, tok, blocks["validation"])
    tcfg = dataclasses.replace(pt.train_config(cfg, tempfile.mkdtemp()), output_dir=None, eval_every=None,
                               checkpoint_every=None, keep_steps=(), log_every=10**6)
    clock = StepClock(a.warmup)

    class Hook:
        def on_step_end(self, loop):
            clock.mark(loop.state.step)

    collate = Counting(pt.collator(cfg, tok), skip=1)   # fit's preflight collates one example before step 1
    loop = Loop(model, tcfg, blocks["train"], None, collate_fn=collate, callbacks=[Hook()], device=a.device)
    loop.setup()                                   # the model in the loop before the memory baseline
    peak = Peak(a.device)
    result = loop.fit()
    out = {**collate.rates(clock, a.warmup, a.steps), **peak.stop(), "median_step_s": clock.summary(1)["median_step_s"],
           **{f"{k}_parameters" if k != "share" else "trainable_share": v
              for k, v in trainable_parameters(model).items()},
           "fused_loss": loop._fused_weight is not None, "last_train_loss": result.metrics["train_loss"],
           "untrained_eval_loss": untrained, "eval_loss": held_out_loss(model, cfg, tok, blocks["validation"]),
           "model_class": type(loop.model).__name__, "n_train": len(blocks["train"])}
    return {**out, "seconds_in_process": time.perf_counter() - t0}


def arm_trl(a) -> dict:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from nbkit.models.lora import trainable_parameters
    from nbkit.recipes import pretraining as pt
    from nbkit.train.optim import warmup_steps

    t0 = time.perf_counter()
    cfg, corpus, tok, blocks, model = _setup(a)
    untrained = held_out_loss(model, cfg, tok, blocks["validation"])
    clock = StepClock(a.warmup)

    class Hook(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            clock.mark(state.global_step)

    train = Dataset.from_list([{"messages": ex["messages"]} for ex in corpus.splits["train"]])
    with tempfile.TemporaryDirectory() as out_dir:
        args = SFTConfig(output_dir=out_dir, max_steps=a.warmup + a.steps, per_device_train_batch_size=a.batch,
                         learning_rate=cfg.lr, warmup_steps=warmup_steps(a.warmup + a.steps, cfg.warmup_ratio),
                         weight_decay=cfg.weight_decay, lr_scheduler_type="linear", max_grad_norm=1.0,
                         logging_steps=10**6, save_strategy="no", report_to=[], use_cpu=a.device == "cpu",
                         bf16=a.precision == "bf16", fp16=False,
                         disable_tqdm=True, dataloader_num_workers=0, seed=cfg.seed, max_length=a.block,
                         packing=False, assistant_only_loss=True)
        trainer = SFTTrainer(model=model, args=args, train_dataset=train, processing_class=tok, callbacks=[Hook()])
        theirs = trainer.data_collator([trainer.train_dataset[i] for i in range(4)])   # TRL's encoding of the first 4
        ours = pt.collator(cfg, tok)([blocks["train"][i] for i in range(4)])           # nbkit's of the same 4
        same = theirs["input_ids"].shape == ours["input_ids"].shape and bool(
            (theirs["input_ids"] == ours["input_ids"]).all() and (theirs["labels"][:, 1:] == ours["labels"][:, :-1]).all())
        collate = Counting(trainer.data_collator)
        trainer.data_collator = collate
        peak = Peak(a.device)
        trainer.train()
    out = {**collate.rates(clock, a.warmup, a.steps), **peak.stop(), "median_step_s": clock.summary(1)["median_step_s"],
           **{f"{k}_parameters" if k != "share" else "trainable_share": v
              for k, v in trainable_parameters(model).items()},
           "labels_equal_nbkit": same, "untrained_eval_loss": untrained,
           "eval_loss": held_out_loss(model, cfg, tok, blocks["validation"]), "model_class": type(model).__name__,
           "n_train": len(trainer.train_dataset)}
    return {**out, "seconds_in_process": time.perf_counter() - t0}


def prepare(a) -> dict:
    """Write the demo conversations that fit ``a.block`` tokens under the recipe's tokenizer to ``a.data``
    (OpenAI ``messages`` JSON lines), once; train notebook 01's tokenizer in ``a.work``/runs if missing."""
    from nbkit import jsonio
    from nbkit.data.instruct import demo_conversations
    from nbkit.recipes import pretraining as pt
    from nbkit.text.chat import encode_conversations, with_chat_template

    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    a.data = str(work / f"conversations_{a.block}.jsonl")
    tok = pt.tokenizer(recipe(argparse.Namespace(**{**vars(a), "data": None})), pt.PretrainCorpus())
    with_chat_template(tok)
    splits, _ = demo_conversations(seed=0, ner_lines=a.ner_lines, max_per_task=a.per_task,
                                   max_chars=a.block // 2)
    rows = [ex["messages"] for ex in splits["train"]]
    cols, report = encode_conversations(tok, rows, a.block, overflow="drop")
    kept = [rows[i] for i in cols["index"]]
    Path(a.data).write_text("".join(jsonio.dumps({"messages": m}) + "\n" for m in kept), encoding="utf-8")
    return {"n_written": len(kept), **{k: report[k] for k in ("n_conversations", "n_dropped_too_long", "length_p50",
                                                               "length_p95")}}


def alternate(a, common: list[str]) -> dict[str, list[dict]]:
    """Every arm once per round, each in its own process: nbkit, trl, lora in odd rounds, reversed in even ones."""
    from nbkit import jsonio

    runs: dict[str, list[dict]] = {arm: [] for arm in ARMS}
    for r in range(a.rounds):
        for arm in ARMS if r % 2 == 0 else ARMS[::-1]:
            with tempfile.TemporaryDirectory() as tmp:
                res = Path(tmp) / "r.json"
                subprocess.run([sys.executable, __file__, "--arm", arm, "--result", str(res), *common], check=True,
                               cwd=ROOT)
                x = jsonio.loads_strict(res.read_text(encoding="utf-8"))
            runs[arm].append(x)
            print(f"round {r + 1} {arm:6s} {x['tokens_per_s']:8,.0f} tokens/s (non-pad; padding "
                  f"{x['padding_share']:.0%}), peak RSS {x['peak_rss_mib']:6,.0f} MiB (+{x['rss_rise_mib']:,.0f}), "
                  f"trainable {x['trainable_parameters']:,}, held-out loss {x['untrained_eval_loss']:.3f} -> "
                  f"{x['eval_loss']:.3f}, {x['seconds_in_process']:.0f} s"
                  + (f", peak CUDA {x['cuda_peak_mib']:,.0f} MiB" if "cuda_peak_mib" in x else ""), flush=True)
    return runs


def compare(runs: dict[str, list[dict]]) -> tuple[dict, dict]:
    """``(medians by arm, ratios)``: nbkit over TRL and LoRA over full nbkit, per round and of the medians."""
    keys = KEYS + tuple(k for k in CUDA_KEYS if k in runs["nbkit"][0])
    med = {arm: {k: statistics.median(x[k] for x in rs) for k in keys} for arm, rs in runs.items()}
    ratios = {}
    for name, (top, bottom) in {"nbkit_over_trl": ("nbkit", "trl"), "lora_over_full": ("lora", "nbkit")}.items():
        ratios[name] = {k: med[top][k] / med[bottom][k] for k in keys if med[bottom][k]}
        ratios[name]["tokens_per_s_per_round"] = [t["tokens_per_s"] / b["tokens_per_s"]
                                                  for t, b in zip(runs[top], runs[bottom])]
    print(f"\n{'':24s}{'nbkit':>12s}{'TRL':>12s}{'LoRA':>12s}{'nbkit/TRL':>11s}{'LoRA/full':>11s}")
    for k in keys:
        print(f"{k:24s}" + "".join(f"{med[arm][k]:12,.3f}" if "loss" in k else f"{med[arm][k]:12,.0f}"
                                   for arm in ARMS)
              + "".join(f"{ratios[n].get(k, float('nan')):11.3f}" for n in ratios))
    for n in ratios:
        print(f"{n} tokens/s per round: {', '.join(f'{v:.3f}' for v in ratios[n]['tokens_per_s_per_round'])}")
    return med, ratios


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt2-narrow", help="causal preset (nbkit.models.causal.PRESETS)")
    ap.add_argument("--steps", type=int, default=24, help="timed steps per arm")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--rank", type=int, default=8, help="LoRA r (alpha = 2 r)")
    ap.add_argument("--per-task", type=int, default=300, help="demo conversations per task")
    ap.add_argument("--ner-lines", type=int, default=4000, help="People's Daily lines the entity tasks read")
    ap.add_argument("--eval-fraction", type=float, default=0.1)
    ap.add_argument("--rounds", type=int, default=2, help="arms alternate: A B B A")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu, cuda, or auto (bf16 on a bf16 GPU, else fp32)")
    ap.add_argument("--work", default="runs/bench_sft")
    ap.add_argument("--out", default=None)
    ap.add_argument("--machine", default=None, help='recorded as the machine, e.g. "2 cores shared with 6 jobs"')
    ap.add_argument("--arm", choices=ARMS, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--data", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--result", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    os.environ["NBKIT_RUNS_DIR"] = str(Path(a.work).resolve() / "runs")   # its own tokenizer; no notebook 06 model
    import torch

    from nbkit import jsonio

    torch.set_num_threads(a.threads)
    a.device, a.precision = device_and_precision(a.device)
    if a.arm:                                   # a child: one arm, its result as JSON
        jsonio.write_json(a.result, arm_trl(a) if a.arm == "trl" else arm_nbkit(a, lora=a.arm == "lora"))
        return
    t0 = time.perf_counter()
    data = prepare(a)
    common = ["--model", a.model, "--steps", str(a.steps), "--warmup", str(a.warmup), "--batch", str(a.batch),
              "--block", str(a.block), "--rank", str(a.rank), "--eval-fraction", str(a.eval_fraction),
              "--threads", str(a.threads), "--device", a.device, "--work", a.work, "--data", a.data]
    runs = alternate(a, common)
    med, ratios = compare(runs)
    import transformers
    import trl

    out = a.out or str(ROOT / "bench" / "results" / f"sft_vs_trl_{a.device.split(':')[0]}_"
                                                      f"{time.strftime('%Y-%m-%d')}.json")
    jsonio.write_json(out, {
        "what": "SFT of the same GPT2LMHeadModel on the same conversations: nbkit (PretrainConfig(objective='sft'), "
                "its Loop) vs trl.SFTTrainer(assistant_only_loss=True, packing=False), and nbkit with lora=True",
        "model": a.model, "device": a.device, "precision": a.precision, "threads": a.threads, "batch": a.batch,
        "block": a.block, "warmup_steps": a.warmup, "timed_steps": a.steps, "rounds": a.rounds, "lora_r": a.rank,
        "lora_alpha": 2 * a.rank, "data": {**data, "per_task": a.per_task, "ner_lines": a.ner_lines,
                                           "eval_fraction": a.eval_fraction},
        "tokens_per_s": "non-padding tokens (attention_mask ones: prompt, markers and answer) of the timed steps' "
                        "batches over their wall time; padded_: every position of the padded batches; label_: the "
                        "assistant tokens that carry the loss",
        "memory": "peak RSS of each arm's own process, /proc/self/statm sampled every 20 ms; rss_rise_mib: over the "
                  "RSS with the model built (nbkit: in the loop; TRL: the trainer built); on a GPU also cuda_peak_mib "
                  "(torch.cuda.max_memory_allocated) and cuda_rise_mib over the allocation at that point",
        "eval_loss": "cross-entropy on the assistant tokens of the held-out conversations, computed the same way "
                     "for every arm (untrained_: before the first step); the model starts from random weights",
        "noise": "compare the per-round ratios: a shared machine's load moves both arms of a round alike",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__},
        "runs": runs, "median": med, "ratios": ratios, "seconds": time.perf_counter() - t0,
        "machine": a.machine or f"{os.cpu_count()} CPUs", "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    print(f"wrote {out} ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
