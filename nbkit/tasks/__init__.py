"""Fine-tuning tasks: one object per task holds each step where labelling a text and tagging its tokens differ.

The fine-tuning recipe (:mod:`nbkit.recipes.finetuning`) runs the same stages for every task and asks the task
(:func:`get`) where they differ: its scale rows and constants, its run folder, its data, how examples are
encoded and batched, which head is built, how it is scored beside its baseline, what ``metrics.json`` records
and how the model is exported. :mod:`nbkit.tasks.sentence`: a label per text (``reviews``, ``news``, ``own``);
:mod:`nbkit.tasks.token`: a tag per token (``ner``).
"""
from __future__ import annotations

from pathlib import Path

from nbkit.errors import ConfigError


class Task:
    """One fine-tuning task; ``FinetuneConfig.task`` names it and the recipe calls its methods, with ``cfg`` the
    run's :class:`~nbkit.recipes.finetuning.FinetuneConfig`.

    Attributes:
        name: the ``task`` value.
        about: what it trains on, in a few words (the unknown-task error lists it).
        headline: the test metric a comparison ranks by (``accuracy``, ``macro_f1``, ``entity_f1``).
        rows: its group in :mod:`nbkit.recipes.scales` (``PER_SCALE`` rows and ``CONSTANT`` values, each beside
            its reason), which goes over the recipe's (None: none).
        files: what ``train_file`` holds (``"labelled"`` texts, ``"tagged"`` sentences); None for a bundled
            task, which reads no file.
    """

    name: str = ""
    about: str = ""
    headline: str = ""
    rows: str | None = None
    files: str | None = None

    def check(self, cfg) -> None:
        """Raise ``ConfigError`` for data files given to a bundled task, which would train on its bundled data
        and ignore them without a word."""
        given = {k: getattr(cfg, k) for k in ("train_file", "validation_file", "test_file") if getattr(cfg, k)}
        if given and self.files is None:
            raise ConfigError(f"{', '.join(f'{k}={v!r}' for k, v in given.items())} given with task={self.name!r}, "
                              f"which trains on the bundled {self.name} and would ignore them. Fix: task='own' for "
                              "your labelled texts (with text_column, label_column), or task='ner' for your tagged "
                              "files; or drop the file to train on the bundled data")

    def files_step(self, prefix: str, cfg, *key) -> str:
        """``<prefix><train file stem>-<6 hex>``: the hash of the three files' absolute paths, their bytes
        (:func:`nbkit.corpus.sources.fingerprint`, a missing file left to the loader's error) and ``key``, so a run on
        other files, on an edited file or with other ``key`` values (e.g. columns) gets another folder and never
        resumes a model trained on other data. Cost: one read of each file (about 1 ms per MB)."""
        from nbkit.corpus.sources import fingerprint
        from nbkit.runs import path_tag

        files = [None if f is None else Path(f).expanduser().resolve()
                 for f in (cfg.train_file, cfg.validation_file, cfg.test_file)]
        where = [None if f is None else (str(f), fingerprint(f) if f.is_file() else None) for f in files]
        return prefix + path_tag(Path(cfg.train_file or "data").stem, repr((*where, *key)), 6, fallback="data")

    def describe(self, labeled, truncation: dict) -> str:
        """Lines the recipe prints before training about what loading kept, dropped and repaired ("": none)."""
        return ""


from nbkit.tasks.sentence import NEWS, OWN, REVIEWS  # noqa: E402  (they subclass Task)
from nbkit.tasks.token import NER  # noqa: E402

#: task name -> its object, in the order the help lists them
TASKS = {t.name: t for t in (REVIEWS, NEWS, OWN, NER)}


def get(name: str) -> Task:
    """The task called ``name``.

    Raises:
        ConfigError: an unknown name (the message lists every task and what it trains on).
    """
    if name not in TASKS:
        raise ConfigError(f"task={name!r}: use one of {', '.join(TASKS)} "
                          f"({'; '.join(f'{t.name}: {t.about}' for t in TASKS.values())})")
    return TASKS[name]
