"""The prepared corpus store (format ``nbkit-corpus/1``, docs/corpus.md): read it for training.

``store`` reads and checks a prepared directory's ``manifest.json``; ``dataset`` serves
MLM blocks from its memory-mapped shards (:class:`StoreMLMDataset`).
"""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.corpus.dataset import StoreMLMDataset
    from nbkit.corpus.store import FORMAT, is_prepared, read_manifest, store_tokenizer, wait_for_store

__getattr__, __dir__ = lazy_exports(__name__, __file__)
