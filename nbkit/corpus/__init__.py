"""The prepared corpus store (format ``nbkit-corpus/1``, docs/corpus.md): read it for training.

``store`` reads and checks a prepared directory's ``manifest.json``; ``dataset`` serves
MLM blocks from its memory-mapped shards (:class:`StoreMLMDataset`).
"""
from nbkit._lazy import lazy_exports, names

__getattr__, __dir__ = lazy_exports(__name__, {
    **names('store', 'read_manifest', 'is_prepared', 'wait_for_store', 'store_tokenizer', 'FORMAT'),
    **names('dataset', 'StoreMLMDataset'),
})
