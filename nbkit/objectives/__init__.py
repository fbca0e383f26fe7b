"""Pretraining objectives: what differs between BERT masked-LM (``mlm``) and GPT-style next-token (``causal``)
pretraining, one small object per objective in its own module, so :mod:`nbkit.recipes.pretraining` is one pipeline.

The recipe resolves ``PretrainConfig.objective`` (a string: notebook parameter = config field = job flag) with
:func:`get` and calls the object's methods at each stage; no stage tests the objective's name. A new objective is a
new module ``nbkit/objectives/<name>.py`` defining ``OBJECTIVE`` (an :class:`Objective` instance) and its name in
:data:`OBJECTIVES`. Importing this package imports nothing heavy (torch and transformers load inside the methods).
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from pathlib import Path

from nbkit.errors import ConfigError

OBJECTIVES = ("mlm", "causal", "sft")   # masked LM (BERT), next-token LM (GPT): the modules of this package
SPLITS = ("train", "validation")  # what :meth:`Objective.blocks` returns


class Objective(ABC):
    """One pretraining objective: how its blocks are built and collated, which model it builds or loads from
    ``init`` (and what it checks there), how it saves the model, its rows of ``PER_SCALE``. Stateless: one instance
    per objective (its module's ``OBJECTIVE``). ``cfg`` is a ``PretrainConfig``, ``tok`` a tokenizer, ``corpus`` a
    ``PretrainCorpus`` (``splits`` in memory, or ``store`` on disk).
    """

    #: the config value (``"mlm"``), also the run folder's first word
    name: str = ""
    #: the ``PER_SCALE`` group laid over ``"pretraining"``'s rows (``"pretraining/causal"``); None: none
    scale_rows: str | None = None
    #: how messages name the objective (``"MLM"``) and what :meth:`model` returns (``"masked LM"``)
    title: str = ""
    model_class: str = ""
    #: ``cfg.corpus`` is text the recipe prepares into a corpus store; False: :meth:`data` reads it itself
    reads_store: bool = True
    #: with ``init`` the continued-pretraining group ``pretraining/init`` applies; False: this objective's rows are
    #: already for a started model
    init_rows: bool = True
    #: ``cfg.lora`` applies (the model is wrapped with LoRA adapters); False: the lora fields are refused / unused
    takes_lora: bool = False

    def started_from(self, cfg) -> str | None:
        """The checkpoint the run starts from, as ``metrics.json`` records it: ``cfg.init`` (None: random weights)."""
        return None if cfg.init is None else str(cfg.init)

    def data(self, cfg) -> tuple[dict, dict] | None:
        """``(splits, report)`` of an objective that reads its own data (the recipe wraps them in a
        ``PretrainCorpus``); None: the recipe's bundled mix or ``cfg.corpus``'s store."""
        return None

    @property
    @abstractmethod
    def presets(self) -> dict:
        """The model presets this objective builds from random weights (name -> settings), e.g.
        :data:`nbkit.models.bert.PRESETS`."""

    def unused(self, cfg) -> dict[str, str]:
        """``{field: why}``: config fields this objective ignores (left out of the run folder's name, marked in
        ``cfg.table()``)."""
        return {}

    def check_config(self, cfg) -> None:
        """Raise ConfigError, before any work, when ``cfg.model`` is not one of :attr:`presets` (naming the objective
        that builds it, if any); ``PretrainConfig`` calls it without ``init``."""
        if cfg.model in self.presets:
            return
        takes = f"objective={self.name!r} takes one of {', '.join(self.presets)}"
        other = next((o.name for o in map(get, OBJECTIVES) if o is not self and cfg.model in o.presets), None)
        if other is None:
            raise ConfigError(f"model={cfg.model!r} is not a {self.name} preset; {takes}")
        raise ConfigError(f"model={cfg.model!r} is not a {self.name} preset ({takes}); it is a {other} preset: set "
                          f"objective={other!r} to pretrain it")

    @abstractmethod
    def check_init(self, cfg, folder: Path) -> tuple[dict, str, int]:
        """``(config, key, limit)`` of ``cfg.init``'s checkpoint in ``folder``: its ``config.json`` as a dict, and
        the name and value of its position limit (``("max_position_embeddings", 512)``) for ``cfg.block_size``.

        Raises:
            ConfigError: a checkpoint of another objective (which one to use) or an architecture this objective
                cannot train.
            CheckpointError: a folder without a usable ``config.json``.
        """

    @abstractmethod
    def blocks(self, cfg, tok, corpus) -> dict:
        """``{"train", "validation"}`` datasets of ``cfg.block_size``-token blocks (``input_ids`` (T,) per item, plus
        what :meth:`collator` reads) from ``corpus.splits`` (packed in memory) or ``corpus.store``.

        Raises:
            ConfigError: ``cfg.block_size`` past the tokenizer's limit.
            DataError: too little text for one block, a store split missing.
        """

    @abstractmethod
    def collator(self, cfg, tok):
        """The loop's ``collate_fn``: a list of :meth:`blocks` items -> ``{"input_ids", "attention_mask",
        "labels"}``, (B, T) int64 each, ``labels`` -100 where no loss is taken."""

    @abstractmethod
    def model(self, cfg, tok):
        """The model to train: preset ``cfg.model`` with ``tok``'s vocabulary and ``cfg.block_size`` positions, or
        ``cfg.init``'s weights, every one loaded (checked with :meth:`check_loaded`).

        Raises:
            ConfigError: an unknown preset, ``block_size`` past the positions, ``tok`` not the checkpoint's.
            CheckpointError: weights missing from ``cfg.init``.
        """

    def sized_model(self, cfg, bert_size: str) -> tuple[str, str | None]:
        """``(preset, reason)``: the model this objective trains when the sizing plan
        (:func:`nbkit.recipes.sizing.choose_model`) picks BERT preset ``bert_size``; ``reason`` says why it is
        another preset than ``bert_size`` (None when it is the same)."""
        return bert_size, None

    @abstractmethod
    def export(self, cfg, model, tok, model_dir: Path, generation: dict | None = None) -> None:
        """Write the trained ``model`` and ``tok`` to ``model_dir`` as a ``from_pretrained`` folder (atomic: all or
        nothing). ``generation``: settings a generating model stores (``export_causal_lm``'s keywords).

        Raises:
            ConfigError: ``generation`` out of range, or given to a model that does not generate.
            NonFiniteWeightsError: NaN or infinite weights (nothing written).
            WriteError: the disk is full or not writable.
        """

    # ----- shared by the objects ------------------------------------------------------------------
    def check_loaded(self, cfg, tok, model, report: dict, limit: int) -> None:
        """Check a model loaded from ``cfg.init`` (``tok`` the checkpoint's, ``cfg.block_size`` at most ``limit``)
        and print what was loaded (``report``: the loader's ``folder``, ``stored_dtype``, ``unused``).

        Raises:
            ConfigError: ``block_size`` past ``limit``, or ``tok`` not matching the embedding rows.
        """
        from nbkit.models.bert import check_tokenizer_matches, count_parameters
        from nbkit.models.loading import dtype_note

        check_tokenizer_matches(tok, model.config.vocab_size, Path(report["folder"]), str(cfg.init))
        if cfg.block_size > limit:
            raise ConfigError(f"block_size={cfg.block_size} exceeds init={cfg.init!r}'s positions ({limit}); "
                              f"use block_size <= {limit}")
        stored = dtype_note(report["stored_dtype"])
        print(f"loaded init={cfg.init!r}: {count_parameters(model) / 1e6:.1f} M parameters, every weight of its "
              f"{self.model_class}; not used by {self.title}: {', '.join(report['unused']) or 'none'}"
              + (f"; {stored}" if stored else ""))

    def __repr__(self) -> str:
        return f"<objective {self.name!r}>"


def get(name: str) -> Objective:
    """The objective called ``name``; ConfigError for a name not in :data:`OBJECTIVES` (the choices listed)."""
    if name not in OBJECTIVES:
        raise ConfigError(f"objective={name!r}: use one of {', '.join(map(repr, OBJECTIVES))}")
    return importlib.import_module(f"{__name__}.{name}").OBJECTIVE
