"""The pretraining recipe: corpus -> tokenizer -> MLM blocks -> BERT -> training loop -> saved model.

The one pretraining driver in nbkit: notebook 02 calls the stages cell by cell, notebook 05 on the
user's text, ``python -m nbkit.jobs.pretrain`` and ``bench/pretrain_value.py`` call
:func:`run_pretraining` with overrides of :class:`PretrainConfig`::

    cfg = PretrainConfig.for_scale("cpu")                   # every decision, printed as a table
    out_dir = run_dir(cfg)                                  # runs/cpu/mlm[-<store>][-<overrides>]
    source, what_went_in = corpus(cfg)                      # the mix (or cfg.corpus's store)
    tok = tokenizer(cfg, source)                            # notebook 01's (or the store's)
    cfg, plan = size(cfg, source)                           # a store: the run sized for its tokens
    data = blocks(cfg, tok, source)                         # {"train", "validation"} MLM blocks
    bert = model(cfg, tok)                                  # random weights of cfg.model
    lp = loop(cfg, bert, tok, data, out_dir)                # nbkit.train.Loop, collator, checkpoints
    result = fit(cfg, lp)                                   # untrained eval, then train
    summary = save(cfg, lp, result, tok, out_dir)           # out_dir/model + metrics.json

Checkpoints: the loop's layout ``out_dir/checkpoints/step-000500/`` (``model/`` loads with
``from_pretrained``; :func:`model_dir_at`); ``save_steps`` keeps those steps' checkpoints.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from nbkit import jsonio
from nbkit.recipes.config import RecipeConfig

__all__ = ["PretrainConfig", "corpus", "is_store", "run_dir", "store_dir", "tokenizer", "size", "blocks", "model", "collator", "train_config",
           "loop", "fit", "save", "model_dir_at", "run_pretraining"]


def model(cfg: PretrainConfig, tok):
    """A ``BertForMaskedLM`` of preset ``cfg.model`` (sparse MLM head) with ``tok``'s vocabulary and
    ``cfg.block_size`` positions, weights drawn from ``cfg.seed`` (the same on every rank)."""
    import torch

    from nbkit.models.bert import build_mlm_model

    torch.manual_seed(cfg.seed)
    drop = {} if cfg.dropout is None else {"hidden_dropout_prob": cfg.dropout,
                                           "attention_probs_dropout_prob": cfg.dropout}
    return build_mlm_model(cfg.model, tok, cfg.block_size, seed=cfg.seed, **drop)


def collator(cfg: PretrainConfig, tok):
    """:class:`nbkit.text.mlm.MLMCollator`: ``cfg.mlm_probability`` of the tokens as targets (80/10/10),
    whole words with ``cfg.whole_word``; padding and special tokens never chosen."""
    from nbkit.text.mlm import MLMCollator

    return MLMCollator(tok, mlm_probability=cfg.mlm_probability, whole_word=cfg.whole_word)


def train_config(cfg: PretrainConfig, out_dir, n_blocks: int | None = None, save_steps=(), world_size: int = 1):
    """The loop's :class:`nbkit.train.config.TrainConfig`.

    ``cfg.max_passes`` with ``n_blocks`` (training blocks) caps the steps at that many passes (a small
    corpus is not read hundreds of times; evaluations shrink to >= 4 per run), counted at the global
    batch ``batch_size * grad_accum_steps * world_size`` (:func:`loop` passes torchrun's world size). ``save_steps``: the
    checkpoint interval becomes their greatest common divisor with ``checkpoint_every`` and all are
    kept until :func:`fit` prunes the others.

    Raises:
        ConfigError: a save step outside ``1..max_steps``.
    """
    from nbkit.errors import ConfigError
    from nbkit.recipes.tokenizer import steps_for_epochs
    from nbkit.train import TrainConfig

    steps, every = cfg.max_steps, cfg.eval_every
    if n_blocks and cfg.max_passes:
        steps = min(steps, steps_for_epochs(n_blocks, cfg.batch_size * cfg.grad_accum_steps * world_size,
                                                  cfg.max_passes))
        every = max(1, min(every, steps // 4))
    ckpt = every if cfg.checkpoint_every is None else (cfg.checkpoint_every or None)
    bad = [s for s in save_steps if not 1 <= int(s) <= steps]
    if bad:
        raise ConfigError(f"save_steps {bad} outside 1..{steps} (max_steps): raise max_steps or drop those steps")
    if save_steps:
        ckpt = math.gcd(*(int(s) for s in save_steps), *([ckpt] if ckpt else []))
    return TrainConfig(max_steps=steps, batch_size=cfg.batch_size, grad_accum_steps=cfg.grad_accum_steps,
                       lr=cfg.lr, warmup_ratio=cfg.warmup_ratio, scheduler=cfg.schedule,
                       weight_decay=cfg.weight_decay, precision=cfg.precision, eval_every=every,
                       checkpoint_every=ckpt, keep_last=0 if save_steps else cfg.keep_last,
                       output_dir=Path(out_dir), seed=cfg.seed, num_workers=cfg.num_workers,
                       log_every=cfg.log_every or max(1, min(10, steps // 20)), resume=cfg.resume,
                       eval_batches=-(-cfg.eval_blocks // cfg.batch_size) if cfg.eval_blocks else None,
                       progress=cfg.progress)


def loop(cfg: PretrainConfig, bert, tok, data: dict, out_dir, callbacks=(), save_steps=(), device=None):
    """A :class:`nbkit.train.Loop` over ``data["train"]`` (held-out loss on ``data["validation"]``), with
    :func:`collator`, :func:`train_config` and, when ``cfg.patience``, :class:`nbkit.train.EarlyStopping`."""
    from nbkit.train import EarlyStopping, Loop
    from nbkit.train.ddp.group import launch_world_size

    extra = [EarlyStopping(patience=cfg.patience)] if cfg.patience else []
    tcfg = train_config(cfg, out_dir, len(data["train"]), save_steps, world_size=launch_world_size())
    lp = Loop(bert, tcfg, data["train"], data["validation"],
              collate_fn=collator(cfg, tok), callbacks=[*callbacks, *extra], device=device)
    lp.save_steps = tuple(sorted(int(s) for s in save_steps))
    return lp


def fit(cfg: PretrainConfig, lp, untrained: bool = True):
    """Train ``lp`` (resuming from its checkpoints when ``cfg.resume``) and return its ``TrainResult``.

    ``untrained``: first score the held-out loss of the initial weights (``result.metrics
    ["untrained_eval_loss"]``, ``["untrained_eval_perplexity"]``). Afterwards only the checkpoints at
    the loop's ``save_steps`` and the newest are kept.
    """
    first = lp.evaluate() if untrained else {}
    result = lp.fit()
    result.metrics["untrained_eval_loss"] = first.get("eval_loss")
    result.metrics["untrained_eval_perplexity"] = first.get("eval_perplexity")
    if getattr(lp, "save_steps", ()) and lp.dist.is_main:
        from nbkit.train.checkpoint import discard_checkpoint, list_checkpoints

        for ckpt in list_checkpoints(lp.config.output_dir, warn=False)[:-1]:
            if ckpt.step not in lp.save_steps:
                discard_checkpoint(ckpt.path)
    return result


def model_dir_at(out_dir, step: int) -> Path:
    """``out_dir/checkpoints/step-NNNNNN/model``: the ``from_pretrained`` directory of one kept checkpoint
    (``build_classifier(pretrained=...)`` takes it).

    Raises:
        CheckpointError: no complete checkpoint at ``step`` (the kept steps are named).
    """
    from nbkit.errors import CheckpointError
    from nbkit.train.checkpoint import list_checkpoints

    found = {c.step: c for c in list_checkpoints(out_dir, warn=False)}
    if step not in found:
        raise CheckpointError(f"no checkpoint at step {step} in {Path(out_dir) / 'checkpoints'}; kept: "
                              f"{sorted(found) or 'none'} (pass save_steps=({step},) to run_pretraining)")
    return found[step].model_dir


def save(cfg: PretrainConfig, lp, result, tok, out_dir) -> dict:
    """Save the model + tokenizer to ``out_dir/model`` and write ``out_dir/metrics.json``; return it.

    ``out_dir/model`` loads with ``AutoModelForMaskedLM``/``AutoTokenizer.from_pretrained``; notebook
    03 starts from it; its ``tokenizer_config.json`` caps ``model_max_length`` at the model's positions (a
    store's tokenizer says 512), and the folder is written through :func:`nbkit.atomic.atomic_dir`
    (``WriteError`` on a full disk, nothing half-written). Keys: ``scale``, ``model``, ``parameters``, ``hidden_size``, ``layers``,
    ``block_size``, ``batch_size``, ``grad_accum_steps``, ``lr``, the loop's summary (``steps``,
    ``train_tokens``, ``tokens_per_s``, ``mfu``, ``device``, ``precision``, ``eval_loss``,
    ``eval_perplexity``), ``untrained_eval_loss``, ``first_eval_loss``/``first_eval_step``,
    ``model_dir``, ``checkpoints`` (step -> model dir of every kept checkpoint), ``history``
    (every log/eval entry), ``config`` (every field), ``world_size``, ``written_at``.
    """
    import time

    from nbkit import jsonio
    from nbkit.atomic import atomic_dir
    from nbkit.models.bert import count_parameters
    from nbkit.models.loading import quiet_transformers
    from nbkit.text.tokenizer_files import save_tokenizer
    from nbkit.train.checkpoint import list_checkpoints

    model_dir = Path(out_dir) / "model"
    positions = lp.model.config.max_position_embeddings
    with atomic_dir(model_dir, what="model") as tmp, quiet_transformers():   # the one write path (atomic, ENOSPC named)
        lp.model.save_pretrained(tmp)
        # a store's tokenizer says 512; this model has `positions`: truncation=True must cut there
        # (else pipeline("fill-mask") on a long text fails with a tensor-size error)
        save_tokenizer(tok, tmp, model_max_length=min(int(tok.model_max_length), positions))
    evals = [h for h in result.history if "eval_loss" in h]
    mc = lp.model.config
    metrics = {"scale": cfg.scale, "model": cfg.model, "parameters": count_parameters(lp.model),
               "hidden_size": mc.hidden_size, "layers": mc.num_hidden_layers, "block_size": cfg.block_size,
               "batch_size": lp.config.batch_size, "grad_accum_steps": lp.config.grad_accum_steps,
               "lr": lp.config.lr, **result.metrics,
               "first_eval_loss": evals[0]["eval_loss"] if evals else None,
               "first_eval_step": evals[0]["step"] if evals else None,
               "model_dir": str(model_dir),
               "checkpoints": {c.step: str(c.model_dir) for c in list_checkpoints(out_dir, warn=False)},
               "history": list(result.history), "config": cfg.to_dict(), "world_size": lp.dist.world_size,
               "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    if evals:   # the last evaluation's, also when the loop's summary lacks it
        metrics.update(eval_loss=evals[-1]["eval_loss"], eval_perplexity=evals[-1].get("eval_perplexity"))
    return jsonio.write_json(Path(out_dir) / "metrics.json", metrics)


def run_pretraining(cfg: PretrainConfig, out_dir=None, *, tokenizer=None, callbacks=(), save_steps=(),
                    labeled=None, texts=None, backend: str | None = None, corpus_wait_s: float = 6 * 3600.0,
                    device=None) -> dict:
    """Every stage end to end; returns the dict written to ``out_dir/metrics.json`` (see :func:`save`).

    ``out_dir``: None is :func:`run_dir` of ``cfg`` as given (``runs/<scale>/mlm[-<store>][-<overrides>]``,
    named before the run is sized for a store, as notebook 02 names it).
    ``tokenizer``: None loads notebook 01's (or the store's); ``save_steps``: steps whose checkpoints
    are kept (``metrics["checkpoints"]``: step -> loadable model dir); ``labeled``/``texts``: the
    labelled data and own texts for the mix (:func:`corpus`). Under torchrun every rank calls it:
    with ``cfg.corpus`` global rank 0 prepares the store before the process group forms (the others
    poll for its manifest at most ``corpus_wait_s``), rank 0 trains a missing tokenizer while the
    others wait, every rank trains, rank 0 saves (the others return the loop's summary).
    """
    from nbkit.train.ddp import group as D

    out_dir = run_dir(cfg) if out_dir is None else out_dir
    source = _store_rank0_first(cfg, corpus_wait_s) if cfg.corpus is not None else None
    info = D.init_distributed(backend)
    if source is None:
        source = _rank0_first(info, lambda: corpus(cfg, labeled, texts)[0])
    tok = tokenizer if tokenizer is not None else _rank0_first(info, lambda: _tokenizer(cfg, source))
    cfg, _ = size(cfg, source)
    lp = loop(cfg, model(cfg, tok), tok, blocks(cfg, tok, source, info.rank), out_dir, callbacks, save_steps,
              device)
    result = fit(cfg, lp)
    metrics = save(cfg, lp, result, tok, out_dir) if info.is_main else dict(result.metrics)
    D.barrier()
    return metrics


def _tokenizer(cfg, source):
    return tokenizer(cfg, source)


def _rank0_first(info, make):
    """Rank 0 makes it first (training and caching what is missing), the others after a barrier."""
    from nbkit.train.ddp import group as D

    made = make() if info.is_main else None
    D.barrier()
    return made if made is not None else make()


def _store_rank0_first(cfg: PretrainConfig, wait_s: float) -> Path:
    """Global rank 0 prepares (or checks) the store; the others poll for its manifest (no collective:
    preparing a big corpus takes longer than any process-group timeout)."""
    from nbkit.corpus.store import wait_for_store
    from nbkit.train.ddp.group import DistInfo

    if DistInfo.from_env().rank == 0:
        return corpus(cfg)[0]
    store = store_dir(cfg)
    wait_for_store(store, timeout_s=wait_s)
    return store


#: config field -> the Scale field its default comes from; fields not listed: recipe constants
FROM_SCALE = {"scale": "name", "model": "model", "block_size": "block_size", "batch_size": "mlm_batch_size",
              "grad_accum_steps": "mlm_grad_accum", "max_steps": "mlm_steps", "lr": "mlm_lr",
              "eval_every": "mlm_eval_every", "seed": "seed", "split_seed": "seed", "mix": "mlm_mix",
              "corpus_lines": "corpus_lines", "max_train": "sentiment_max_train", "patience": "mlm_patience",
              "num_workers": "num_workers"}
ALL_MEANS_NONE = ("corpus_lines", "max_train", "eval_blocks")   # papermill passes "all" for None ("every line")


@dataclass(frozen=True, repr=False)
class PretrainConfig(RecipeConfig):
    """Every setting of BERT masked-LM pretraining; build it with :meth:`for_scale`.

    Fields (units in brackets):
        scale: the scale the defaults came from (``runs/<scale>/``, notebook 01's tokenizer).
        model: BERT preset (:data:`nbkit.models.bert.PRESETS`); block_size: tokens per block
            (``[CLS]``/``[SEP]`` included, at most the preset's positions).
        batch_size: blocks per micro-batch (per process under torchrun); grad_accum_steps:
            micro-batches per optimizer step; max_steps: optimizer steps in all.
        lr: peak learning rate; warmup_ratio: share of steps warming up (0-1); schedule: LR decay
            after warm-up (``linear``/``cosine``/``constant``); weight_decay: AdamW's.
        eval_every: steps between held-out evaluations; checkpoint_every: steps between
            checkpoints (None: ``eval_every``; 0: only the last); keep_last: checkpoints kept.
        patience: stop after this many evaluations without a lower held-out loss (None: never).
        mlm_probability: share of tokens chosen as targets (0-1; 80 % ``[MASK]``, 10 % random,
            10 % unchanged); whole_word: choose whole words (jieba/gold boundaries).
        precision: ``"auto"`` | ``"fp32"`` | ``"bf16"`` | ``"fp16"`` (:mod:`nbkit.train.precision`).
        seed: initial weights, data order, masking, the mix's shuffle and 95/5 split.
        split_seed: the sentiment split whose validation/test reviews are kept out (notebook 03's seed).
        corpus: None for the bundled ``mix``; else a prepared store or files/globs/folders to
            prepare (docs/corpus.md), which replace the mix and notebook 01's tokenizer.
        mix: ``(source, repeat weight)`` pairs (:data:`nbkit.recipes.pretrain_corpus.SOURCES`).
        corpus_lines: People's Daily lines read (None: all); max_train: training reviews read (None: all).
        eval_fraction: share of texts held out for the MLM loss (0-1).
        eval_blocks: held-out blocks scored per evaluation (the first ones of the validation split,
            which a store chose by hash; None: all). A 2 GB corpus holds out ~55,000 blocks: scoring
            them all at every evaluation took 4 of the 5 minutes of a 30-step smoke run on 2 cores.
        max_passes: cap the steps at this many passes over the training blocks (None: no cap).
        fit_to_corpus: with ``corpus``, size model/steps/lr to its token count
            (:func:`nbkit.recipes.sizing.size_run`; fields you override stay; never at ``smoke``).
        dropout: hidden and attention dropout (None: the preset's 0.1).
        num_workers: DataLoader workers; log_every: steps between log lines (None: ~20 per run).
        resume: continue from the newest checkpoint in the output directory; progress: a tqdm bar.
    """

    scale: str
    model: str
    block_size: int
    batch_size: int
    grad_accum_steps: int
    max_steps: int
    lr: float
    eval_every: int
    seed: int
    split_seed: int
    mix: tuple
    corpus_lines: int | None
    max_train: int | None
    patience: int | None = None
    num_workers: int = 0
    warmup_ratio: float = 0.06
    schedule: str = "linear"
    weight_decay: float = 0.01
    checkpoint_every: int | None = None
    keep_last: int = 2
    mlm_probability: float = 0.15
    whole_word: bool = True
    precision: str = "auto"
    corpus: str | list | None = None
    eval_fraction: float = 0.05
    eval_blocks: int | None = 4096
    max_passes: float | None = None
    fit_to_corpus: bool = True
    dropout: float | None = None
    log_every: int | None = None
    resume: bool = True
    progress: bool = True

    ALL_MEANS_NONE = ALL_MEANS_NONE
    QUIET = frozenset({"progress", "resume", "num_workers", "log_every", "corpus"})   # not in run_tag

    def unused(self) -> dict[str, str]:
        """With ``corpus`` the store replaces the bundled mix and its split (``mix``, ``corpus_lines``,
        ``max_train``, ``split_seed``, ``eval_fraction`` play no part); without, ``fit_to_corpus`` none."""
        if self.corpus is None:
            return {"fit_to_corpus": "no corpus"}
        return {k: "corpus is set" for k in ("mix", "corpus_lines", "max_train", "split_seed", "eval_fraction")}

    @classmethod
    def for_scale(cls, scale=None, **overrides) -> "PretrainConfig":
        """The recipe at ``scale`` (a :class:`nbkit.recipes.scale.Scale`, its name, or None for ``$NBKIT_SCALE``).

        ``overrides`` (field=value) win; a ``None`` override keeps the default, so notebook
        parameters can be passed as they are (``corpus_lines="all"``: every line).

        Raises:
            ConfigError: an unknown field (naming the valid ones) or scale.
        """
        from nbkit.recipes.params import resolve_scale

        sc = resolve_scale(scale)
        return cls(**{f: getattr(sc, s) for f, s in FROM_SCALE.items()}).replace(**overrides)

    def _base(self):
        return PretrainConfig.for_scale(self.scale)

    def _source(self, name):
        return FROM_SCALE.get(name)

    def _coerce(self, name, value):
        return tuple(map(tuple, value)) if name == "mix" else value


def corpus(cfg: PretrainConfig, labeled=None, texts=None):
    """``(source, what_went_in)``: the text pretraining reads.

    ``cfg.corpus`` None: the one builder :func:`nbkit.recipes.pretrain_corpus.pretraining_corpus` over
    ``cfg.mix`` (``labeled``: the labelled data whose training texts are the ``reviews`` source and
    whose validation/test texts are excluded; ``texts``: the ``own`` source), returning the
    ``DatasetDict`` and the per-source table (a DataFrame). Else the prepared store
    (:func:`nbkit.recipes.pretrain_corpus.corpus_store`: prepared once under ``runs/corpus/``, then
    reused) and its summary dict (:func:`nbkit.recipes.pretrain_corpus.store_summary`).

    Raises:
        ConfigError / DataError: from the builder or the store writer (unknown source, too little text, ...).
    """
    from nbkit import runs
    from nbkit.recipes import pretrain_corpus as corpora

    if cfg.corpus is not None:
        store = corpora.corpus_store(cfg.corpus, scale_name=cfg.scale)
        return store, corpora.store_summary(store)
    splits, mixed = corpora.pretraining_corpus(
        cfg.mix, labeled=labeled, texts=texts, corpus_lines=cfg.corpus_lines, max_train=cfg.max_train,
        seed=cfg.seed, split_seed=cfg.split_seed, eval_fraction=cfg.eval_fraction,
        cache_dir=runs.step_dir(cfg.scale, "cache"))
    return splits, mixed.table()


def store_dir(cfg: PretrainConfig) -> Path | None:
    """The store ``cfg.corpus`` names, without preparing it: the folder itself when it is a prepared
    store, else where :func:`corpus` prepares it (:func:`nbkit.recipes.pretrain_corpus.store_dir_for`,
    ``runs/corpus/<first input's name>-<hash>``); None without ``cfg.corpus`` (the bundled mix)."""
    if cfg.corpus is None:
        return None
    from nbkit.corpus.store import given_store
    from nbkit.recipes.pretrain_corpus import store_dir_for

    return given_store(cfg.corpus) or store_dir_for(cfg.corpus)


def run_dir(cfg: PretrainConfig) -> Path:
    """The run's folder (created if missing): ``runs/<scale>/mlm[-<store>]<overrides>``, the one name of a
    pretraining run (notebook 02, ``python -m nbkit.jobs.pretrain``, :func:`run_pretraining` without ``out_dir``).

    ``<store>``: the folder name of :func:`store_dir` (``mlm-wiki`` for ``--corpus runs/corpus/wiki``; raw
    files: ``<name>-<hash>``, never the whole path), prefixed ``corpus-`` when it begins with a field name
    (a store called ``seed3`` is ``mlm-corpus-seed3``, never the bundled run ``mlm-seed3``).
    ``<overrides>``: :meth:`~nbkit.recipes.config.RecipeConfig.run_tag` (``-lr0.002-max_steps40``), so
    a run with other settings neither resumes nor overwrites another's checkpoints. Give ``cfg`` as built
    (before :func:`size`): the sizes fitted to a store are not overrides. The scale's recipe on the
    bundled text is ``runs/<scale>/mlm`` (notebook 03's default encoder).
    """
    import dataclasses

    from nbkit.runs import pretrain_dir

    store = store_dir(cfg)
    part = ""
    if store is not None:
        name = store.name or "corpus"
        tagged = [f.name for f in dataclasses.fields(cfg) if f.name not in cfg.QUIET]
        part = "-" + ("corpus-" + name if any(name.startswith(f) for f in tagged) else name)
    return pretrain_dir(cfg.scale, part + cfg.run_tag())


def is_store(source) -> bool:
    """True when ``source`` is a prepared store's directory (not an in-memory ``DatasetDict``)."""
    return isinstance(source, (str, Path))


def tokenizer(cfg: PretrainConfig, source):
    """The store's own tokenizer for a store, else notebook 01's for ``cfg.scale`` (trained now if missing)."""
    if is_store(source):
        from nbkit.corpus.store import store_tokenizer

        return store_tokenizer(source)
    from nbkit.recipes.scale import get_scale
    from nbkit.recipes.tokenizer import load_tokenizer

    return load_tokenizer(get_scale(cfg.scale))


def size(cfg: PretrainConfig, source, device: str | None = None) -> tuple[PretrainConfig, dict | None]:
    """``(cfg, plan)``: for a store with ``cfg.fit_to_corpus``, the model, batch, steps, lr, warm-up and
    evaluation interval of :func:`nbkit.recipes.sizing.size_run` for its token count; fields you
    overrode stay, and ``smoke`` keeps its CI sizes (``plan["applied"]`` says which). Else ``(cfg, None)``.
    ``device``: ``"cuda"``/``"cpu"`` (None: CUDA when usable); under torchrun the plan is for its world size."""
    if not (is_store(source) and cfg.fit_to_corpus):
        return cfg, None
    from nbkit.recipes.pretrain_corpus import store_summary
    from nbkit.recipes.scale import cuda_usable
    from nbkit.recipes.sizing import size_run
    from nbkit.train.ddp.group import launch_world_size

    device = device or ("cuda" if cuda_usable() else "cpu")
    plan = size_run(store_summary(source)["n_tokens_train"], device, block_size=cfg.block_size,
                    max_passes=cfg.max_passes, world_size=launch_world_size())
    if cfg.scale == "smoke":
        plan["applied"] = "not applied: the smoke scale keeps its CI sizes"
        return cfg, plan
    mine = {k: plan[k] for k in ("model", "batch_size", "grad_accum_steps", "max_steps", "lr", "warmup_ratio",
                                 "eval_every")}
    kept = set(cfg.overrides()) & set(mine)
    plan["applied"] = "applied" + (f", except what you set: {', '.join(sorted(kept))}" if kept else "")
    return cfg.replace(**{k: v for k, v in mine.items() if k not in kept}), plan


def blocks(cfg: PretrainConfig, tok, source, rank: int = 0) -> dict:
    """``{"train", "validation"}`` MLM blocks of ``cfg.block_size`` tokens, ``[CLS] ... [SEP]``.

    Bundled mix: texts tokenized, concatenated and cut (:func:`nbkit.text.mlm.make_blocks`), with
    ``word_ids`` for whole-word masking. Store: :class:`nbkit.corpus.StoreMLMDataset` over both
    splits (random access from disk, constant memory). With ``NBKIT_BLOCK_LOG=DIR`` the training
    blocks of every batched fetch are appended to ``DIR/blocks-rank<rank>.jsonl`` (a debugging aid).
    """
    if is_store(source):
        from nbkit.recipes.pretrain_corpus import store_blocks

        out = store_blocks(source, cfg.block_size)
    else:
        from nbkit.text import mlm

        out = {split: mlm.make_blocks(source[split], tok, cfg.block_size, words_column="words")
               for split in ("train", "validation")}
    out["train"] = _block_log(out["train"], rank)
    return out


class _BlockLog:
    """``data`` with every batched fetch (the training DataLoader's) logged to ``$NBKIT_BLOCK_LOG``."""

    def __init__(self, data, path: Path):
        self.data, self.path = data, path

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]

    def __getitems__(self, indices):
        with self.path.open("a", encoding="utf-8") as f:
            f.write(jsonio.dumps([int(i) for i in indices]) + "\n")
        getitems = getattr(self.data, "__getitems__", None)
        return getitems(indices) if getitems else [self.data[i] for i in indices]

    def __getattr__(self, name):   # block_size, n_tokens, sample_blocks, ...
        if name == "data":
            raise AttributeError(name)
        return getattr(self.data, name)


def _block_log(data, rank: int):
    target = os.environ.get("NBKIT_BLOCK_LOG")
    if not target:
        return data
    Path(target).mkdir(parents=True, exist_ok=True)
    return _BlockLog(data, Path(target) / f"blocks-rank{rank}.jsonl")
