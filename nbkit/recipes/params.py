"""A notebook's ``parameters`` cell, resolved: the scale by name plus the knobs a user overrides.

Papermill (``papermill nb.ipynb out.ipynb -p scale cpu -p seed 3``) injects the
new values as a cell *after* the cell tagged ``parameters``, so that cell may
hold only plain literals: ``scale = None``, ``seed = None``, ``vocab_size =
None``, ... Anything computed there from the preset (``scale = get_scale()``,
``vocab_size = scale.vocab_size``) would be computed before the injection and
silently keep the preset's value, or break when ``scale`` arrives as a string.
The next cell calls :func:`resolve_scale`, which turns the name into the
preset and applies every knob that is not ``None``; the notebook then reads all
its sizes from the result, so an override reaches every function that takes the
scale (``pipeline.load_tokenizer(scale)``, ``pipeline.finetune_config(scale, ...)``).
"""
from __future__ import annotations

import ast
import dataclasses

from nbkit.errors import ConfigError
from nbkit.recipes.scale import PRESETS, SCALES, Scale, get_scale
from nbkit.settings import scale_name

_KINDS = {"int": "a whole number", "int | None": 'a whole number or "all"', "float": "a number",
          "str": "a string", "tuple[int, ...]": "a list of whole numbers, e.g. [256, 512]"}


def _coerce(key: str, value, kind: str, scale_name: str, current):
    """``value`` as the field's type, or a ConfigError naming the field, the value and what it takes."""
    if kind == "tuple[int, ...]" and isinstance(value, str):  # papermill -p passes lists as text
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            pass
    ok = None
    if kind in ("int", "int | None"):
        if kind == "int | None" and isinstance(value, str) and value.strip().lower() == "all":
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        ok = value if isinstance(value, int) and not isinstance(value, bool) else None
    elif kind == "float":
        ok = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    elif kind == "str":
        ok = value if isinstance(value, str) and value else None
    elif kind == "tuple[int, ...]":
        items = [value] if isinstance(value, int) else value
        if isinstance(items, (list, tuple)) and items and all(
                isinstance(v, int) and not isinstance(v, bool) for v in items):
            ok = tuple(items)
    if ok is None:
        raise ConfigError(f"{key}={value!r}: expected {_KINDS.get(kind, kind)} (the {scale_name!r} scale "
                          f"uses {current!r}); fix the value in the parameters cell or the papermill -p option.")
    return ok


def resolve_scale(scale: str | Scale | None = None, **overrides) -> Scale:
    """The scale preset named ``scale`` with each override that is not ``None`` applied.

    Args:
        scale: ``"smoke"``, ``"cpu"``, ``"gpu"`` (any case), ``None``/``""`` for
            ``$NBKIT_SCALE`` or the default (:func:`nbkit.recipes.scale.get_scale`),
            or a :class:`Scale` already resolved (so rerunning the cell is harmless).
        overrides: :class:`Scale` field names (``seed=3``, ``vocab_size=500``,
            ``bench_sizes=[64, 128]``); ``None`` keeps the preset's value. For
            fields where the preset's ``None`` means "all of it" (``corpus_lines``,
            ``sentiment_max_train``), pass ``"all"``. Whole floats count as ints,
            text such as ``"[64, 128]"`` (papermill ``-p``) as a list.

    Returns:
        A :class:`Scale` (frozen); its ``name`` stays the preset's, so artifacts
        go to ``runs/<name>/`` as before.

    Raises:
        ConfigError: an unknown scale name, a knob that is not a :class:`Scale`
            field, or a value of the wrong type (each message names the value and the fix).
    """
    if isinstance(scale, Scale):
        base = scale
    elif scale is None or isinstance(scale, str):
        name = scale_name(scale or "") or None
        if name is not None and name not in PRESETS:
            raise ConfigError(f"scale={scale!r} is not a scale: use one of {', '.join(SCALES)} "
                              "(papermill: -p scale cpu), or None for $NBKIT_SCALE.")
        base = get_scale(name)
    else:
        raise ConfigError(f"scale={scale!r}: give the scale's name, one of {', '.join(SCALES)}, or None.")
    fields = {f.name: f.type for f in dataclasses.fields(Scale) if f.name != "name"}
    changes = {}
    for key, value in overrides.items():
        if key not in fields:
            raise ConfigError(f"{key!r} is not a scale knob; known: {', '.join(fields)}.")
        if value is not None:
            changes[key] = _coerce(key, value, str(fields[key]), base.name, getattr(base, key))
    return base.replace(**changes) if changes else base


def knob(value, default):
    """``default`` when a parameter was left at ``None``, else the value given (0 and False count as given)."""
    return default if value is None else value


def run_tag(scale: Scale) -> str:
    """``""`` for a plain preset, else ``"-"`` + its overrides, e.g. ``"-seed3"`` or ``"-seed3-vocab_size700"``.

    Notebooks append it to their own output folder (``runs/<scale>/sentiment-seed3``), so a
    run with other settings neither resumes the preset's checkpoints (a finished seed-0 run
    would say "nothing to train" and its model would be tested on a seed-3 split that
    overlaps its training data) nor overwrites the preset's artifacts. Earlier steps'
    outputs are still read from ``runs/<scale>/<step>``.
    """
    return tag_of(overrides_of(scale))


def tag_of(changes: dict) -> str:
    """``{"seed": 3, "lr": 0.001}`` -> ``"-lr0.001-seed3"`` (sorted; None -> ``all``, tuples joined by ``x``)."""
    def text(v) -> str:
        return "x".join(map(str, v)) if isinstance(v, tuple) else ("all" if v is None else f"{v:g}"
                                                                  if isinstance(v, float) else str(v))
    return "".join(f"-{k}{text(v)}" for k, v in sorted(changes.items()))


def overrides_of(scale: Scale) -> dict:
    """The knobs of ``scale`` that differ from its preset, ``{field: value}`` (empty for a plain preset)."""
    preset = PRESETS[scale.name]
    return {f.name: getattr(scale, f.name) for f in dataclasses.fields(Scale)
            if getattr(scale, f.name) != getattr(preset, f.name)}
