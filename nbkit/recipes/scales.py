"""Every default that depends on the scale, for every recipe, in one table: ``(smoke, cpu, gpu)`` per setting.

- ``smoke``: CI; all notebooks in under 3 minutes on 2 cores, every code path, tiny model and data.
- ``cpu``: meaningful results on a 2-core laptop, all notebooks in under 15 minutes.
- ``gpu``: the cpu recipe with more of everything in bf16, sized for the ~1 M tokens of in-domain
  review text (docs/pretraining.md: a bigger model only memorises them).

A recipe config takes a setting from its row here (``RecipeConfig.for_scale``); settings not listed are
the recipe's constants. Plain data: importing this module imports nothing.
"""
from __future__ import annotations

MODEL = ("tiny", "narrow", "mini")   # BERT preset (nbkit.models.bert.PRESETS): L2/H64, L4/H128, L4/H256
VOCAB_SIZE = (2000, 8000, 8000)      # WordPiece target vocabulary
BLOCK_SIZE = (64, 64, 128)           # tokens per MLM block, [CLS]/[SEP] included
MAX_LENGTH = (64, 64, 128)           # tokens per review for fine-tuning (median ~50 characters, p95 ~190)

#: recipe -> setting -> (smoke, cpu, gpu)
PER_SCALE: dict[str, dict[str, tuple]] = {
    "tokenizer": {
        "corpus_lines":     (1500, None, None),      # People's Daily lines (None: all 19,484)
        "vocab_size":       VOCAB_SIZE,
        "model":            MODEL,                    # its position table sets model_max_length
    },
    # cpu: domain-adaptive MLM on the training reviews, L4/H128, 1,000 x 64 x 64 = 4.1 M tokens;
    # gpu: L4/H256, 3,000 x 128 x 128 = 49 M tokens (docs/pretraining.md).
    "pretraining": {
        "model":            MODEL,
        "block_size":       BLOCK_SIZE,
        "batch_size":       (16, 64, 128),
        "max_steps":        (30, 1000, 3000),
        "eval_every":       (15, 250, 500),
        "patience":         (None, None, 3),
        "mix":              ((("peoples_daily", 1.0), ("reviews", 1.0)),   # both source code paths, tiny
                             (("reviews", 1.0),), (("reviews", 1.0),)),
        "corpus_lines":     (1500, None, None),
        "max_train":        (800, None, None),
        "num_workers":      (0, 0, 4),
    },
    # continued pretraining of a published checkpoint (PretrainConfig.init): the model is the checkpoint's
    # (BERT-base for bert-base-chinese: ~130 tokens/s on 2 cores, bench/results/continued_pretraining_cpu_*)
    "pretraining/init": {
        "block_size":       (64, 128, 128),
        "batch_size":       (8, 8, 64),
        "max_steps":        (6, 60, 2000),
        "eval_every":       (3, 20, 250),
        "eval_blocks":      (64, 128, 4096),
    },
    # causal (GPT-style) pretraining, PretrainConfig(objective="causal"): GPT-2 at the BERT presets' sizes
    # (nbkit.models.causal.PRESETS); the rest as MLM's rows (the same blocks and batches). cpu: 850 steps at lr 2e-3
    # without dropout train in ~7 min on 2 cores (8,300 tokens/s; dropout 0.1 ran 6,800) to held-out perplexity
    # 70.3, where 700 steps at lr 1e-3 / 2e-3 with dropout 0.1 reached 101.8 / 89.9 (the bigram: 89.4; seed 0,
    # 2026-12-03, /tmp pilots of bench/causal_seeds.py); nanoGPT pretrains without dropout too
    "pretraining/causal": {
        "model":            ("gpt2-tiny", "gpt2-narrow", "gpt2-mini"),
        "max_steps":        (30, 850, 3000),
        "lr":               (1e-3, 2e-3, 1e-3),
        "dropout":          (None, 0.0, None),
    },
    "finetuning": {
        "model":            MODEL,                    # used only without a pretrained encoder
        "max_length":       MAX_LENGTH,
        "epochs":           (1.0, 2.0, 2.0),
        "lr":               (1e-3, 5e-4, 5e-4),
        "max_train":        (800, None, None),
        "num_workers":      (0, 0, 4),
    },
    # the news task (nbkit[news]): long documents (median ~730 characters), 5,284 training documents
    "finetuning/news": {
        "max_length":       (64, 128, 256),
        "epochs":           (1.0, 1.0, 2.0),
        "max_train":        (300, None, None),
    },
    # named entities (task ner): People's Daily 1998 as character BIO, sentences of ~20-60 characters and a
    # long tail windowed at max_length; smoke reads 600 lines and windows at 32 tokens (every code path), cpu
    # 8,000 of the 19,484 (~18,000 sentences: validation and test ~1,800 each, scored in seconds)
    # cpu: the transformer sits on the all-O plateau (the prior's 0.372 nats) for ~2 epochs whatever its encoder;
    # on the validation split (3,000 sentences, batch 16, 6 epochs, 1,147 steps, ~2-3 min on 2 cores) lr 1e-3 with
    # warm-up and linear decay gives 0.28 from random weights, 0.26 from notebook 02's encoder; 5e-4 is slower and
    # 2e-3 constant at batch 32 never leaves the plateau (docs/ner.md, bench/results/ner_diagnosis_cpu_2026-12-05.json)
    "finetuning/ner": {
        "max_length":       (32, 128, 256),
        "stride":           (8, 32, 64),
        "epochs":           (1.0, 6.0, 3.0),
        "lr":               (1e-3, 1e-3, 5e-4),
        "batch_size":       (32, 16, 32),
        "max_train":        (200, 3000, None),
        "corpus_lines":     (600, 8000, None),
        "n_boot":           (100, 1000, 1000),
    },
    "profiling": {
        "model":            MODEL,
        "vocab_size":       VOCAB_SIZE,
        "profile_steps":    (2, 5, 10),
        "bench_sizes":      ((64, 128), (256, 512, 1024), (1024, 2048, 4096, 8192)),
        "seq_len":          (32, 64, 128),
        "batch_size":       (4, 8, 128),
        "timing_steps":     (2, 3, 10),
        "warmup_steps":     (1, 2, 2),
        "sdpa_batch":       (1, 1, 32),
        "sdpa_heads":       (2, 2, 12),
        "h2d_mib":          (8, 8, 256),
        "worker_values":    ((0, 1), (0, 2), (0, 2, 4)),
        "compile_values":   ((False,), (False, True), (False, True)),   # smoke: unit tests cover compile
    },
    "own_data": {
        "model":            MODEL,
        "max_length":       MAX_LENGTH,
        "block_size":       BLOCK_SIZE,
        "vocab_size":       VOCAB_SIZE,
    },
}
