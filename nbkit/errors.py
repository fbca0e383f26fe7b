"""Errors a user can cause, each message naming the fix; ``ValueError`` subclasses, so generic callers catch them."""
from __future__ import annotations


class NbkitError(ValueError):
    """Base class: bad input or configuration; the message names the fix."""


class DataError(NbkitError):
    """A corpus or labelled file cannot be used (empty, missing column, bad encoding, unseen labels)."""


class ConfigError(NbkitError):
    """An impossible setting (block size above the position limit, unknown preset, ...)."""


class CheckpointError(NbkitError):
    """A checkpoint is missing, incomplete or does not match the model."""


class NonFiniteLossError(NbkitError):
    """Training produced a non-finite loss (the step is named), or non-finite gradients too many steps in a row."""


class NonFiniteWeightsError(NonFiniteLossError):
    """A model about to be saved (checkpoint, trained model, export) holds NaN or inf weights: nothing is written."""


class WriteError(CheckpointError):
    """An artifact could not be written (disk full, quota, read-only, no permission); ``path``, ``errno``,
    ``free_bytes``, ``needed_bytes`` as in the message.
    """

    path = errno = free_bytes = needed_bytes = None
