"""What every recipe config shares: overrides with ``None``/``"all"`` rules, the diff against the scale's
recipe, the run tag, the table a notebook prints, and a readable repr.

A recipe config is a frozen dataclass (``@dataclass(frozen=True, repr=False)``) that also derives from
:class:`RecipeConfig` and says, through :meth:`RecipeConfig._base` and :meth:`RecipeConfig._source`,
what the scale's recipe is and which Scale field each default comes from. ``*ctx`` (e.g. the
fine-tuning ``task``) is passed through to those two hooks.
"""
from __future__ import annotations

import dataclasses

from nbkit.errors import ConfigError


class RecipeConfig:
    """Mixin for the recipe configs (:class:`~nbkit.recipes.pretraining.PretrainConfig`,
    :class:`~nbkit.recipes.finetuning.FinetuneConfig`)."""

    #: fields where papermill's ``"all"`` means None ("every line", "the whole split")
    ALL_MEANS_NONE: tuple = ()
    #: fields left out of :meth:`run_tag` (they do not change the result)
    QUIET: frozenset = frozenset()

    def _base(self, *ctx):
        """The scale's recipe for this config's scale (or None when there is none to compare with)."""
        raise NotImplementedError

    def _source(self, name: str, *ctx) -> str | None:
        """The Scale field the default of ``name`` comes from, or None (a recipe constant)."""
        raise NotImplementedError

    def unused(self) -> dict[str, str]:
        """``{field: why}`` for the fields the other fields make irrelevant (hook; default none): the
        table marks them, so a notebook does not show a setting that plays no part in its run."""
        return {}

    def _coerce(self, name: str, value):
        """An override's value as the field stores it (hook; default unchanged)."""
        return value

    def replace(self, **overrides):
        """A copy with ``overrides`` applied (``None`` values ignored; ``"all"`` for :attr:`ALL_MEANS_NONE`).

        Raises:
            ConfigError: a name that is not a field, listing the fields.
        """
        names = [f.name for f in dataclasses.fields(self)]
        unknown = sorted(set(overrides) - set(names))
        if unknown:
            raise ConfigError(f"{', '.join(unknown)}: not a {type(self).__name__} field; "
                              f"the fields are {', '.join(names)}")
        changes = {k: (None if isinstance(v, str) and v.strip().lower() == "all" and k in self.ALL_MEANS_NONE
                       else self._coerce(k, v))
                   for k, v in overrides.items() if v is not None}
        return dataclasses.replace(self, **changes) if changes else self

    def overrides(self, *ctx) -> dict:
        """``{field: value}`` where this config differs from the scale's recipe."""
        base = self._base(*ctx)
        if base is None:
            return {}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) != getattr(base, f.name)}

    def run_tag(self, *ctx) -> str:
        """``""`` for the scale's recipe, else ``"-"`` + its overrides (``"-seed3"``): a folder suffix, so a
        run with other settings neither resumes nor overwrites the recipe's
        (:func:`nbkit.recipes.params.tag_of`); :attr:`QUIET` fields and the :meth:`unused` ones (they
        play no part in the run) are left out."""
        from nbkit.recipes.params import tag_of

        quiet = self.QUIET | set(self.unused())
        return tag_of({k: v for k, v in self.overrides(*ctx).items() if k not in quiet})

    def to_dict(self) -> dict:
        """The fields as a plain dict (for ``metrics.json``)."""
        return dataclasses.asdict(self)

    def table(self, *ctx):
        """A ``pandas.DataFrame`` (field, value, from): ``from`` names the Scale field, ``recipe`` or ``override``."""
        import pandas as pd

        changed, idle = self.overrides(*ctx), self.unused()
        rows = []
        for f in dataclasses.fields(self):
            value, src = getattr(self, f.name), self._source(f.name, *ctx)
            where = "override" if f.name in changed else (f"scale.{src}" if src else "recipe")
            if f.name in idle:
                where += f"; unused: {idle[f.name]}"
            rows.append({"field": f.name, "value": "None" if value is None else str(value), "from": where})
        return pd.DataFrame(rows).set_index("field")

    def __repr__(self) -> str:
        fields = dataclasses.fields(self)
        width = max(len(f.name) for f in fields)
        return f"{type(self).__name__}(\n" + "".join(f"  {f.name:<{width}} = {getattr(self, f.name)!r},\n"
                                                    for f in fields) + ")"
