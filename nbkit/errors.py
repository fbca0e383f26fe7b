"""Errors a user can cause. Each message says what to do next.

All are ``ValueError`` subclasses so generic callers can catch them; notebooks
show the message, not a traceback into library internals.
"""
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
    """Training produced non-finite losses or gradients too many steps in a row."""


class WriteError(CheckpointError):
    """An artifact (checkpoint, export, tokenizer, JSON) could not be written: disk full, quota,
    read-only or no permission. The message names the path, the free space and the size needed;
    ``path``, ``errno``, ``free_bytes`` and ``needed_bytes`` hold the same as attributes."""

    path = None
    errno = None
    free_bytes = None
    needed_bytes = None
