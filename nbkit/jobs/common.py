"""The jobs' flags: one per recipe config field, spelled as the field with dashes (``grad_accum_steps`` ->
``--grad-accum-steps``), so a notebook parameter, a config field and a flag share one name."""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

YES, NO = ("auto", "yes", "true", "1", "on"), ("none", "no", "false", "0", "off", "")


def _yes_no(text: str):
    """``yes``/``no`` (and auto/none, true/false, 1/0, on/off) -> bool; anything else as given, for the config
    to refuse with the field's name (ConfigError: exit 2 with one line, not argparse's usage)."""
    value = text.strip().lower()
    return True if value in YES else False if value in NO else text


def _number(kind):
    """An argparse type: ``kind(text)``, or the text itself for ``all``/``none`` (the config decides)."""
    def parse(text: str):
        if text.strip().lower() in ("all", "none"):
            return text.strip().lower()
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {'a whole number' if kind is int else 'a number'}")
    return parse


def job_parser(description: str, config_cls, output_dir_help: str, skip=()) -> argparse.ArgumentParser:
    """An ``argparse`` parser: ``--scale``, ``--output-dir``, ``--backend`` and one flag per field of
    ``config_cls`` (except ``scale`` and ``skip``); a flag left out keeps the config's value at ``--scale``."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--scale", default=None, help="smoke | cpu | gpu (default: $NBKIT_SCALE, else by hardware)")
    p.add_argument("--output-dir", type=Path, default=None, help=output_dir_help)
    p.add_argument("--backend", default=None, choices=("nccl", "gloo"),
                   help="process-group backend (default: nccl on CUDA, gloo on CPU)")
    fields = p.add_argument_group(f"{config_cls.__name__} fields (default: the scale's recipe)")
    for f in dataclasses.fields(config_cls):
        if f.name == "scale" or f.name in skip:
            continue
        kind, kw = str(f.type), {}
        if kind.startswith("bool"):   # --resume: auto|none, as docs/distributed.md and the stop lines say
            kw = dict(type=_yes_no, metavar="auto|none" if f.name == "resume" else "yes|no")
        elif kind.startswith(("tuple", "str | list")):
            kw = dict(nargs="+")
        elif kind.startswith("int"):
            kw = dict(type=_number(int))
        elif kind.startswith("float"):
            kw = dict(type=_number(float))
        fields.add_argument("--" + f.name.replace("_", "-"), dest=f.name, default=None,
                            help=(config_cls.HELP.get(f.name) or "").replace("%", "%%"), **kw)
    return p


def config_of(config_cls, a, skip=(), **fixed):
    """The config for parsed flags ``a``: ``config_cls.for_scale(a.scale, **flags, **fixed)``; a one-item list
    flag (``--corpus DIR``) is that item.

    Raises:
        ConfigError: an unknown scale or a value of the wrong type (from the config).
    """
    values = {}
    for f in dataclasses.fields(config_cls):
        v = getattr(a, f.name, None)
        if f.name == "scale" or f.name in skip or v is None:
            continue
        values[f.name] = v[0] if isinstance(v, list) and len(v) == 1 and "str" in str(f.type) else v
    return config_cls.for_scale(a.scale, **{**values, **fixed})
