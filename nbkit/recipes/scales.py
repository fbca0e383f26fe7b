"""Every recipe default that has a reason, beside its reason, in one place: ``(smoke, cpu, gpu)`` per setting
where it depends on the scale (:data:`PER_SCALE`), one value where it does not (:data:`CONSTANT`).

- ``smoke``: CI; all notebooks in under 3 minutes on 2 cores, every code path, tiny model and data.
- ``cpu``: meaningful results on a 2-core laptop, all notebooks in under 15 minutes.
- ``gpu``: the cpu recipe with more of everything in bf16, sized for the ~1 M tokens of in-domain
  review text (docs/pretraining.md: a bigger model only memorises them).

A recipe config takes a setting from its row here (``RecipeConfig.for_scale``) and shows the reason beside the
value in its table (``RecipeConfig.table``, column ``from``). An entry is ``D(value, "why")``; a plain
``(smoke, cpu, gpu)`` row is a size whose reason is the scale itself. Settings not listed are the recipe's
plain defaults (its dataclass). Plain data: importing this module imports nothing.
"""
from __future__ import annotations

from typing import Any, NamedTuple


class D(NamedTuple):
    """A default beside its reason: ``value`` is ``(smoke, cpu, gpu)`` in :data:`PER_SCALE`, one value in
    :data:`CONSTANT`; ``why`` is printed after it in the config's table."""

    value: Any
    why: str


MODEL = ("tiny", "narrow", "mini")   # BERT preset (nbkit.models.bert.PRESETS): L2/H64, L4/H128, L4/H256
VOCAB_SIZE = (2000, 8000, 8000)      # WordPiece target vocabulary
BLOCK_SIZE = (64, 64, 128)           # tokens per MLM block, [CLS]/[SEP] included
MAX_LENGTH = (64, 64, 128)           # tokens per review for fine-tuning (median ~50 characters, p95 ~190)
NER_LINES = (600, 8000, None)        # People's Daily lines notebook 07 reads: its split depends on them (SFT's too)

#: the most a LoRA run's rate reaches when ``lora_lr`` is None (10 x ``lr``, capped)
LORA_LR_CAP = D(2e-3, "LoRA trains few weights, B starting at zero, at a higher rate than full fine-tuning: Hu et al. "
                      "(2021, table 9) use 4e-4-5e-4 on RoBERTa-base, fine-tuned in full at 1e-5-3e-5; at most 2e-3, "
                      "since 10 x the small presets' 5e-4 stays at chance (docs/finetuning.md)")

#: recipe -> setting -> ``(smoke, cpu, gpu)`` or ``D((smoke, cpu, gpu), "why")``
PER_SCALE: dict[str, dict[str, tuple]] = {
    "tokenizer": {
        "corpus_lines":     (1500, None, None),      # People's Daily lines (None: all 19,484)
        "vocab_size":       VOCAB_SIZE,
        "model":            MODEL,                    # its position table sets model_max_length
    },
    "pretraining": {
        "model":            MODEL,
        "block_size":       BLOCK_SIZE,
        "batch_size":       (16, 64, 128),
        "max_steps":        D((30, 1000, 3000),
                              "cpu: domain-adaptive MLM on the training reviews, L4/H128, 1,000 x 64 x 64 = 4.1 M "
                              "tokens; gpu: L4/H256, 3,000 x 128 x 128 = 49 M tokens (docs/pretraining.md)"),
        "eval_every":       (15, 250, 500),
        "patience":         (None, None, 3),
        "mix":              D(((("peoples_daily", 1.0), ("reviews", 1.0)), (("reviews", 1.0),), (("reviews", 1.0),)),
                              "smoke: both sources' code paths, tiny; cpu/gpu: the training reviews notebook 03 "
                              "classifies (domain-adaptive pretraining, Gururangan et al. 2020)"),
        "corpus_lines":     (1500, None, None),
        "max_train":        (800, None, None),
        "num_workers":      (0, 0, 4),
    },
    # continued pretraining of a published checkpoint (PretrainConfig.init): the model is the checkpoint's
    # (BERT-base for bert-base-chinese); its constants (lr, warm-up) are CONSTANT["pretraining/init"]
    "pretraining/init": {
        "block_size":       D((64, 128, 128), "cpu/gpu: 128, the first phase of Chinese BERT-wwm's pretraining "
                                              "(Cui et al. 2020); at most the checkpoint's positions"),
        "batch_size":       D((8, 8, 64), "BERT-base trains ~130 tokens/s on 2 cores "
                                          "(bench/continued_pretraining.py): 8 blocks a step on a CPU, 64 on a GPU"),
        "max_steps":        D((6, 60, 2000), "cpu: a taste, ~8 minutes of BERT-base on 2 cores; gpu: 16 M tokens, "
                                             "~16 passes over the training reviews (task-adaptive pretraining ran "
                                             "100, Gururangan et al. 2020)"),
        "eval_every":       D((3, 20, 250), "about 3 evaluations per cpu run, 8 per gpu run"),
        "eval_blocks":      D((64, 128, 4096), "cpu: 128 held-out blocks, a BERT-base evaluation in well under a "
                                               "minute on 2 cores"),
    },
    # causal (GPT-style) pretraining, PretrainConfig(objective="causal"): GPT-2 at the BERT presets' sizes
    # (nbkit.models.causal.PRESETS); the rest as MLM's rows (the same blocks and batches)
    "pretraining/causal": {
        "model":            ("gpt2-tiny", "gpt2-narrow", "gpt2-mini"),
        "max_steps":        D((30, 1300, 3000), "cpu: 1,300 steps (5.3 M tokens, ~8.5 min alone on 2 cores): the "
                                                "learning curves of 3 seeds put the GPT below the trigram in every "
                                                "seed from 4.87 M tokens; 850 steps ended above it "
                                                "(docs/pretraining.md)"),
        "lr":               D((1e-3, 2e-3, 1e-3), "cpu: 2e-3; 700 steps at 1e-3 / 2e-3 with dropout 0.1 reached "
                                                  "perplexity 101.8 / 89.9 (pilots of bench/causal_seeds.py)"),
        "dropout":          D((None, 0.0, None), "cpu: none, as nanoGPT pretrains; dropout 0.1 ran 6,800 tokens/s "
                                                 "against 8,300 on 2 cores; None: the preset's 0.1"),
    },
    # supervised fine-tuning on conversations, PretrainConfig(objective="sft"): notebook 06's model at its positions
    "pretraining/sft": {
        "model":            ("gpt2-tiny", "gpt2-narrow", "gpt2-mini"),
        "corpus_lines":     D(NER_LINES, "notebook 07's lines: its split, so none of its test sentences is trained on"),
        "max_train":        D((24, 2000, None), "conversations per demo task (None: all of its training split)"),
        "batch_size":       (8, 16, 64),
        "max_steps":        D((10, 400, 2000), "cpu: a taste on 2 cores, untuned; gpu: untuned, several passes"),
        "eval_every":       (5, 100, 250),
        "lr":               D((5e-4, 5e-4, 1e-4), "a started model: below pretraining's 1e-3 / 2e-3, untuned"),
        "dropout":          (None, 0.0, None),
        "eval_blocks":      (64, 512, 2048),
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
    # long tail windowed at max_length
    "finetuning/ner": {
        "max_length":       (32, 128, 256),
        "stride":           (8, 32, 64),
        "epochs":           D((1.0, 6.0, 3.0), "cpu: the transformer sits on the all-O plateau (the prior's 0.372 "
                                               "nats) for ~2 epochs whatever its encoder; 6 leave it behind (docs/ner.md)"),
        "lr":               D((1e-3, 1e-3, 5e-4), "cpu: 1e-3 with warm-up and linear decay reaches validation entity "
                                                  "F1 0.28 from random weights, 0.26 from notebook 02's encoder; "
                                                  "5e-4 is slower, 2e-3 never leaves the plateau "
                                                  "(bench/results/ner_diagnosis_cpu_*)"),
        "batch_size":       D((32, 16, 32), "cpu: 16, 1,147 steps in 6 epochs of 3,000 sentences (~2-3 min on 2 "
                                            "cores); batch 32 at 2e-3 never left the plateau"),
        "max_train":        (200, 3000, None),
        "corpus_lines":     D(NER_LINES, "smoke: every code path, windows of 32 tokens; cpu: 8,000 of the "
                                                 "19,484 lines (~18,000 sentences: validation and test ~1,800 each, "
                                                 "scored in seconds)"),
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
        "compile_values":   D(((False,), (False, True), (False, True)), "smoke: off, the unit tests cover compile"),
    },
    "own_data": {
        "model":            MODEL,
        "max_length":       MAX_LENGTH,
        "block_size":       BLOCK_SIZE,
        "vocab_size":       VOCAB_SIZE,
    },
}

#: recipe -> setting -> ``D(value, "why")``: the defaults that are the same at every scale. A group named after
#: a recipe (``pretraining``) holds its dataclass fields' defaults (:func:`constant`); a group after a context
#: (``pretraining/init``: init is set; ``finetuning/news``: task news; ``finetuning/base``: a BERT-base-sized
#: encoder) goes on top of the scale's values, as its PER_SCALE rows do.
CONSTANT: dict[str, dict[str, D]] = {
    "pretraining": {
        "lr":                 D(1e-3, "1e-3 for the small presets (docs/pretraining.md; base needs 1e-4, size_run)"),
        "warmup_ratio":       D(0.06, "6 %, RoBERTa's pretraining warm-up (fine-tuning warms up 10 %)"),
        "keep_last":          D(2, "2: the newest and one before it, in case the newest is from a diverging run"),
        "mlm_probability":    D(0.15, "15 %, BERT's (Devlin et al. 2019)"),
        "eval_blocks":        D(4096, "4,096: scoring 55,000 held-out blocks of a 2 GB corpus took most of a smoke "
                                      "run"),
        "checkpoint_minutes": D(10.0, "10: a Ctrl-C or a crash loses at most this much (Ctrl-C also saves at the "
                                      "step)"),
        "progress_every_s":   D(30.0, "30: a headless log shows the run without flooding a notebook cell"),
    },
    "pretraining/init": {
        "lr":                 D(5e-5, "5e-5 continues a published BERT-base without undoing it (run_mlm.py's default; "
                                      "Cui et al. 2020 continued Google's Chinese BERT at 1e-4 with batch 2,560); "
                                      "1e-3, the small presets' rate, wrecks it"),
        "warmup_ratio":       D(0.06, "6 %, as Gururangan et al. 2020 warm up task-adaptive pretraining"),
    },
    "finetuning": {
        "batch_size":         D(32, "32, BERT's fine-tuning batch (Devlin et al. 2019)"),
        "pooling":            D(None, "None chooses per encoder, the reason printed: cls when it carries a trained "
                                      "pooler and nbkit's MLM recipe did not save it (a published BERT), else mean "
                                      "(MLM-only pretraining leaves the [CLS] pooler untrained)"),
        "warmup_ratio":       D(0.1, "10 %, BERT's fine-tuning warm-up (pretraining warms up 6 %)"),
        "keep_last":          D(1, "1: a fine-tuning run is short; its result is metrics.json"),
    },
    "finetuning/news": {
        "class_weights":      D("balanced", "news is ~10/50/40 %: unweighted, the loss all but ignores the positive "
                                            "class (bench/results/pretrain_value_news vs _balanced)"),
        "eval_every":         D(0, "0: no mid-run evaluation of the long documents (time)"),
    },
    "finetuning/base": {
        "lr":                 D(2e-5, "2e-5 for a BERT-base-sized encoder: the rate bert-base-chinese, RoBERTa-wwm-ext "
                                      "and MacBERT were fine-tuned with on ChnSentiCorp (Cui et al. 2020); the small "
                                      "presets' 5e-4 breaks BERT-base"),
    },
    "own_data": {
        "max_passes":         D(10.0, "10: a small corpus read hundreds of times is memorised"),
    },
}


def constant(recipe: str, name: str):
    """``CONSTANT[recipe][name]``'s value: a config field's default, written here beside its reason."""
    return CONSTANT[recipe][name].value
