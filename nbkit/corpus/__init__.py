"""A user's corpus at any size: prepared once into the token store ``nbkit-corpus/1`` (``prepare_corpus``,
also ``nbkit prepare-corpus``) and read as MLM or causal-LM blocks (:class:`StoreMLMDataset`,
:class:`StoreCausalDataset`); docs/corpus.md. Names are imported on first use.
"""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.corpus.dataset import StoreCausalDataset, StoreMLMDataset
    from nbkit.corpus.prepare import prepare_corpus

__getattr__, __dir__ = lazy_exports(__name__, __file__)
