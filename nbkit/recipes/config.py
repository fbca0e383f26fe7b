"""The one config mechanism: a recipe config is a frozen dataclass of its step's settings, defaults per scale.

Every notebook parameter, config field and job flag of a setting share one name (``grad_accum_steps``,
``--grad-accum-steps``). A config subclass declares:

- ``RECIPE``: its group in :mod:`nbkit.recipes.scales` (``PER_SCALE``: the scale-dependent defaults;
  ``CONSTANT``: the others that have a reason, which its table prints beside each value);
- ``STEP``: its run folder's name under ``runs/<scale>/``;
- ``HELP``: one line per field (units in brackets), shown by :meth:`RecipeConfig.table` and ``--help``;
- ``ALL_MEANS_NONE``: fields where papermill's ``"all"`` means None; ``QUIET``: fields that change how a run
  shows or resumes, not what it trains (left out of the run's name).
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import os
from pathlib import Path
from typing import ClassVar

from nbkit.errors import ConfigError
from nbkit.recipes.scales import CONSTANT, PER_SCALE, D
from nbkit.settings import SCALES, scale_name


def cuda_usable() -> bool:
    """``torch.cuda.is_available()`` (no CUDA context made); False, never an exception, when torch is broken."""
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # a broken torch install must not break the notebooks; doctor reports it
        return False


def resolve_scale(scale: str | None = None) -> str:
    """The scale's name: ``scale`` (any case), else ``$NBKIT_SCALE``, else ``gpu`` with CUDA, else ``cpu``.
    Raises ConfigError: not one of ``smoke``, ``cpu``, ``gpu`` (the message names where it came from)."""
    given = scale_name(scale or "")
    name = given or scale_name(os.environ.get("NBKIT_SCALE", "")) or ("gpu" if cuda_usable() else "cpu")
    if name not in SCALES:
        where = f"scale={scale!r}" if given else f"NBKIT_SCALE={os.environ.get('NBKIT_SCALE')!r}"
        raise ConfigError(f"{where} is not a scale: use one of {', '.join(SCALES)} (papermill: -p scale cpu; "
                          "jobs: --scale cpu), or leave it unset for the default")
    return name


def scale_defaults(recipe: str, scale: str) -> dict:
    """``{field: value}`` of ``recipe``'s group in :mod:`nbkit.recipes.scales`: its ``PER_SCALE`` rows at
    ``scale`` and its ``CONSTANT`` values (either may be absent)."""
    i = SCALES.index(scale)
    rows = {field: (row.value if isinstance(row, D) else row)[i] for field, row in PER_SCALE.get(recipe, {}).items()}
    return {**rows, **{field: d.value for field, d in CONSTANT.get(recipe, {}).items()}}


def default_origin(recipe: str, name: str, scale: str, by: str = "") -> str | None:
    """Where ``name``'s default in ``recipe``'s group of :mod:`nbkit.recipes.scales` comes from, with its reason:
    ``"scale cpu[, by][: why]"`` (``PER_SCALE``), ``"<by or recipe>: why"`` (``CONSTANT``), None (not set there)."""
    if name in PER_SCALE.get(recipe, {}):
        row = PER_SCALE[recipe][name]
        return f"scale {scale}" + (f", {by}" if by else "") + (f": {row.why}" if isinstance(row, D) else "")
    if name in CONSTANT.get(recipe, {}):
        return f"{by or 'recipe'}: {CONSTANT[recipe][name].why}"
    return None


def tag_of(changes: dict) -> str:
    """``{"seed": 3, "lr": 0.001}`` -> ``"-lr0.001-seed3"`` (sorted; None -> ``all``, tuples joined by ``x``)."""
    def text(v) -> str:
        if isinstance(v, tuple):
            return "x".join(text(x) for x in v)
        return "all" if v is None else f"{v:g}" if isinstance(v, float) else str(v)
    return "".join(f"-{k}{text(v)}" for k, v in sorted(changes.items()))


_KINDS = {"int": "a whole number", "float": "a number", "str": "a string", "bool": "True or False",
          "tuple": "a list", "list": "a list", "Dataset": "a datasets Dataset / DatasetDict / IterableDataset"}


def _is_whole(value) -> bool:
    """An int, or a float with no fractional part; never a bool (``True`` is no count)."""
    return not isinstance(value, bool) and (isinstance(value, int) or (isinstance(value, float) and value.is_integer()))


def _coerce(name: str, value, annotation: str, default):
    """``value`` as a field annotated ``annotation`` stores it (papermill passes lists as text and whole floats for
    ints), or ConfigError naming the field, value and kind."""
    kinds = [k.strip() for k in annotation.split("|")]
    base = [k.split("[")[0] for k in kinds]
    if isinstance(value, str) and any(b in ("tuple", "list") for b in base) and value.strip().startswith(("[", "(")):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            pass
    if isinstance(value, Path) and "str" in base:
        return str(value)
    for kind, b in zip(kinds, base):
        if b == "bool" and isinstance(value, bool):
            return value
        if b == "int" and _is_whole(value):
            return int(value)
        if b == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if b == "str" and isinstance(value, str) and value:
            return value
        if b in ("tuple", "list") and isinstance(value, (list, tuple, int, str)) and kind.replace(" ", "").startswith(
                (b + "[int")):
            return _whole_numbers(name, value, b, default)
        if b in ("tuple", "list") and isinstance(value, (list, tuple)):
            return tuple(tuple(v) if isinstance(v, list) else v for v in value) if b == "tuple" else list(value)
        if b == "object":
            return value
        if b == "Dataset" and type(value).__module__.split(".")[0] == "datasets":   # DatasetDict, IterableDataset too
            return value
    wanted = " or ".join(dict.fromkeys(_KINDS.get(b, b) for b in base if b != "None"))
    raise ConfigError(f"{name}={value!r}: expected {wanted} (default {default!r}); fix the value in the "
                      "parameters cell, the papermill -p option or the job flag")


def _whole_numbers(name: str, value, kind: str, default):
    """``value`` (a number, or a list of numbers or texts such as a job flag's ``['5', '7,9']``) as a tuple or list
    of ints >= 0, or ConfigError naming the field and the bad item."""
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        for part in item.split(",") if isinstance(item, str) else [item]:
            if isinstance(part, str) and not part.strip():
                continue
            if not (part.strip().isdigit() if isinstance(part, str) else (_is_whole(part) and part >= 0)):
                raise ConfigError(f"{name}={value!r}: {part!r} is not a whole number >= 0; give indices such as "
                                  f"{name}=[5, 17] (job flag: --{name.replace('_', '-')} 5 17; default {default!r})")
            out.append(int(part))
    return tuple(out) if kind == "tuple" else out


@dataclasses.dataclass(frozen=True, repr=False)
class RecipeConfig:
    """Base of the recipe configs: build one with :meth:`for_scale`, change it with :meth:`replace`."""

    scale: str

    RECIPE: ClassVar[str] = ""
    STEP: ClassVar[str] = ""
    HELP: ClassVar[dict[str, str]] = {}
    ALL_MEANS_NONE: ClassVar[tuple] = ()
    QUIET: ClassVar[frozenset] = frozenset()
    CHOICES: ClassVar[dict[str, tuple]] = {}   # field -> the values it takes (ConfigError for another)

    def __post_init__(self):
        for name, allowed in self.CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name}={getattr(self, name)!r}: use one of {', '.join(map(repr, allowed))}")

    @classmethod
    def defaults(cls, scale: str, **context) -> dict:
        """``{field: value}`` the scale gives (hook: a subclass adds context such as the task)."""
        return scale_defaults(cls.RECIPE, scale)

    @classmethod
    def for_scale(cls, scale: str | None = None, **overrides):
        """The recipe at ``scale`` (None: :func:`resolve_scale`'s) with ``overrides`` applied as :meth:`replace`
        does (None keeps the default). Raises ConfigError: an unknown scale or field, a wrong type."""
        name = resolve_scale(scale)
        context = {k: overrides.pop(k) for k in cls.context_fields() if overrides.get(k) is not None}
        made = cls(scale=name, **cls.defaults(name, **context), **context)
        object.__setattr__(made, "_given", frozenset(context))
        return made.replace(**overrides)

    def given(self) -> frozenset:
        """Names of the fields set through :meth:`for_scale` or :meth:`replace` (not None), even to the recipe's
        value: what sizing a run for a corpus must not change (:meth:`overrides`: only the values that differ)."""
        return getattr(self, "_given", frozenset())

    @classmethod
    def context_fields(cls) -> tuple[str, ...]:
        """Fields that choose other fields' defaults (e.g. ``task``): set before the scale's defaults."""
        return ()

    def replace(self, **overrides):
        """A copy with ``overrides`` applied (None ignored; ``"all"`` is None for :attr:`ALL_MEANS_NONE`); they count
        as set (:meth:`given`). Raises ConfigError: a name that is not a field (close names and all fields listed),
        or a value of the wrong type."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - set(fields))
        if unknown:
            named = []
            for name in unknown:
                close = difflib.get_close_matches(name, fields, n=3)
                named.append(name + (f" (did you mean {' or '.join(close)}?)" if close else ""))
            raise ConfigError(f"{', '.join(named)}: not a {type(self).__name__} field; the fields are "
                              f"{', '.join(fields)}")
        changes = {}
        for k, v in overrides.items():
            if v is None:
                continue
            if isinstance(v, str) and v.strip().lower() == "all" and k in self.ALL_MEANS_NONE:
                changes[k] = None
            else:
                changes[k] = _coerce(k, v, str(fields[k].type), getattr(self, k))
        if "scale" in changes:
            changes["scale"] = resolve_scale(changes["scale"])
        if not changes:
            return self
        new = dataclasses.replace(self, **changes)
        object.__setattr__(new, "_given", self.given() | set(changes))
        return new

    def base(self):
        """The scale's recipe this config started from (same scale and context fields, no overrides)."""
        return type(self).for_scale(self.scale, **{k: getattr(self, k) for k in self.context_fields()})

    def overrides(self) -> dict:
        """``{field: value}`` where this config differs from :meth:`base`."""
        base = self.base()
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) != getattr(base, f.name)}

    def origin(self, name: str) -> str | None:
        """Where ``name``'s default comes from, with its reason (hook; :func:`default_origin` of :attr:`RECIPE`):
        ``"scale cpu"``, ``"recipe: why"``, or None for a plain default."""
        return f"scale {self.scale}" if name == "scale" else default_origin(self.RECIPE, name, self.scale)

    def unused(self) -> dict[str, str]:
        """``{field: why}`` for fields the other fields make irrelevant (hook; default none)."""
        return {}

    def run_tag(self) -> str:
        """``""`` for the scale's recipe, else its overrides (``"-seed3"``) but :attr:`QUIET` and unused fields: a
        folder suffix, so a run with other settings neither resumes nor overwrites another's."""
        quiet = self.QUIET | set(self.unused()) | set(self.context_fields())
        return tag_of({k: v for k, v in self.overrides().items() if k not in quiet})

    def run_dir(self) -> Path:
        """``runs/<scale>/<STEP><run_tag>`` (created): where this run writes."""
        from nbkit.runs import step_dir

        return step_dir(self.scale, self.STEP + self.run_tag())

    def to_dict(self) -> dict:
        """The fields as a plain dict (for ``metrics.json``); a ``datasets`` object as its one-line description."""
        import copy

        from nbkit.corpus.store import describe_input, is_datasets_object

        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {k: describe_input(v) if is_datasets_object(v) else copy.deepcopy(v) for k, v in values.items()}

    def table(self):
        """A ``pandas.DataFrame`` indexed by field: ``value``, ``from`` (``override``, ``sized for the corpus`` or
        :meth:`origin`, with what is unused) and ``meaning`` (:attr:`HELP`)."""
        import pandas as pd

        changed, idle, given = self.overrides(), self.unused(), self.given()
        rows = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in changed:
                where = "override" if f.name in given else "sized for the corpus"
            else:
                where = self.origin(f.name) or "recipe"
            if f.name in idle:
                where += f"; unused: {idle[f.name]}"
            rows.append({"field": f.name, "value": "None" if value is None else str(value), "from": where,
                         "meaning": self.HELP.get(f.name, "")})
        return pd.DataFrame(rows).set_index("field")

    def __repr__(self) -> str:
        fields = dataclasses.fields(self)
        width = max(len(f.name) for f in fields)
        return f"{type(self).__name__}(\n" + "".join(f"  {f.name:<{width}} = {getattr(self, f.name)!r},\n"
                                                    for f in fields) + ")"
