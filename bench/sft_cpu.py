"""Benchmark: supervised fine-tuning (``PretrainConfig(objective="sft")``) scored before and after, beside the
classical baselines, on the demo instructions' held-out questions.

The run, at ``--scale`` (the recipe's rows ``pretraining/sft``; ``--max-steps`` overrides its steps):

1. the causal LM SFT starts from: notebook 06's model at this scale (``runs/<scale>/causal/model``), trained first
   through the recipe (``run_pretraining`` with ``objective="causal"`` at the scale's values) when it is missing;
2. the demo conversations (notebook 03's review split, notebook 07's People's Daily split), the first
   ``--per-task`` held-out questions of each task that fit the context;
3. the model before SFT: the loop's held-out loss on the assistant's tokens (``untrained_eval_loss``) and its
   greedy answers scored (:func:`nbkit.evaluate.instruct.score_answers`: sentiment accuracy, set-based micro F1 of
   the listed person / place names, the share of answers in the expected form, 95 % percentile-bootstrap intervals
   over the questions);
4. SFT through the recipe's stages (same loop, checkpoints, export), then the same scores after;
5. the baselines on the same questions and the same metric: TF-IDF + logistic regression fit on the reviews SFT
   trained on, a CRF fit on the sentences SFT trained on (:func:`nbkit.evaluate.instruct.baseline_answers`), and
   notebook 03's fine-tuned BERT when its run folder at this scale holds a model (else its recorded test accuracy
   over the whole test split, of which the demo's held-out reviews are a subset).

    OMP_NUM_THREADS=1 NBKIT_RUNS_DIR=/tmp/runs python bench/sft_cpu.py --scale cpu --machine "2 cores, shared"

Writes ``--out`` (strict JSON through ``nbkit.jsonio``; default ``bench/results/sft_<scale>_<date>.json``), which
``scripts/sft_table.py`` renders into docs/instruct.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def causal_model(scale: str) -> tuple[Path, dict | None]:
    """Notebook 06's model folder at ``scale``, and the pretraining run's summary when it was trained now."""
    from nbkit.objectives.sft import default_init
    from nbkit.recipes import pretraining as pt

    found = default_init(scale)
    if found is not None:
        return found, None
    cfg = pt.PretrainConfig.for_scale(scale, objective="causal", progress=False, report_to="none")
    t0 = time.perf_counter()
    metrics = pt.run_pretraining(cfg)
    keep = ("model", "steps", "train_tokens", "eval_loss", "eval_perplexity", "tokens_per_s", "device")
    return Path(metrics["model_dir"]), {**{k: metrics.get(k) for k in keep}, "wall_s": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="cpu", choices=("smoke", "cpu", "gpu"))
    ap.add_argument("--max-steps", type=int, default=None, help="SFT steps (default: the scale's)")
    ap.add_argument("--per-task", type=int, default=100, help="held-out questions scored per task")
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--machine", default=None, help='recorded as the machine, e.g. "2 cores shared with 6 jobs"')
    ap.add_argument("--bert-run", default=None,
                    help="notebook 03's run folder (default: runs/<scale>/sentiment): its model/ scores the same "
                         "reviews; without one, its metrics.json's test accuracy (the whole test split) is recorded")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    import torch

    from nbkit import jsonio
    from nbkit.data.ner import load_peoples_daily_ner
    from nbkit.evaluate import instruct as ev
    from nbkit.recipes import pretraining as pt
    from nbkit.runs import step_path

    t_start = time.perf_counter()
    init, pretrained = causal_model(a.scale)
    cfg = pt.PretrainConfig.for_scale(a.scale, objective="sft", max_steps=a.max_steps, progress=False,
                                      report_to="none")
    out_dir = cfg.run_dir()
    corpus = pt.data(cfg)
    tok = pt.tokenizer(cfg, corpus)
    blocks = pt.blocks(cfg, tok, corpus)
    model = pt.model(cfg, tok)
    test = ev.fitting_examples(tok, corpus.splits["test"], cfg.block_size, a.per_task)
    scored, answers, unfinished = {}, {}, {}
    answers["before SFT"], unfinished["before SFT"] = ev.generate_answers(model, tok, test, a.max_new_tokens)
    t0 = time.perf_counter()
    loop, result = pt.train(cfg, model, tok, blocks, out_dir)
    train_s = time.perf_counter() - t0
    answers["after SFT"], unfinished["after SFT"] = ev.generate_answers(loop.model, tok, test, a.max_new_tokens)
    summary = pt.save(cfg, out_dir, loop, result, tok)
    ner = load_peoples_daily_ner(lines=cfg.corpus_lines, seed=cfg.split_seed)
    answers["TF-IDF / CRF"] = ev.baseline_answers(test, corpus.splits["train"], ner.splits["train"])
    bert_run = Path(a.bert_run) if a.bert_run else step_path(a.scale, "sentiment")
    bert = bert_run / "model"
    sentiment = [ex for ex in test if ex["task"] == "sentiment"]
    for name, said in answers.items():
        scored[name] = ev.score_answers(test, said)
    if (bert / "config.json").is_file():
        scored["notebook 03's BERT"] = ev.score_answers(sentiment, ev.classifier_answers(bert, sentiment))
    out = Path(a.out or ROOT / "bench" / "results" / f"sft_{a.scale}_{time.strftime('%Y-%m-%d')}.json")
    jsonio.write_json(out, {
        "scale": a.scale, "init": str(init), "pretrained_now": pretrained,
        "steps": summary["steps"], "train_tokens": summary["train_tokens"], "tokens_per_s": summary["tokens_per_s"],
        "train_s": train_s, "model": summary["model"], "parameters": summary["parameters"],
        "eval_loss_before": result.metrics["untrained_eval_loss"], "eval_loss_after": summary["eval_loss"],
        "n_test": {t: sum(ex["task"] == t for ex in test) for t in dict.fromkeys(ex["task"] for ex in test)},
        "max_new_tokens": a.max_new_tokens, "unfinished": unfinished, "rows": ev.comparison_rows(scored),
        "bert_model": str(bert) if "notebook 03's BERT" in scored else None,
        "bert_whole_test": ev.classifier_summary(bert_run),
        "examples": [{"question": test[i]["messages"][0]["content"], "gold": test[i]["messages"][1]["content"],
                      **{k: v[i] for k, v in answers.items()}} for i in range(0, len(test), max(1, len(test) // 6))],
        "data": corpus.report, "config": cfg.to_dict(), "device": str(summary["device"]),
        "torch_threads": torch.get_num_threads(), "wall_s": time.perf_counter() - t_start,
        "machine": a.machine or f"{os.cpu_count()} CPUs", "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    print(f"-> {out}")


if __name__ == "__main__":
    main()
