"""Load a model from a checkpoint with every failure translated, and seed model construction.

``from_pretrained`` reports a misfitting checkpoint in a log table and then a bare ``RuntimeError``;
:func:`load_pretrained` captures the log and raises ``ConfigError`` (a head with another label count) or
``CheckpointError`` (anything else, with the report). Weights load as float32 whatever the file stores
(:data:`MASTER_DTYPE`: AdamW turns float16 master weights to NaN within steps).
"""
from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from nbkit.errors import CheckpointError, ConfigError

#: Parameter-name prefixes of the task heads ``reinit_head=True`` may re-initialise.
HEAD_PREFIXES = ("classifier.",)
#: The dtype every checkpoint's weights load in: the training loop's master weights (``nbkit.train.precision``:
#: weights stay fp32 in every mode, autocast and a GradScaler decide the compute).
MASTER_DTYPE = "float32"
#: The weights files ``from_pretrained`` reads (a sharded checkpoint: its ``*.index.json`` and the shards it names).
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


@contextlib.contextmanager
def quiet_transformers(capture: list[str] | None = None):
    """Silence transformers' load report and progress bars; ``capture``: a list that receives every warning/error
    message transformers logs meanwhile (None drops them)."""
    from transformers.utils import logging as hf_logging

    from nbkit.switches import progress_bars, transformers_verbosity

    root = hf_logging.get_logger()                      # the "transformers" logger
    handler = _ListHandler(capture) if capture is not None else None
    level = logging.ERROR if handler is None else logging.WARNING
    with progress_bars("transformers", False), transformers_verbosity(level):
        if handler is None:
            yield
            return
        hf_logging.disable_default_handler()            # keep warnings, but send them to the list
        root.addHandler(handler)
        try:
            yield
        finally:
            root.removeHandler(handler)
            hf_logging.enable_default_handler()


class _ListHandler(logging.Handler):
    def __init__(self, sink: list[str]):
        super().__init__(logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(record.getMessage().replace("\x1b[1m", "").replace("\x1b[0m", ""))


@contextlib.contextmanager
def seeded(seed: int | None):
    """Run the block with torch's CPU RNG seeded to ``seed`` and restored after (``torch.random.fork_rng``): the
    same seed builds the same weights, the caller's stream does not move. None: no-op. Build on CPU."""
    if seed is None:
        yield
        return
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _shape(s) -> str:
    return "(" + ", ".join(str(int(d)) for d in s) + ")"


def _saved_labels(path: Path) -> dict | None:
    try:
        return {int(k): v for k, v in ((saved_config(path) or {}).get("id2label") or {}).items()}
    except (ValueError, AttributeError):
        return None


def load_pretrained(model_cls, source: str | Path, *, reinit_head: bool = False, seed: int | None = 0,
                    **kwargs):
    """``model_cls.from_pretrained(source, **kwargs)`` with failures translated; returns ``(model, info)``.

    ``info``: transformers' loading info plus ``reinitialised`` (lines like ``"classifier.weight (4, 64) ->
    (2, 64)"``) and ``stored_dtype`` (:func:`stored_dtype`). ``reinit_head``: the task head (:data:`HEAD_PREFIXES`)
    may have another shape and is then initialised afresh (``seed``: :func:`seeded`). The weights load as
    :data:`MASTER_DTYPE` unless ``kwargs`` has ``dtype``. A local folder is read from one whole version
    (:func:`nbkit.atomic.read_consistent`: another kernel may be replacing it).

    Raises:
        ConfigError: the classification head has another label count and not ``reinit_head`` (fixes named).
        CheckpointError: any other mismatched weight, a checkpoint transformers cannot load (its report included),
            or a folder replaced during every read.
        OSError: ``source`` not found (the caller says where to look).
    """
    import torch

    kwargs.setdefault("dtype", getattr(torch, MASTER_DTYPE))
    log: list[str] = []

    def read(folder):
        with quiet_transformers(capture=log), seeded(seed):
            return model_cls.from_pretrained(str(folder), ignore_mismatched_sizes=True, output_loading_info=True,
                                             **kwargs)

    try:
        model, info = read_whole(source, read, "checkpoint")   # a Hub name, or a path not there: OSError
    except (OSError, CheckpointError):
        raise
    except Exception as exc:  # noqa: BLE001  (whatever transformers raises, the user gets one kind)
        report = "\n".join(log[-5:])
        raise CheckpointError(
            f"loading {model_cls.__name__} from {str(source)!r} failed: {type(exc).__name__}: {str(exc)[:300]}. "
            "Check that it is a complete directory written by save_pretrained (config.json and the weights "
            "file), e.g. re-save it, or start from another checkpoint."
            + (f"\ntransformers' report:\n{report}" if report else "")) from exc
    mismatched = sorted(info.get("mismatched_keys") or [], key=lambda m: m[0])
    lines = [f"{k} {_shape(old)} -> {_shape(new)}" for k, old, new in mismatched]
    body = [m for m in mismatched if not m[0].startswith(HEAD_PREFIXES)]
    if body:
        raise CheckpointError(
            f"checkpoint {str(source)!r} does not fit {model_cls.__name__}: {len(body)} weights have other shapes "
            f"(checkpoint -> model): {'; '.join(lines[:5])}. Load it with the config it was saved with "
            "(do not override its sizes), or start from another checkpoint.")
    if mismatched and not reinit_head:
        raise ConfigError(_head_message(source, mismatched, kwargs))
    info["reinitialised"] = lines
    info["stored_dtype"] = stored_dtype(source) if Path(str(source)).is_dir() else None
    return model, info


def read_whole(source, read, what: str):
    """``read(source)``; where ``source`` is a local folder another kernel may be replacing, ``read(folder)`` of one
    whole version of it (:func:`nbkit.atomic.read_consistent`; ``what`` names it in messages)."""
    from nbkit.atomic import being_replaced, read_consistent

    folder = None if source is None else Path(source).expanduser()
    if folder is None or not (folder.is_dir() or being_replaced(folder)):
        return read(source)
    return read_consistent(folder, read, what=what)


def dtype_note(stored: str | None) -> str:
    """``""`` for float32 weights (or unknown), else one clause for the load line (``"stored in float16, ..."``)."""
    if stored in (None, MASTER_DTYPE):
        return ""
    return (f"stored in {stored}, loaded as {MASTER_DTYPE} master weights (the compute follows precision: "
            "autocast, nbkit.train.precision)")


def _head_message(source, mismatched, kwargs) -> str:
    bias = [m for m in mismatched if m[0].endswith("bias")] or mismatched
    saved_n, asked_n = int(bias[0][1][0]), int(bias[0][2][0])
    saved = _saved_labels(Path(source)) if Path(source).is_dir() else None
    names = f" {saved}" if saved and len(saved) == saved_n else ""
    return (f"checkpoint {str(source)!r} has a classification head for {saved_n} labels{names}, but "
            f"{kwargs.get('num_labels', asked_n)} labels were requested ({asked_n} outputs). Fix: either use the "
            f"checkpoint's labels (num_labels={saved_n} and its id2label), or re-initialise the head for your "
            f"labels with reinit_head=True (its trained weights are discarded: "
            f"{', '.join(m[0] for m in mismatched)}).")


def _looks_like_path(text: str) -> bool:
    return text.startswith(("/", ".", "~")) or text.count("/") > 1 or "\\" in text


def resolve_checkpoint(source, what: str = "init", alternative: str = "", weights: bool = True) -> Path:
    """The local folder of checkpoint ``source``: itself when it is a folder, else the Hugging Face cache's
    snapshot of that Hub name (fetched once when online: ``*.json``, ``*.txt``, the weights). ``what``: the
    setting's name in messages; ``alternative``: another fix to name; ``weights=False``: the tokenizer only.

    Raises:
        ConfigError: a path that does not exist; a Hub name neither cached nor downloadable (:func:`hub_message`).
        CheckpointError: a folder without ``config.json``, or without its weights (:func:`missing_weights`).
    """
    path = Path(source).expanduser()
    text = str(source)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise CheckpointError(f"{path} has no config.json; pass the folder written by save_pretrained(...) "
                                  "(e.g. nbkit's pretraining model/), not a training-state checkpoint")
        lacks = missing_weights(path) if weights else None
        if lacks:
            raise CheckpointError(f"{what}={text!r}: {path} has config.json but {lacks} (it holds: "
                                  f"{_listing(path)}). Re-save the model there with save_pretrained, or copy the "
                                  "weights file beside config.json")
        return path
    if path.exists() or _looks_like_path(text):
        raise ConfigError(f"{what}={text!r}: no directory there (resolved: {path.resolve()}); check the path"
                          + (f", or {alternative}" if alternative else ""))
    try:
        from huggingface_hub import snapshot_download

        patterns = ["*.json", "*.txt", "*.safetensors"]
        folder = Path(snapshot_download(text, allow_patterns=patterns))
        if not any(folder.glob("*.safetensors")):          # older repos: PyTorch's .bin only
            folder = Path(snapshot_download(text, allow_patterns=[*patterns, "pytorch_model*.bin"]))
    except Exception as exc:  # noqa: BLE001  (offline, not found, gated, network: one kind for the user)
        raise ConfigError(hub_message(text, exc, what, alternative)) from exc
    if not (folder / "config.json").is_file():
        raise CheckpointError(f"{what}={text!r}: the Hub repository has no config.json; it is not a transformers "
                              "model (pass a BERT checkpoint's name or folder)")
    lacks = missing_weights(folder) if weights else None
    if lacks:   # an interrupted download
        raise CheckpointError(
            f"{what}={text!r}: the Hugging Face cache's snapshot {folder} is incomplete (an interrupted download?): "
            f"it has config.json but {lacks}; it holds: {_listing(folder)}. Fix: where there is network, run "
            f"`hf download {text}` (it completes the cache; unset HF_HUB_OFFLINE for it), or `hf download {text} "
            f"--local-dir DIR` and pass {what}=DIR, a folder with config.json, the weights and vocab.txt"
            + (f"; or {alternative}." if alternative else "."))
    return folder


def missing_weights(folder) -> str | None:
    """None when ``folder`` holds weights ``from_pretrained`` can read (:data:`WEIGHT_FILES`, or a sharded index
    with every shard it names); else what is missing, as a phrase (``"no weights file (...)"``, ``"2 of the shards
    its model.safetensors.index.json names are missing: ..."``)."""
    import json

    folder = Path(folder)
    for index in sorted(folder.glob("*.index.json")):
        try:
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values()))
        except (OSError, ValueError, AttributeError):
            continue
        gone = [s for s in shards if not (folder / s).is_file()]
        if gone:
            return (f"{len(gone)} of the {len(shards)} shards its {index.name} names are missing: "
                    f"{', '.join(gone[:4])}{' ...' if len(gone) > 4 else ''}")
        if shards:
            return None
    if any((folder / f).is_file() for f in WEIGHT_FILES):
        return None
    return f"no weights file ({' or '.join(WEIGHT_FILES)})"


def _listing(folder: Path, n: int = 8) -> str:
    names = sorted(p.name for p in folder.iterdir())
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "") if names else "nothing"


def hub_message(name: str, exc: BaseException, what: str = "init", alternative: str = "") -> str:
    """The error text for a Hub name that could not be had: offline without a cached copy, or not fetched."""
    import os

    from huggingface_hub import constants

    offline = constants.is_offline_mode() or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    local = (f"download it once where there is network (`hf download {name} --local-dir DIR`) and pass "
             f"{what}=DIR, a folder with config.json, the weights and vocab.txt")
    other = f"; or {alternative}" if alternative else ""
    if offline:
        return (f"{what}={name!r} is not a local folder, and the Hugging Face cache ({constants.HF_HUB_CACHE}, "
                f"set by HF_HOME / HF_HUB_CACHE) holds no copy of it while HF_HUB_OFFLINE=1 forbids downloads. "
                f"Fix: {local}; or point HF_HOME / HF_HUB_CACHE at a cache that holds it; or unset HF_HUB_OFFLINE "
                f"to download it now{other}.")
    return (f"{what}={name!r} is not a local folder and could not be fetched from the Hugging Face Hub "
            f"({type(exc).__name__}: {str(exc)[:200]}). Check the name (e.g. bert-base-chinese, "
            f"hfl/chinese-roberta-wwm-ext) and the network, or {local}{other}.")


def weight_names(folder) -> set[str]:
    """The tensor names in ``folder``'s weights (a sharded index, ``*.safetensors`` headers or ``pytorch_model*.bin``
    on the meta device), without loading the tensors."""
    import json

    folder = Path(folder)
    names: set[str] = set()
    for index in folder.glob("*.index.json"):
        names |= set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}))
    if names:
        return names
    files = sorted(folder.glob("*.safetensors"))
    if files:
        from safetensors import safe_open

        for f in files:
            with safe_open(str(f), framework="pt") as fh:
                names |= set(fh.keys())
        return names
    for f in sorted(folder.glob("pytorch_model*.bin")):
        names |= set(_bin_meta(f))
    return names


def _bin_meta(file) -> dict:
    """The state dict of the PyTorch weights ``file`` on the meta device, memory-mapped unless it is the legacy
    (non-zip) format, which ``mmap`` refuses and ``from_pretrained`` reads."""
    import zipfile

    import torch

    return torch.load(file, map_location="meta", weights_only=True, mmap=zipfile.is_zipfile(file))


_SAFETENSORS_DTYPES = {"F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64"}


def stored_dtype(folder) -> str | None:
    """The floating dtype most of ``folder``'s weights are stored in (``"float16"``, ``"bfloat16"``, ``"float32"``),
    read from the file headers without loading the tensors; None without weights files."""
    import collections
    import json
    import struct

    folder = Path(folder)
    count: collections.Counter = collections.Counter()
    for f in sorted(folder.glob("*.safetensors")):
        with open(f, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))          # safetensors: a u64 header length, then JSON
            header = json.loads(fh.read(n))
        for k, v in header.items():
            if k != "__metadata__" and v.get("dtype") in _SAFETENSORS_DTYPES:
                count[_SAFETENSORS_DTYPES[v["dtype"]]] += 1
    if not count:
        for f in sorted(folder.glob("pytorch_model*.bin")):
            for t in _bin_meta(f).values():
                if getattr(t, "is_floating_point", lambda: False)():
                    count[str(t.dtype).removeprefix("torch.")] += 1
    return count.most_common(1)[0][0] if count else None


def _type_of_architecture(name: str) -> str | None:
    """The ``model_type`` whose transformers class is ``name`` (``BertForMaskedLM`` -> ``"bert"``), read from
    transformers' auto mappings; where two types share a class, the one whose name prefixes it."""
    from transformers.models.auto import modeling_auto

    found = []
    for mapping in (getattr(modeling_auto, n) for n in dir(modeling_auto) if n.endswith("_MAPPING_NAMES")):
        for model_type, classes in mapping.items():
            if name in (classes if isinstance(classes, (list, tuple)) else (classes,)):
                found.append(model_type)
    if not found:
        return None
    plain = name.lower()
    prefixed = [t for t in found if plain.startswith(t.replace("-", "").replace("_", ""))]
    return max(prefixed, key=len) if prefixed else found[0]


def checkpoint_model_type(folder, source=None, what: str = "init") -> str:
    """The model type of the checkpoint in ``folder`` (or of its parsed ``config.json``, a dict): ``model_type``,
    else the type of its ``architectures`` classes (``BertForMaskedLM`` -> ``"bert"``).

    Raises:
        CheckpointError: ``config.json`` unreadable, or neither ``model_type`` nor a known architecture (the line
            to add named).
    """
    import json

    if isinstance(folder, dict):
        saved, where = folder, "its config.json"
    else:
        where = str(Path(folder) / "config.json")
        try:
            saved = json.loads(Path(where).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{what}={str(source or folder)!r}: {where} does not parse ({exc}); re-save the "
                                  "model with save_pretrained") from exc
    if saved.get("model_type"):
        return str(saved["model_type"])
    archs = [str(a) for a in saved.get("architectures") or []]
    types = {t for t in map(_type_of_architecture, archs) if t}
    if len(types) == 1:
        return types.pop()
    named = f"and its architectures {archs} name {'no' if not types else 'more than one'} transformers model type" \
        if archs else "nor architectures"
    raise CheckpointError(f"{what}={str(source or folder)!r}: {where} has no model_type {named}, so nothing says "
                          "what model it holds. Fix: add the type its weights were trained as to config.json, e.g. "
                          '"model_type": "bert" for a BERT (bert-base-chinese, chinese-roberta-wwm-ext), and '
                          "pass the folder again")


def require_model_type(folder, source, allowed=("bert",), what: str = "init",
                       takes: str = "a BERT-architecture checkpoint (bert-base-chinese, chinese-roberta-wwm-ext, "
                                    "chinese-macbert-base, ckiplab's BERTs)") -> str:
    """:func:`checkpoint_model_type` of ``folder``, checked to be one of ``allowed``; returns it.

    Raises:
        ConfigError: another model type (named, with ``takes``: what the setting accepts).
        CheckpointError: no model type to be read.
    """
    kind = checkpoint_model_type(folder, source, what)
    if kind not in allowed:
        raise ConfigError(f"{what}={str(source)!r} is a {kind!r} model; {what} takes {takes}")
    return kind


def load_mlm_model(source, **config_overrides):
    """A :class:`~nbkit.models.mlm_head.SparseHeadBertForMaskedLM` holding every weight of the masked-LM
    checkpoint ``source`` (a ``BertForMaskedLM``/``BertForPreTraining`` folder or Hub name), the decoder tied to
    the word embeddings. ``config_overrides``: ``BertConfig`` fields that change no shape (dropout).
    Returns ``(model, report)``: ``source``, ``folder``, ``unused`` (checkpoint weights MLM does not use, by name)
    and ``stored_dtype``.

    Raises:
        ConfigError: not a BERT-architecture checkpoint, or a Hub name not available.
        CheckpointError: no model type, weights of the masked LM missing (named), other shapes, unloadable files.
    """
    from nbkit.models.mlm_head import SparseHeadBertForMaskedLM

    folder = resolve_checkpoint(source)
    require_model_type(folder, source, takes="a BERT-architecture masked LM (BertForMaskedLM: bert-base-chinese, "
                                             "chinese-roberta-wwm-ext, chinese-macbert-base, ckiplab's BERTs)")
    model, info = load_pretrained(SparseHeadBertForMaskedLM, folder, seed=None, attn_implementation="sdpa",
                                  **config_overrides)
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        raise CheckpointError(
            f"init={str(source)!r} lacks {len(missing)} weights of a BERT masked LM, which would start random: "
            f"{', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}. Pass a masked-LM checkpoint (its "
            "cls.predictions.* head saved: BertForMaskedLM or BertForPreTraining); a BertModel or a classifier has none")
    return model, {"source": str(source), "folder": str(folder), "unused": sorted(info.get("unexpected_keys") or []),
                   "stored_dtype": info["stored_dtype"]}


def saved_config(source) -> dict | None:
    """``config.json`` of a checkpoint folder, or of a Hub name's cached snapshot, as a dict; None when there is
    none or it does not parse. Never downloads."""
    import json

    path = Path(str(source)).expanduser()
    if path.is_dir():
        file = path / "config.json"
    elif _looks_like_path(str(source)) or path.exists():
        return None
    else:
        from huggingface_hub import try_to_load_from_cache

        try:
            found = try_to_load_from_cache(str(source), "config.json")
        except Exception:  # noqa: BLE001  (an invalid repo id: no cached config)
            return None
        if not isinstance(found, str):
            return None
        file = Path(found)
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
