"""GPT-style next-token pretraining: a packed stream with the document separator after each text, GPT-2 / Llama
presets (:mod:`nbkit.models.causal`), ``init`` a published causal LM (``uer/gpt2-chinese-cluecorpussmall``), saved
as a ``pipeline("text-generation")`` folder (:func:`nbkit.models.export.export_causal_lm`)."""
from __future__ import annotations

from pathlib import Path

from nbkit.errors import ConfigError
from nbkit.objectives import SPLITS, Objective


class CausalLM(Objective):
    """``objective="causal"``: ``PER_SCALE["pretraining/causal"]`` over the scale's pretraining rows; no masking."""

    name = "causal"
    scale_rows = "pretraining/causal"
    title = "causal LM"
    model_class = "causal LM"

    @property
    def presets(self) -> dict:
        from nbkit.models.causal import PRESETS

        return PRESETS

    def unused(self, cfg) -> dict[str, str]:
        return {k: f"objective is {self.name} (no masking)" for k in ("mlm_probability", "whole_word")}

    def check_init(self, cfg, folder: Path) -> tuple[dict, str, int]:
        from nbkit.models.causal import read_causal_config

        conf = read_causal_config(folder, str(cfg.init))
        key = "n_positions" if conf["model_type"] == "gpt2" else "max_position_embeddings"
        return conf, key, int(conf.get(key) or conf.get("n_ctx") or 1024)

    def blocks(self, cfg, tok, corpus) -> dict:
        """:class:`nbkit.corpus.dataset.StoreCausalDataset` per split of a store; else the mix's texts packed by
        :func:`nbkit.text.mlm.make_blocks` with ``causal=True`` (``input_ids`` and ``next_id``)."""
        if corpus.store is not None:
            from nbkit.corpus.dataset import StoreCausalDataset

            return {split: StoreCausalDataset(corpus.store, cfg.block_size, split) for split in SPLITS}
        from nbkit.text.mlm import make_blocks

        return {split: make_blocks(corpus.splits[split], tok, cfg.block_size, causal=True) for split in SPLITS}

    def collator(self, cfg, tok):
        """:class:`nbkit.text.causal.CausalCollator`: next-token labels, shifted by the collator."""
        from nbkit.text.causal import CausalCollator

        return CausalCollator(tok)

    def model(self, cfg, tok):
        """Preset ``cfg.model`` (:func:`nbkit.models.causal.build_causal_model`), or ``cfg.init``'s with every weight
        (:func:`nbkit.models.causal.load_causal_model`); ``cfg.dropout`` None keeps theirs."""
        from nbkit.models.causal import build_causal_model, load_causal_model, positions

        if cfg.init is None:
            return build_causal_model(cfg.model, tok, cfg.block_size, seed=cfg.seed, dropout=cfg.dropout)
        lm, report = load_causal_model(cfg.init, tokenizer=tok, dropout=cfg.dropout)
        self.check_loaded(cfg, tok, lm, report, positions(lm.config))
        return lm

    def sized_model(self, cfg, bert_size: str) -> tuple[str, str | None]:
        """The preset of ``cfg.model``'s family at BERT preset ``bert_size``'s size, else ``cfg.model`` kept."""
        from nbkit.models.causal import family_preset

        family = cfg.model.split("-")[0]
        preset = family_preset(family, bert_size)
        if preset is None:
            return cfg.model, f"causal: no {family} preset of BERT-{bert_size}'s size, {cfg.model} kept"
        return preset, f"causal: {preset}, the {family} preset of BERT-{bert_size}'s size"

    def export(self, cfg, model, tok, model_dir: Path, generation: dict | None = None) -> None:
        """:func:`nbkit.models.export.export_causal_lm` with ``generation`` as its keywords
        (:func:`check_generation_keys`)."""
        from nbkit.models.export import export_causal_lm

        export_causal_lm(model, tok, model_dir, **check_generation_keys(generation))


#: the ``generation`` settings a causal export writes into ``generation_config.json``
GENERATION_KEYS = ("repetition_penalty", "no_repeat_ngram_size")


def check_generation_keys(generation: dict | None) -> dict:
    """``generation`` as export keywords ({} for None).

    Raises:
        ConfigError: a key outside :data:`GENERATION_KEYS`; ``max_new_tokens`` with why it is not written."""
    generation = dict(generation or {})
    unknown = sorted(set(generation) - set(GENERATION_KEYS))
    if unknown:
        why = (" (no fixed length is exported: the bare pipeline call writes up to the end of the context; pass "
               "max_new_tokens to the pipeline call instead)" if "max_new_tokens" in unknown else "")
        raise ConfigError(f"generation keys {unknown} are not exported{why}; the export takes "
                          f"{', '.join(GENERATION_KEYS)}")
    return generation


OBJECTIVE = CausalLM()
