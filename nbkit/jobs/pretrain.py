"""MLM pretraining as a script: ``[torchrun ...] python -m nbkit.jobs.pretrain [flags]``.

The same code path as notebook 02. ``--corpus PATH`` pretrains on the user's corpus through the
prepared store (docs/corpus.md): rank 0 prepares it (or reads a prepared directory), the other
ranks and nodes poll for its ``manifest.json``, then every rank reads its share of the blocks.
To check a launcher, a cluster or a multi-node rendezvous, run it at ``--scale smoke --max-steps 6``:
the real loop on a tiny BERT and the bundled corpus (the tokenizer is trained on the way if notebook
01 has not run).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from nbkit import jsonio
from nbkit.jobs.common import job_parser, loop_resume


def run_pretrain(scale, output_dir: Path, *, max_steps: int | None = None, batch_size: int | None = None,
                 grad_accum: int | None = None, lr: float | None = None, seed: int | None = None,
                 checkpoint_every: int | None = None, resume: bool = True,
                 log_every: int | None = None, backend: str | None = None, corpus=None,
                 corpus_wait_s: float = 6 * 3600.0, dropout: float | None = None) -> dict:
    """Pretrain a BERT MLM at ``scale`` (``nbkit.pipeline.scale.Scale``) and return ``metrics.json``'s dict.

    Notebook 02's code path: ``pipeline.load_tokenizer`` -> ``pipeline.mlm_blocks`` ->
    ``mlm.MLMCollator`` -> ``modeling.build_mlm_model`` -> ``pipeline.pretrain_config`` ->
    ``train.Loop(...).fit()`` -> ``pipeline.save_pretraining`` (rank 0). ``None``
    arguments take the preset's value (``mlm_steps``, ``mlm_batch_size`` *per process*,
    ``mlm_grad_accum``, ``mlm_lr``, ``seed``, checkpoints every ``mlm_eval_every``).
    ``resume``: continue from the newest complete checkpoint in ``output_dir`` (written
    under any number of processes). Under torchrun every rank calls this; rank 0 trains
    the tokenizer first if notebook 01 has not run (the others wait), prints one
    ``NBKIT_METRICS`` line per log/eval (``launch.MetricsPrinter``) and writes
    ``output_dir``. Non-main ranks return the loop's summary.

    ``corpus``: a prepared store, or files/globs/folders to prepare (``pipeline.corpus_store``):
    the store's tokenizer and ``StoreMLMDataset`` blocks (held-out split for eval) replace
    the bundled mix. Preparation happens before the process group forms, on global rank 0;
    the others wait at most ``corpus_wait_s`` (``nbkit.corpus.store.wait_for_store``).
    ``dropout``: hidden and attention dropout (``None``: the preset's 0.1).
    With ``NBKIT_BLOCK_LOG=DIR`` each rank appends the block indices of every training
    micro-batch to ``DIR/blocks-rank<R>.jsonl`` (a debugging aid; the multi-node test uses it).
    """
    from nbkit.models import bert as modeling
    from nbkit.pipeline import steps as pipeline
    from nbkit.text import mlm
    from nbkit.train import Loop
    from nbkit.train import distributed as D
    from nbkit.train.metrics_stream import MetricsPrinter

    store = _store_rank0_first(corpus, scale.name, corpus_wait_s) if corpus is not None else None
    info = D.init_distributed(backend)
    if store is None:
        tokenizer = _tokenizer_rank0_first(scale, info)
        blocks = pipeline.mlm_blocks(scale, tokenizer, scale.block_size)
    else:
        from nbkit.corpus.store import store_tokenizer
        from nbkit.pipeline.corpus import store_blocks

        tokenizer, blocks = store_tokenizer(store), store_blocks(store, scale.block_size)
        blocks["train"] = _block_log(blocks["train"], info.rank)
    collator = mlm.MLMCollator(tokenizer, mlm_probability=0.15)
    _seed_all(scale.seed if seed is None else seed)  # the same initial weights on every rank
    drop = {} if dropout is None else {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}
    model = modeling.build_mlm_model(scale.model, tokenizer, scale.block_size,
                                     seed=scale.seed if seed is None else seed, **drop)
    config = pipeline.pretrain_config(scale, Path(output_dir), resume=resume, progress=False, **_overrides(
        max_steps=max_steps, batch_size=batch_size, grad_accum_steps=grad_accum, lr=lr, seed=seed,
        checkpoint_every=checkpoint_every, log_every=log_every))
    loop = Loop(model, config, blocks["train"], blocks["validation"], collate_fn=collator,
                callbacks=[MetricsPrinter()])
    result = loop.fit()
    metrics = dict(result.metrics)
    if info.is_main:
        metrics = pipeline.save_pretraining(loop, result, tokenizer, Path(output_dir), scale)
        metrics["world_size"] = info.world_size
        pipeline.write_json(Path(output_dir) / "metrics.json", metrics)
    D.barrier()
    return metrics


def _tokenizer_rank0_first(scale, info):
    """Rank 0 loads (or trains and saves) the tokenizer; the others wait, then load it."""
    from nbkit.pipeline import steps as pipeline
    from nbkit.train import distributed as D

    tok = pipeline.load_tokenizer(scale) if info.is_main else None
    D.barrier()
    return tok if tok is not None else pipeline.load_tokenizer(scale)


def _store_rank0_first(corpus, scale_name: str, wait_s: float) -> Path:
    """Global rank 0 prepares (or checks) the store; the others poll for its manifest (no collective:
    preparing a big corpus takes longer than any process-group timeout)."""
    from nbkit.corpus.store import is_prepared, wait_for_store
    from nbkit.pipeline.corpus import corpus_store, store_dir_for
    from nbkit.train.distributed import DistInfo

    if DistInfo.from_env().rank == 0:
        return corpus_store(corpus, scale_name=scale_name)
    store = Path(corpus).expanduser() if is_prepared(corpus) else store_dir_for(corpus, scale_name)
    wait_for_store(store, timeout_s=wait_s)
    return store


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
        return self.data.__getitems__(indices)

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


def _seed_all(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


def _overrides(**knobs) -> dict:
    """The knobs given on the command line (``None`` = keep the preset's value)."""
    return {k: v for k, v in knobs.items() if v is not None}


def main(argv: list[str] | None = None) -> int:
    p = job_parser("nbkit MLM pretraining (runs under torchrun)")
    p.add_argument("--corpus", nargs="+", default=None,
                   help="a prepared corpus directory, or files/globs/folders to prepare on rank 0 (docs/corpus.md)")
    p.add_argument("--corpus-wait-s", type=float, default=6 * 3600.0,
                   help="how long ranks other than 0 wait for the prepared store (s)")
    p.add_argument("--dropout", type=float, default=None, help="hidden and attention dropout (default: 0.1)")
    a = p.parse_args(argv)
    from nbkit.train.distributed import cleanup

    try:
        return _run(a)
    finally:
        cleanup()


def _run(a) -> int:
    from nbkit.pipeline.runs import step_dir
    from nbkit.pipeline.scale import get_scale

    scale = get_scale(a.scale)
    run_pretrain(scale, a.output_dir or step_dir(scale.name, "mlm"), max_steps=a.max_steps,
                 batch_size=a.batch_size, grad_accum=a.grad_accum, lr=a.lr, seed=a.seed,
                 checkpoint_every=a.checkpoint_every, resume=loop_resume(a.resume), log_every=a.log_every,
                 backend=a.backend, corpus=_one_or_list(a.corpus), corpus_wait_s=a.corpus_wait_s,
                 dropout=a.dropout)
    return 0


def _one_or_list(items):
    return None if not items else (items[0] if len(items) == 1 else list(items))


if __name__ == "__main__":
    sys.exit(main())
