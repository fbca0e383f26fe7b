"""Every temporary change of global or object state, as a context manager that restores it in ``finally``
(on any exception, ``KeyboardInterrupt`` included): a state switched back by hand stays switched when the
block raises. Heavy imports (torch, NumPy, transformers) happen inside the functions.
"""
from __future__ import annotations

import contextlib
import logging
import random

from nbkit.rng import seed_scope


def capture_rng() -> dict:
    """States of Python's, NumPy's and torch's CPU RNGs, and CUDA's once initialised (never creates a context)."""
    import numpy as np
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict) -> None:
    """Inverse of :func:`capture_rng` (CUDA states only if saved and CUDA is present)."""
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


@contextlib.contextmanager
def isolated_rng(seed: int | None = None, cuda: bool = True):
    """Run a block with the RNGs seeded by ``seed`` (None: as they are), then restore them (evaluation and
    collation then never move the training RNG); with a ``seed`` also inside :func:`nbkit.rng.seed_scope`.
    ``cuda=False`` leaves the CUDA RNGs alone.
    """
    import numpy as np
    import torch

    saved = capture_rng()
    if not cuda:
        saved.pop("cuda", None)
    try:
        if seed is not None:
            random.seed(seed)
            np.random.seed(seed % 2**32)
            torch.default_generator.manual_seed(seed)
            if "cuda" in saved:
                torch.cuda.manual_seed_all(seed)
            with seed_scope(seed):
                yield
        else:
            yield
    finally:
        restore_rng(saved)


@contextlib.contextmanager
def model_mode(model, training: bool):
    """``model`` in train (True) or eval (False) mode for the block; then every submodule gets its own previous
    mode back (a frozen part kept in eval stays so).
    """
    saved = [(m, m.training) for m in model.modules()]
    model.train(training)
    try:
        yield model
    finally:
        for m, was in saved:
            m.training = was


@contextlib.contextmanager
def _set_for_block(get, set_, value, result=None):
    """``set_(value)`` for the block, then ``set_(get())`` as it was before; yields ``result``."""
    old = get()
    set_(value)
    try:
        yield result
    finally:
        set_(old)


def logger_level(logger: str | logging.Logger, level: int):
    """Set a ``logging`` logger's level (by name or object) for the block; yields the logger."""
    log = logging.getLogger(logger) if isinstance(logger, str) else logger
    return _set_for_block(lambda: log.level, log.setLevel, level, log)


def transformers_verbosity(level: int):
    """Set ``transformers``' verbosity (``logging.ERROR``, ``logging.WARNING``, ...) for the block."""
    from transformers.utils import logging as hf_logging

    return _set_for_block(hf_logging.get_verbosity, hf_logging.set_verbosity, level)


def _bar_switch(library: str):
    if library == "transformers":
        from transformers.utils import logging as hf_logging

        return hf_logging.is_progress_bar_enabled, hf_logging.enable_progress_bar, hf_logging.disable_progress_bar
    if library == "datasets":
        import datasets

        return datasets.is_progress_bar_enabled, datasets.enable_progress_bars, datasets.disable_progress_bars
    raise ValueError(f"progress_bars: library must be 'transformers' or 'datasets', not {library!r}")


def progress_bars(library: str, enabled: bool):
    """Turn ``library``'s (``"transformers"`` or ``"datasets"``; else ValueError) progress bars on or off."""
    is_on, enable, disable = _bar_switch(library)

    def switch(on: bool) -> None:
        (enable if on else disable)()

    return _set_for_block(is_on, switch, enabled)
