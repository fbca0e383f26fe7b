"""BERT masked-LM pretraining (Devlin et al. 2019), the default objective.

Blocks wrapped in ``[CLS]``/``[SEP]``, 15 % of the tokens (whole words) as targets, a ``BertForMaskedLM`` with the
sparse head, saved as a fill-mask folder (``AutoModelForMaskedLM``)."""
from __future__ import annotations

from pathlib import Path

from nbkit.errors import ConfigError
from nbkit.objectives import SPLITS, Objective


class MaskedLM(Objective):
    """``objective="mlm"``: the scale's ``"pretraining"`` rows as they are, BERT presets
    (:data:`nbkit.models.bert.PRESETS`), ``init`` a BERT masked LM (``bert-base-chinese``)."""

    name = "mlm"
    title = "MLM"
    model_class = "masked LM (decoder tied to the word embeddings)"

    @property
    def presets(self) -> dict:
        from nbkit.models.bert import PRESETS

        return PRESETS

    def check_init(self, cfg, folder: Path) -> tuple[dict, str, int]:
        from nbkit.models.causal import MODEL_TYPES
        from nbkit.models.loading import checkpoint_model_type, require_model_type, saved_config

        kind = checkpoint_model_type(folder, cfg.init)
        if kind in MODEL_TYPES:
            raise ConfigError(f"init={cfg.init!r} is a {kind} causal LM, but objective='mlm' needs a BERT masked LM; "
                              "continue it with objective='causal', or pass a masked LM (bert-base-chinese, "
                              "chinese-roberta-wwm-ext)")
        require_model_type(folder, cfg.init, takes="a BERT-architecture masked LM (bert-base-chinese, "
                                                   "chinese-roberta-wwm-ext, chinese-macbert-base, ckiplab's BERTs)")
        conf = saved_config(folder)
        return conf, "max_position_embeddings", int(conf.get("max_position_embeddings", 512))

    def check_tokenizer(self, cfg, tok) -> None:
        """Raise ConfigError (the fix named) unless ``tok`` has the ``[MASK]`` and ``[PAD]`` tokens a masked LM
        trains with: a Llama/SentencePiece tokenizer (e.g. a store prepared with one) has neither."""
        missing = [name for name, i in (("mask", tok.mask_token_id), ("pad", tok.pad_token_id)) if i is None]
        if not missing:
            return
        source = f"the corpus store {cfg.corpus}" if cfg.corpus is not None else "the given tokenizer"
        raise ConfigError(
            f"objective='mlm' needs a BERT-style tokenizer with a mask token ([MASK]) and a pad token ([PAD]), but "
            f"{source} uses a {type(tok).__name__} with no {' and no '.join(missing)} token (a GPT/Llama "
            "SentencePiece or byte-level tokenizer is a causal LM's). Fix: objective='causal' to train a GPT or "
            "Llama on this tokenizer, or a BERT tokenizer for the MLM: prepare the corpus with tokenizer=None (a "
            "WordPiece trained on it) or a BERT folder (tokenizer='bert-base-chinese')")

    def blocks(self, cfg, tok, corpus) -> dict:
        """:class:`nbkit.corpus.StoreMLMDataset` per split of a store; else the mix's texts packed by
        :func:`nbkit.text.mlm.make_blocks` with ``word_ids`` for whole-word masking. ConfigError:
        :meth:`check_tokenizer`."""
        self.check_tokenizer(cfg, tok)
        if corpus.store is not None:
            from nbkit.corpus.dataset import StoreMLMDataset

            return {split: StoreMLMDataset(corpus.store, cfg.block_size, split) for split in SPLITS}
        from nbkit.text.mlm import make_blocks

        return {split: make_blocks(corpus.splits[split], tok, cfg.block_size, words_column="words")
                for split in SPLITS}

    def collator(self, cfg, tok):
        """:class:`nbkit.text.mlm.MLMCollator`: ``cfg.mlm_probability`` of the tokens as targets (80/10/10), whole
        words with ``cfg.whole_word``; padding and special tokens never chosen."""
        from nbkit.text.mlm import MLMCollator

        return MLMCollator(tok, mlm_probability=cfg.mlm_probability, whole_word=cfg.whole_word)

    def model(self, cfg, tok):
        """A ``BertForMaskedLM`` with the sparse MLM head (:func:`nbkit.models.bert.build_mlm_model`), or
        ``cfg.init``'s (:func:`nbkit.models.loading.load_mlm_model`); ``cfg.dropout`` as hidden and attention
        dropout. ConfigError: :meth:`check_tokenizer` before any weight is made, or :meth:`check_loaded`."""
        drop = {} if cfg.dropout is None else {"hidden_dropout_prob": cfg.dropout,
                                               "attention_probs_dropout_prob": cfg.dropout}
        if cfg.init is None:
            from nbkit.models.bert import build_mlm_model

            self.check_tokenizer(cfg, tok)
            return build_mlm_model(cfg.model, tok, cfg.block_size, seed=cfg.seed, **drop)
        from nbkit.models.loading import load_mlm_model

        bert, report = load_mlm_model(cfg.init, **drop)
        self.check_loaded(cfg, tok, bert, report, bert.config.max_position_embeddings)
        return bert

    def export(self, cfg, model, tok, model_dir: Path, generation: dict | None = None) -> None:
        """``save_pretrained`` and the tokenizer (``model_max_length`` capped at the positions), after a finite-weights
        check; ``generation`` is refused (a masked LM does not generate)."""
        from nbkit.atomic import atomic_dir
        from nbkit.models.bert import check_finite_weights
        from nbkit.models.loading import quiet_transformers
        from nbkit.text.tokenizer_files import save_tokenizer

        if generation:
            raise ConfigError(f"generation={generation!r} is for objective='causal'; a masked LM does not generate: "
                              "drop it")
        check_finite_weights(model, f"the trained model to {model_dir}")
        with atomic_dir(model_dir, what="model") as tmp, quiet_transformers():
            model.save_pretrained(tmp)
            save_tokenizer(tok, tmp, model_max_length=min(int(tok.model_max_length),
                                                          model.config.max_position_embeddings))


OBJECTIVE = MaskedLM()
