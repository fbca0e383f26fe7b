"""Sentiment fine-tuning as a script: ``[torchrun ...] python -m nbkit.jobs.finetune [flags]``.

The same code path as notebook 03.
"""
from __future__ import annotations

import sys
from pathlib import Path

from nbkit.jobs.common import job_parser, loop_resume


def run_finetune(scale, output_dir: Path, *, pretrained: str | Path | None = None,
                 max_steps: int | None = None, epochs: float | None = None,
                 batch_size: int | None = None, grad_accum: int | None = None, lr: float | None = None,
                 seed: int | None = None, checkpoint_every: int | None = None,
                 resume: bool = True, log_every: int | None = None, backend: str | None = None) -> dict:
    """Fine-tune a sentiment classifier at ``scale`` and return ``metrics.json``'s dict.

    Notebook 03's code path: ``data.load_sentiment`` -> ``pipeline.load_tokenizer`` ->
    ``mlm.encode_classification`` -> ``modeling.build_classifier`` (from ``pretrained``,
    else notebook 02's ``pipeline.pretrained_model_dir(scale)``, else from config) ->
    ``pipeline.finetune_config`` -> ``train.Loop(...).fit()``; then, on rank 0 only, test
    predictions, the TF-IDF baseline and ``pipeline.save_sentiment_metrics``.
    ``None`` arguments take the preset's value (``cls_batch_size`` *per process*,
    ``cls_lr``, ``seed``); steps default to ``epochs`` (``cls_epochs``) passes over the
    training split with the *global* batch ``world_size * batch_size * grad_accum``.
    Non-main ranks return the loop's summary.
    """
    from nbkit.data import corpora as data
    from nbkit.jobs.pretrain import _overrides, _seed_all, _tokenizer_rank0_first
    from nbkit.models import bert as modeling
    from nbkit.pipeline import baseline, evaluation
    from nbkit.pipeline import steps as pipeline
    from nbkit.text import mlm
    from nbkit.train import Loop
    from nbkit.train import distributed as D
    from nbkit.train.metrics_stream import MetricsPrinter

    info = D.init_distributed(backend)
    sentiment = data.load_sentiment(seed=scale.seed, max_train=scale.sentiment_max_train)
    splits = sentiment.splits
    tokenizer = _tokenizer_rank0_first(scale, info)
    encoded, trunc = {}, {}
    for split in ("train", "validation", "test"):
        encoded[split], trunc[split] = mlm.encode_classification(splits[split], tokenizer, scale.cls_max_length)
    source = pretrained or pipeline.pretrained_model_dir(scale)
    _seed_all(scale.seed if seed is None else seed)  # the same classifier head on every rank
    model, how = modeling.build_classifier(source, num_labels=len(sentiment.label2id),
                                           id2label=sentiment.id2label, tokenizer=tokenizer, preset=scale.model,
                                           seed=scale.seed if seed is None else seed, pooling=scale.cls_pooling)
    bs, accum = batch_size or scale.cls_batch_size, grad_accum or 1
    n_train = len(encoded["train"])
    steps = max_steps or pipeline.steps_for_epochs(n_train, bs * accum * info.world_size,
                                                   scale.cls_epochs if epochs is None else epochs)
    config = pipeline.finetune_config(scale, Path(output_dir), n_train=n_train, resume=resume, progress=False,
                                      eval_every=max(steps // 4, 1), checkpoint_every=checkpoint_every
                                      or max(steps // 2, 1), **_overrides(
                                          max_steps=steps, batch_size=bs, grad_accum_steps=accum, lr=lr,
                                          seed=seed, log_every=log_every))
    loop = Loop(model, config, encoded["train"], encoded["validation"],
                collate_fn=mlm.classification_collator(tokenizer), callbacks=[MetricsPrinter()])
    result = loop.fit()
    metrics = dict(result.metrics)
    if info.is_main:
        labels = sentiment.id2label
        pred = pipeline.predict(loop.model, tokenizer, splits["test"]["text"], max_length=scale.cls_max_length)
        report = evaluation.classification_report(splits["test"]["label"], pred["label"], labels)
        base = baseline.tfidf_baseline(splits["train"]["text"], splits["train"]["label"], splits["test"]["text"])
        base_report = evaluation.classification_report(splits["test"]["label"], base, labels)
        metrics = pipeline.save_sentiment_metrics(Path(output_dir), scale, report, base_report, sentiment.report,
                                                  trunc, how, result)
    D.barrier()
    return metrics


def main(argv: list[str] | None = None) -> int:
    p = job_parser("nbkit sentiment fine-tuning (runs under torchrun)")
    p.add_argument("--pretrained", default=None, help="checkpoint directory from pretraining, or a local model")
    p.add_argument("--epochs", type=float, default=None, help="passes over the training split")
    a = p.parse_args(argv)
    from nbkit.pipeline.runs import step_dir
    from nbkit.pipeline.scale import get_scale
    from nbkit.train.distributed import cleanup

    scale = get_scale(a.scale)
    try:
        run_finetune(scale, a.output_dir or step_dir(scale.name, "sentiment"), pretrained=a.pretrained,
                     max_steps=a.max_steps, epochs=a.epochs, batch_size=a.batch_size,
                     grad_accum=a.grad_accum, lr=a.lr, seed=a.seed, checkpoint_every=a.checkpoint_every,
                     resume=loop_resume(a.resume), log_every=a.log_every, backend=a.backend)
    finally:
        cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
