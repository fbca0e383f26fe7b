"""Data: the bundled corpora, the user's files, labelled data cleaned and split, NER data, file checks."""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.data.corpora import load_peoples_daily, load_sentiment, split_corpus
    from nbkit.data.labeled import LabeledData
    from nbkit.data.ner import NerData, entity_spans, load_ner_files, load_peoples_daily_ner, read_ner_file
    from nbkit.data.userfiles import load_labeled_files, load_text_file

__getattr__, __dir__ = lazy_exports(__name__, __file__)
