"""Load a model from a checkpoint with every failure translated, and seed model construction.

``from_pretrained`` reports a misfitting checkpoint in a log table (silenced in notebooks) and then a
bare ``RuntimeError``; :func:`load_pretrained` captures the log, loads with ``ignore_mismatched_sizes``
to see every mismatch, and raises ``ConfigError`` (a head with another label count: both counts and
fixes) or ``CheckpointError`` (anything else, with the report).
"""
from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from nbkit.errors import CheckpointError, ConfigError

#: Parameter-name prefixes of the task heads ``reinit_head=True`` may re-initialise.
HEAD_PREFIXES = ("classifier.",)


@contextlib.contextmanager
def quiet_transformers(capture: list[str] | None = None):
    """Silence transformers' load report and per-call progress bars (one widget per checkpoint in a notebook).
    ``capture``: a list that receives every warning/error message transformers logs meanwhile (None drops them).
    """
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
    """Run the block with torch's CPU RNG seeded to ``seed`` and restored after (``torch.random.fork_rng``):
    the same seed builds the same weights, the caller's stream does not move. None: no-op. Build on CPU.
    """
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
    import json

    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
        return {int(k): v for k, v in (cfg.get("id2label") or {}).items()}
    except (OSError, ValueError, AttributeError):
        return None


def load_pretrained(model_cls, source: str | Path, *, reinit_head: bool = False, seed: int | None = 0,
                    **kwargs):
    """``model_cls.from_pretrained(source, **kwargs)`` with failures translated; returns ``(model, info)``.

    ``info``: transformers' loading info plus ``reinitialised``, lines like ``"classifier.weight (4, 64) ->
    (2, 64)"``. ``reinit_head``: the task head (:data:`HEAD_PREFIXES`) may have another shape and is then
    initialised afresh (``seed``: :func:`seeded`).

    Raises:
        ConfigError: the classification head has another label count and not ``reinit_head`` (fixes named).
        CheckpointError: any other mismatched weight, or a checkpoint transformers cannot load (its report included).
        OSError: ``source`` not found (the caller says where to look).
    """
    log: list[str] = []
    try:
        with quiet_transformers(capture=log), seeded(seed):
            model, info = model_cls.from_pretrained(str(source), ignore_mismatched_sizes=True,
                                                    output_loading_info=True, **kwargs)
    except OSError:
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
    return model, info


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
