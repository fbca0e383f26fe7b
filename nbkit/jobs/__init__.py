"""Script entry points for the training jobs, runnable under ``torchrun`` on one or many nodes:
``python -m nbkit.jobs.pretrain`` / ``finetune`` (one flag per recipe config field around ``run_pretraining`` /
``run_finetuning``), ``nbkit.jobs.launch`` (torchrun from a notebook), how a job ends (``outcome``) and
``cluster`` (Kubernetes and SkyPilot manifests; the engines' variables checked before torchrun).
"""
