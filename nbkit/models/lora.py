"""LoRA (Hu et al. 2021, low-rank adapters) through ``peft``: wrap a BERT classifier (per text or per token) or a
GPT-2 / Llama causal LM, count what trains, and export the result both ways (merged weights as a plain folder,
or the adapter folder ``peft.PeftModel.from_pretrained(base, folder)`` loads)."""
from __future__ import annotations

from pathlib import Path

from nbkit.errors import ConfigError

#: ``config.model_type`` -> the layers LoRA adapts when ``target_modules`` is None: every attention projection
#: (q, k, v and the attention's output), since Hu et al. (2021, section 7.1) find several matrices at a low rank
#: better than one at a higher rank (peft's defaults leave keys or the output out). A name matches every module
#: whose dotted name ends with it: ``attention.output.dense`` is not BERT's feed-forward ``output.dense``,
#: ``attn.c_proj`` not GPT-2's ``mlp.c_proj``. GPT-2's ``c_attn`` is one ``Conv1D`` (``fan_in_fan_out=True``).
DEFAULT_TARGETS: dict[str, tuple[str, ...]] = {
    "bert": ("query", "key", "value", "attention.output.dense"),
    "nbkit_mean_pool_bert": ("query", "key", "value", "attention.output.dense"),
    "gpt2": ("c_attn", "attn.c_proj"),
    "llama": ("q_proj", "k_proj", "v_proj", "o_proj"),
}


def task_type(model) -> str:
    """peft's ``TaskType`` name for ``model``'s class: ``"SEQ_CLS"``, ``"TOKEN_CLS"`` or ``"CAUSAL_LM"``;
    ConfigError for another head (e.g. ``BertForMaskedLM``)."""
    from nbkit.models.causal import is_causal_lm

    name = type(model).__name__
    if name.endswith("ForSequenceClassification"):
        return "SEQ_CLS"
    if name.endswith("ForTokenClassification"):
        return "TOKEN_CLS"
    if is_causal_lm(model) or name.endswith(("ForCausalLM", "LMHeadModel")):
        return "CAUSAL_LM"
    raise ConfigError(f"apply_lora takes a sequence classifier, a token classifier or a causal LM, got {name}; "
                      "build the fine-tuning model first (nbkit.models.build_classifier, "
                      "BertForTokenClassification, nbkit.models.build_causal_model / load_causal_model)")


def _layer_kinds():
    """The layer classes LoRA adapts as matrices: ``torch.nn.Linear`` and transformers' ``Conv1D`` (GPT-2)."""
    import torch
    from transformers.pytorch_utils import Conv1D

    return torch.nn.Linear, Conv1D


def linear_layer_names(model) -> list[str]:
    """The sorted last names of ``model``'s ``Linear`` / ``Conv1D`` layers: what ``target_modules`` may name."""
    kinds = _layer_kinds()
    return sorted({name.rpartition(".")[2] for name, mod in model.named_modules() if name and isinstance(mod, kinds)})


def _matches(module_name: str, target: str) -> bool:
    """peft's rule for a list of target names: the module's dotted name is ``target`` or ends with ``.target``."""
    return module_name == target or module_name.endswith(f".{target}")


def apply_lora(model, r: int = 8, alpha: float = 16, dropout: float = 0.05, target_modules=None, seed: int | None = 0):
    """Wrap ``model`` (a sequence or token classifier, or a GPT-2 / Llama causal LM) with LoRA adapters
    (``peft.get_peft_model``); returns the peft model, ``model`` itself changed in place: train the returned object.

    Each targeted weight W (d_out, d_in) is frozen and trains as ``W + (alpha / r) B A``, A (r, d_in), B (d_out, r)
    starting at zero (outputs start equal to ``model``'s); ``dropout`` on the adapter's input. Every other weight is
    frozen except a classifier's head (peft's ``modules_to_save`` for ``SEQ_CLS`` / ``TOKEN_CLS``: a new head must
    train). ``target_modules``: names of the layers to adapt (a module whose dotted name ends with one); None:
    :data:`DEFAULT_TARGETS`. ``seed``: A drawn under :func:`nbkit.models.loading.seeded`. ``nbkit.train.Loop``
    trains and checkpoints the transformers model inside (``loop.model``, adapters unmerged), so export the object
    returned here (:func:`export_merged`, :func:`export_adapter`).

    Raises:
        ConfigError: ``r`` < 1, ``alpha`` <= 0 or ``dropout`` outside [0, 1); a ``target_modules`` name that
            matches no layer, or a model type without default targets (its linear layer names listed); a model
            that already holds adapters; a model that is not a classifier or causal LM (:func:`task_type`).
    """
    from nbkit.models.loading import seeded

    if hasattr(model, "peft_config"):
        raise ConfigError(f"{type(model).__name__} already holds peft adapters; pass the base model to apply_lora "
                          "once (or load a saved adapter with peft.PeftModel.from_pretrained(base, folder))")
    if isinstance(r, bool) or not isinstance(r, int) or r < 1:
        raise ConfigError(f"LoRA rank r={r!r} must be a positive integer (8 or 16 are common; the adapters add "
                          "r x (d_in + d_out) weights per adapted layer)")
    if not alpha > 0:
        raise ConfigError(f"LoRA alpha={alpha!r} must be > 0; alpha = 2 x r is common (the update is scaled by "
                          "alpha / r)")
    if not 0 <= dropout < 1:
        raise ConfigError(f"LoRA dropout={dropout!r} must be in [0, 1); 0.05 or 0.1 are common")
    task = task_type(model)
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    names = [n for n, _ in model.named_modules() if n]
    if target_modules is None:
        if model_type not in DEFAULT_TARGETS:
            raise ConfigError(f"LoRA has no default target layers for model type {model_type!r} (defaults for "
                              f"{', '.join(DEFAULT_TARGETS)}); pass target_modules=[...] naming its attention "
                              f"projections among its linear layers: {', '.join(linear_layer_names(model))}")
        targets = list(DEFAULT_TARGETS[model_type])
    else:
        targets = [target_modules] if isinstance(target_modules, str) else [str(t) for t in target_modules]
        unknown = [t for t in targets if not any(_matches(n, t) for n in names)]
        if unknown or not targets:
            raise ConfigError(f"target_modules {unknown or targets} match no layer of this {type(model).__name__}; "
                              f"its linear layers are named {', '.join(linear_layer_names(model))} (a name adapts "
                              "every layer whose dotted name ends with it, e.g. 'attention.output.dense')")
    from peft import LoraConfig, TaskType, get_peft_model

    _, conv1d = _layer_kinds()
    targeted = [mod for n, mod in model.named_modules() if n and any(_matches(n, t) for t in targets)]
    config = LoraConfig(task_type=TaskType[task], r=r, lora_alpha=alpha, lora_dropout=dropout,
                        target_modules=targets,
                        fan_in_fan_out=bool(targeted) and all(isinstance(m, conv1d) for m in targeted))
    with seeded(seed):
        return get_peft_model(model, config)


def trainable_parameters(model) -> dict:
    """``{"trainable": n, "total": n, "share": trainable / total}`` for any module (tied weights counted once)."""
    from nbkit.models.bert import count_parameters

    total, trainable = count_parameters(model), count_parameters(model, trainable_only=True)
    return {"trainable": trainable, "total": total, "share": trainable / total if total else 0.0}


def _peft_task(model) -> str:
    """The ``task_type`` of a peft model's active adapter; ConfigError for a model without adapters."""
    config = getattr(model, "peft_config", None)
    if isinstance(config, dict) and not hasattr(model, "merge_and_unload"):
        raise ConfigError(f"this {type(model).__name__} holds LoRA layers but is the transformers model inside a "
                          "peft model (what Loop.model is in a LoRA run); pass the object apply_lora returned")
    if not isinstance(config, dict):
        raise ConfigError(f"expected a model returned by apply_lora (a peft model), got {type(model).__name__}; "
                          "export a plain model with nbkit.models.export_classifier / export_causal_lm")
    task = config[model.active_adapter].task_type
    return getattr(task, "value", task)


def merged_copy(model):
    """A plain transformers copy of the peft ``model`` with its adapters merged into the weights (``model`` keeps
    them). Raises ConfigError: ``model`` holds no adapters, or is the transformers model inside a peft model."""
    import copy

    _peft_task(model)
    return copy.deepcopy(model).merge_and_unload()


def export_merged(model, tokenizer, out_dir, **options) -> Path:
    """Save :func:`merged_copy` of ``model`` by the export of its task: :func:`nbkit.models.export.export_classifier`
    (``SEQ_CLS``), :func:`~nbkit.models.export.export_token_classifier` (``TOKEN_CLS``) or
    :func:`~nbkit.models.export.export_causal_lm` (``CAUSAL_LM``), ``options`` passed on; returns the folder.
    It loads without peft and gives the peft model's outputs (up to float rounding).

    Raises:
        ConfigError: ``model`` holds no adapters, or the export's own (``out_dir`` a file, a bad option).
        NonFiniteWeightsError: the merged weights hold NaN/inf (nothing written).
        WriteError: the disk is full or not writable; nothing partial is left.
    """
    from nbkit.models import export

    write = {"SEQ_CLS": export.export_classifier, "TOKEN_CLS": export.export_token_classifier,
             "CAUSAL_LM": export.export_causal_lm}[_peft_task(model)]
    return write(merged_copy(model), tokenizer, out_dir, **options)


def export_adapter(model, out_dir, tokenizer=None) -> Path:
    """Save only the adapters (``adapter_config.json``, ``adapter_model.safetensors``: A, B and a classifier's
    trained head) and the tokenizer when given, atomically (other files kept); returns the folder as a ``Path``.
    ``peft.PeftModel.from_pretrained(base, out_dir)`` over the base ``apply_lora`` wrapped gives ``model``'s outputs.

    Raises:
        ConfigError: ``model`` holds no adapters, or ``out_dir`` is an existing file.
        WriteError: the disk is full or not writable; nothing partial is left.
    """
    from nbkit.atomic import atomic_dir
    from nbkit.models.loading import quiet_transformers
    from nbkit.text.tokenizer_files import save_tokenizer

    _peft_task(model)
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise ConfigError(f"adapter directory {out} is an existing file; pass a directory path")
    with atomic_dir(out, replace=False, what="adapter export") as tmp, quiet_transformers():
        model.save_pretrained(tmp)
        if tokenizer is not None:
            save_tokenizer(tokenizer, tmp)
    return out
