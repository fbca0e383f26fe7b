"""Inputs for timing training steps: random MLM batches and the model to time.

Timings depend on tensor shapes, not on which tokens or weights: random token
ids and (without a notebook-02 checkpoint) randomly initialised BERT presets
measure the same step time as real ones. Re-exported by
:mod:`nbkit.profiling.steps`.
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


class MaskingCollator:
    """Stack examples and mask 15 % of tokens (BERT's rate): labels -100 elsewhere.

    Masked positions get ``mask_id`` (no 80/10/10 split: this collator only
    has to cost what a real one costs). Picklable, so it works with
    ``num_workers > 0``.
    """

    def __init__(self, mask_id: int = 4, probability: float = 0.15):
        self.mask_id, self.probability = mask_id, probability

    def __call__(self, examples):
        import torch

        ids = torch.stack([e["input_ids"] for e in examples])  # (B, T)
        chosen = torch.rand(ids.shape) < self.probability       # (B, T) bool
        labels = torch.where(chosen, ids, torch.full_like(ids, -100))
        inputs = torch.where(chosen, torch.full_like(ids, self.mask_id), ids)
        return {"input_ids": inputs, "attention_mask": torch.ones_like(ids), "labels": labels}


def random_mlm_loader(vocab_size: int, cfg, n_batches: int, seed: int = 0):
    """DataLoader of random MLM batches shaped ``(cfg.batch_size, cfg.seq_len)``.

    ``cfg`` is a :class:`nbkit.profiling.steps.StepConfig` (batch_size, seq_len,
    num_workers, pin_memory are read). Raises ``ConfigError`` when ``/dev/shm`` cannot hold
    what ``num_workers`` workers keep in flight (``nbkit.train.workers.check_worker_shm``).
    """
    from torch.utils.data import DataLoader

    from nbkit.train.workers import check_worker_shm, loader_timeout

    data = RandomMLMDataset(vocab_size, cfg.seq_len, cfg.batch_size * n_batches, seed)
    # workers need /dev/shm for their batches: a ConfigError now instead of a hung ablation
    check_worker_shm(data, MaskingCollator(), cfg.batch_size, cfg.num_workers, seed)
    return DataLoader(data, batch_size=cfg.batch_size, shuffle=False, drop_last=True,
                      collate_fn=MaskingCollator(), num_workers=cfg.num_workers,
                      pin_memory=cfg.pin_memory, persistent_workers=cfg.num_workers > 0,
                      timeout=loader_timeout(cfg.num_workers))


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
