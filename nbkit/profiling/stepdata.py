"""The training loop that profiling times, on random token ids, and the model to time.

Profiling measures :meth:`nbkit.train.loop.Loop.train_step`, the step ``fit()`` runs, so
:func:`step_loop` builds a real ``Loop``: the loop's optimizer (AdamW, fused on CUDA),
LR schedule, precision rule, gradient clipping, sparse MLM head and data path, with the
real MLM collator (:class:`nbkit.text.mlm.MLMCollator`). Timings depend on tensor shapes,
not on which tokens or weights: random token ids (:class:`RandomMLMDataset`) and, without
a notebook-02 checkpoint, randomly initialised BERT presets (:func:`model_factory`)
measure the same step time as real ones. Re-exported by :mod:`nbkit.profiling.step_timing`.
"""
from __future__ import annotations


class RandomMLMDataset:
    """``n`` random token sequences ``(seq_len,)`` for timing without a corpus.

    Token ids are drawn from ``[5, vocab_size)`` (ids 0-4 are the special
    tokens in nbkit's WordPiece vocabularies), reproducibly from ``seed``.
    """

    def __init__(self, vocab_size: int, seq_len: int, n: int, seed: int = 0):
        import torch

        gen = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(5, vocab_size, (n, seq_len), generator=gen)  # (n, T)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i]}


def ids_tokenizer(vocab_size: int):
    """A ``PreTrainedTokenizerFast`` whose vocabulary is ``[PAD] [UNK] [CLS] [SEP] [MASK]`` (ids 0-4,
    as :mod:`nbkit.text.tokenizer` orders them) then ``t5 .. t{vocab_size-1}``: what the MLM collator
    needs (special ids, ``len``) when there is no trained tokenizer. Raises ``ConfigError`` below 6."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    from nbkit.errors import ConfigError
    from nbkit.text.tokenizer import SPECIAL_TOKENS

    if vocab_size <= len(SPECIAL_TOKENS):
        raise ConfigError(f"vocab_size={vocab_size}: needs more than the {len(SPECIAL_TOKENS)} special tokens")
    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS)} | {f"t{i}": i for i in range(5, vocab_size)}
    pad, unk, cls, sep, mask = SPECIAL_TOKENS
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(vocab, unk_token=unk)),
                                   pad_token=pad, unk_token=unk, cls_token=cls, sep_token=sep, mask_token=mask)


def step_loop(model, cfg, device=None, tokenizer=None, data=None, seed: int = 0):
    """A :class:`nbkit.train.loop.Loop` over random MLM blocks, built for timing ``train_step``.

    ``cfg`` is a :class:`nbkit.profiling.step_timing.StepConfig`: ``batch_size``, ``seq_len``,
    ``grad_accum_steps``, ``precision``, ``lr``, ``num_workers``, ``pin_memory`` and ``compile``
    (``compile_backend``) go into the loop's ``TrainConfig`` (schedule length ``warmup + steps``,
    every other field the loop's default); ``attn`` is set on the model
    (``set_attn_implementation``), ``mlm_head="all"`` turns the sparse head off. The data:
    ``batch_size x grad_accum_steps x (warmup + steps)`` random sequences of ``seq_len`` tokens
    collated by ``MLMCollator(tokenizer)`` (default :func:`ids_tokenizer` of the model's vocabulary);
    ``data`` (examples with ``input_ids``) replaces the random sequences.
    The model is put in train mode (``fit()`` does that; ``from_pretrained`` returns eval mode).

    Raises:
        ConfigError: unknown precision or ``mlm_head``, ``mlm_head="masked"`` on a model without
            ``supports_predict_mask``, or ``/dev/shm`` too small for ``num_workers``
            (``nbkit.train.workers.check_worker_shm``).
    """
    from nbkit.errors import ConfigError
    from nbkit.text.mlm import MLMCollator
    from nbkit.train import Loop, TrainConfig
    from nbkit.train.workers import check_worker_shm

    sparse = bool(getattr(model, "supports_predict_mask", False))
    if cfg.mlm_head not in ("all", "masked") or (cfg.mlm_head == "masked" and not sparse):
        raise ConfigError(f"mlm_head={cfg.mlm_head!r}: use 'all', or 'masked' with a model that supports it "
                          "(nbkit.models.mlm_head.SparseHeadBertForMaskedLM, what models.build_mlm_model returns)")
    if cfg.mlm_head == "all" and sparse:
        model.supports_predict_mask = False  # this instance runs the head on every position
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(cfg.attn)
    model.train()
    vocab_size = model.config.vocab_size
    collator = MLMCollator(tokenizer if tokenizer is not None else ids_tokenizer(vocab_size))
    n_steps = cfg.warmup + cfg.steps
    if data is None:
        data = RandomMLMDataset(vocab_size, cfg.seq_len, cfg.batch_size * cfg.grad_accum_steps * max(n_steps, 1), seed)
    check_worker_shm(data, collator, cfg.batch_size, cfg.num_workers, seed)  # ConfigError, not a hung run
    config = TrainConfig(max_steps=max(n_steps, 1), batch_size=cfg.batch_size, grad_accum_steps=cfg.grad_accum_steps,
                         lr=cfg.lr, precision=cfg.precision, num_workers=cfg.num_workers,
                         pin_memory=cfg.pin_memory, compile=cfg.compile_backend if cfg.compile else False,
                         progress=False, seed=seed)
    return Loop(model, config, data, collate_fn=collator, device=device)


def model_factory(preset: str, vocab_size: int, block_size: int, model_dir=None):
    """Return ``(factory, how)``: ``factory()`` gives a fresh ``BertForMaskedLM``
    (a :class:`~nbkit.models.mlm_head.SparseHeadBertForMaskedLM`, so ``mlm_head="masked"`` works).

    With ``model_dir`` an existing directory (notebook 02's
    ``runs/<scale>/mlm/model``), each call loads that checkpoint
    (``SparseHeadBertForMaskedLM.from_pretrained``); otherwise it builds ``preset``
    from config with random weights (timings depend on shapes, not weights).
    ``how`` says which, for the notebook to show.

    Raises:
        ConfigError: unknown preset.
        CheckpointError: (from ``factory()``) a ``model_dir`` transformers cannot load,
            with its report (:func:`nbkit.models.loading.load_pretrained`).
    """
    from pathlib import Path

    from nbkit.models.bert import build_config
    from nbkit.models.loading import load_pretrained
    from nbkit.models.mlm_head import SparseHeadBertForMaskedLM

    if model_dir is not None and Path(model_dir).is_dir():
        def load():  # quiet (no "Loading weights" bar per ablation row); a bad checkpoint: CheckpointError
            return load_pretrained(SparseHeadBertForMaskedLM, model_dir)[0]

        return (load,
                f"checkpoint from notebook 02: {model_dir}")
    config = build_config(preset, vocab_size, max_position_embeddings=block_size)  # ConfigError if unknown
    return (lambda: SparseHeadBertForMaskedLM(config),
            f"no checkpoint found, built BERT-{preset} from config with random weights")
