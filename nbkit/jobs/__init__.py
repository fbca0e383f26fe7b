"""Script entry points for the training jobs, runnable under ``torchrun`` on one or many nodes.

- ``python -m nbkit.jobs.pretrain``: MLM pretraining (notebook 02's code path).
- ``python -m nbkit.jobs.finetune``: sentiment fine-tuning (argparse around ``nbkit.recipes.finetuning``).

Both parse the same core flags (``nbkit.jobs.common.job_parser``) and call a plain
function (``nbkit.recipes.pretraining.run_pretraining`` / ``nbkit.recipes.finetuning.run_finetuning``) that notebooks can call too. Rank 0
reports progress as ``NBKIT_METRICS {json}`` lines on stdout, which
``nbkit.jobs.launch`` streams back into a notebook. See ``docs/distributed.md``.
"""
