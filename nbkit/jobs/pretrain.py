"""MLM pretraining as a script: ``[torchrun ...] python -m nbkit.jobs.pretrain [flags]``.

The same code path as notebook 02. To check a launcher, a cluster or a multi-node
rendezvous, run it at ``--scale smoke --max-steps 6``: the real loop on a tiny BERT and
the bundled corpus (the tokenizer is trained on the way if notebook 01 has not run).
"""
from __future__ import annotations

import sys
from pathlib import Path

from nbkit.jobs.common import job_parser, loop_resume


def run_pretrain(scale, output_dir: Path, *, max_steps: int | None = None, batch_size: int | None = None,
                 grad_accum: int | None = None, lr: float | None = None, seed: int | None = None,
                 checkpoint_every: int | None = None, resume: bool = True,
                 log_every: int | None = None, backend: str | None = None) -> dict:
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
    """
    from nbkit.models import bert as modeling
    from nbkit.pipeline import steps as pipeline
    from nbkit.text import mlm
    from nbkit.train import Loop
    from nbkit.train import distributed as D
    from nbkit.train.metrics_stream import MetricsPrinter

    info = D.init_distributed(backend)
    tokenizer = _tokenizer_rank0_first(scale, info)
    blocks = pipeline.mlm_blocks(scale, tokenizer, scale.block_size)
    collator = mlm.MLMCollator(tokenizer, mlm_probability=0.15)
    _seed_all(scale.seed if seed is None else seed)  # the same initial weights on every rank
    model = modeling.build_mlm_model(scale.model, tokenizer, scale.block_size,
                                     seed=scale.seed if seed is None else seed)
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


def _seed_all(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


def _overrides(**knobs) -> dict:
    """The knobs given on the command line (``None`` = keep the preset's value)."""
    return {k: v for k, v in knobs.items() if v is not None}


def main(argv: list[str] | None = None) -> int:
    p = job_parser("nbkit MLM pretraining (runs under torchrun)")
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
                 backend=a.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
