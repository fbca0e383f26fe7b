"""Text to model inputs: the WordPiece tokenizer, MLM blocks and masking, classification encoding.
"""
from nbkit._lazy import lazy_exports, names

__getattr__, __dir__ = lazy_exports(__name__, {
    **names('tokenizer', 'train_wordpiece', 'tokenizer_stats', 'save_stats'),
    **names('mlm', 'make_blocks', 'MLMCollator', 'encode_classification', 'classification_collator', 'check_length'),
    **names('words', 'add_words', 'segment'),
    **names('tokenizer_files', 'save_tokenizer', 'complete_tokenizer_files'),
})
