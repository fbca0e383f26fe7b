"""A user's corpus at any size: prepared once into the token store ``nbkit-corpus/1`` and read for training.

``prepare_corpus(inputs, out_dir, **settings) -> manifest`` (also ``nbkit prepare-corpus``) writes
the store; ``store`` reads and checks a prepared directory's ``manifest.json``; ``dataset`` serves
MLM blocks read from its shards by offset (:class:`StoreMLMDataset`). The format and its reasons are
in ``docs/corpus.md``. Names are imported lazily (``import nbkit.corpus`` stays cheap).
"""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.corpus.dataset import StoreMLMDataset
    from nbkit.corpus.manifest import DEFAULTS
    from nbkit.corpus.prepare import prepare_corpus
    from nbkit.corpus.store import FORMAT, is_prepared, read_manifest, store_tokenizer, wait_for_store

__getattr__, __dir__ = lazy_exports(__name__, __file__)
