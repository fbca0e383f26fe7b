"""LoRA as a recipe setting: the config fields both recipes share (``FinetuneConfig``; ``PretrainConfig`` with
objective sft), their help, the rate a LoRA run trains at and what its checkpoints record. The adapters themselves:
:mod:`nbkit.models.lora`."""
from __future__ import annotations

from nbkit.recipes.scales import LORA_LR_CAP

#: what an export writes under ``lora`` (the configs' ``lora_export``)
EXPORTS = ("merged", "adapter", "both")
#: the config fields only a LoRA run reads (beside ``lora`` itself)
FIELDS = ("lora_r", "lora_alpha", "lora_dropout", "lora_targets", "lora_lr", "lora_export")
#: the recipes' LoRA fields, name -> help, for every config that declares them (``FinetuneConfig``,
#: ``PretrainConfig`` with objective sft)
CONFIG_HELP = {
    "lora": "train LoRA adapters (peft) on lora_targets, the other weights frozen (a classifier's head trains too)",
    "lora_r": "lora: the adapters' rank (each adapted d_out x d_in weight trains r x (d_in + d_out) more)",
    "lora_alpha": "lora: the adapters' scale numerator (the update is scaled by alpha / r)",
    "lora_dropout": "lora: dropout on the adapters' input (0-1)",
    "lora_targets": "lora: names of the layers to adapt (GPT-2: c_attn; BERT: query value); None: every attention "
                    "projection",
    "lora_lr": "lora: peak learning rate of the adapters and a classifier's head (None: 10 x lr, at most "
               f"{LORA_LR_CAP.value:g})",
    "lora_export": "lora: what export writes: merged (a plain model folder), adapter (<folder>/adapter, for "
                   "peft.PeftModel.from_pretrained) or both",
}


def one_spelling(cfg) -> None:
    """Store ``cfg.lora_targets`` (a name or a list of names) as a tuple of str, the spelling the run folder joins."""
    if isinstance(cfg.lora_targets, (str, list)):
        names = [cfg.lora_targets] if isinstance(cfg.lora_targets, str) else cfg.lora_targets
        object.__setattr__(cfg, "lora_targets", tuple(str(n) for n in names))


def settings(cfg) -> dict | None:
    """What the adapters' weights depend on, ``{"r", "alpha", "dropout", "targets"}`` (``targets`` a list, or None
    for :data:`nbkit.models.lora.DEFAULT_TARGETS`); None without ``cfg.lora``. Recorded with checkpoints and an
    encoder's identity, so a full run and a LoRA run (or LoRA runs of two ranks) never resume each other."""
    if not cfg.lora:
        return None
    targets = cfg.lora_targets   # a tuple (one_spelling) or None
    return {"r": cfg.lora_r, "alpha": cfg.lora_alpha, "dropout": cfg.lora_dropout,
            "targets": None if targets is None else list(targets)}


def peak_lr(cfg) -> float:
    """The peak learning rate: ``cfg.lr``, or under ``cfg.lora`` ``cfg.lora_lr`` (None: 10 x ``cfg.lr``, at most
    :data:`nbkit.recipes.scales.LORA_LR_CAP`)."""
    if not cfg.lora:
        return cfg.lr
    return cfg.lora_lr if cfg.lora_lr is not None else min(10 * cfg.lr, LORA_LR_CAP.value)


def lr_origin(cfg) -> str | None:
    """Where ``lora_lr`` comes from, for a config's table: when it is None, the rule :func:`peak_lr` applies, its
    value and its reason; else None (the config's own origin)."""
    if cfg.lora_lr is not None:
        return None
    return f"recipe: None, so min(10 x lr, {LORA_LR_CAP.value:g}) = {peak_lr(cfg):g}: {LORA_LR_CAP.why}"


def unused_fields(cfg) -> dict[str, str]:
    """``{field: why}`` of a LoRA-capable config: the :data:`FIELDS` without ``cfg.lora``; ``lr`` when ``lora_lr``
    sets the rate."""
    if not cfg.lora:
        return dict.fromkeys(FIELDS, "lora is False")
    return {"lr": "lora: lora_lr is the rate"} if cfg.lora_lr is not None else {}


def wrap(cfg, model):
    """``(peft_model, line)``: ``model`` with LoRA adapters from a config's fields
    (:func:`nbkit.models.lora.apply_lora`: ``lora_r``, ``lora_alpha``, ``lora_dropout``, ``lora_targets``, A drawn
    with ``cfg.seed``) and the line a recipe prints of it (layers adapted, "and the head" when a classifier's head
    trains too, the trainable share, the rate :func:`peak_lr`). Raises ConfigError: a bad rank or target name."""
    from nbkit.models.lora import apply_lora, trainable_parameters

    wrapped = apply_lora(model, r=cfg.lora_r, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout,
                         target_modules=cfg.lora_targets, seed=cfg.seed)
    conf, n = wrapped.peft_config["default"], trainable_parameters(wrapped)
    head = " and the head" if conf.modules_to_save else ""
    return wrapped, (f"LoRA r={cfg.lora_r}, alpha={cfg.lora_alpha:g} on {', '.join(sorted(conf.target_modules))}"
                     f"{head}: trains {n['trainable']:,} of {n['total']:,} parameters ({n['share']:.2%}) at lr "
                     f"{peak_lr(cfg):g}")
