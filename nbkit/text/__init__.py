"""Text to model inputs: the WordPiece tokenizer, MLM blocks and masking, causal-LM blocks, classification encoding
(per text, per token)."""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.text.causal import CausalCollator
    from nbkit.text.mlm import (
        MLMCollator,
        check_length,
        classification_collator,
        document_separator,
        encode_classification,
        make_blocks,
    )
    from nbkit.text.token_classification import encode_token_classification
    from nbkit.text.tokenizer import save_stats, tokenizer_stats, train_wordpiece
    from nbkit.text.words import add_words

__getattr__, __dir__ = lazy_exports(__name__, __file__)
