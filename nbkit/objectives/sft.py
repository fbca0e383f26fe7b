"""Supervised fine-tuning on conversations (``objective="sft"``): the causal path with the loss on the assistant's
tokens only, the same loop, checkpoints, resume, TensorBoard and torchrun.

The data are conversations (the demo set of :mod:`nbkit.data.instruct`, or ``corpus``'s JSON-lines files), each
encoded alone by the tokenizer's chat template and padded into batches (:mod:`nbkit.text.chat`: no packing); the
export carries the template in ``tokenizer_config.json``, so ``pipeline("text-generation", model=dir)(messages)``
answers as nbkit trained it. The model: ``init``, else notebook 06's at this scale (:func:`default_init`), else
random weights of preset ``model`` with a warning.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from nbkit.objectives.causal import CausalLM

#: characters of a demo question's source text per token of context (:meth:`SFT.data`): half the context, the rest
#: for the phrasing, the role markers and the answer
TEXT_SHARE = 0.5


def default_init(scale: str) -> Path | None:
    """``runs/<scale>/causal/model`` when notebook 06 saved a model there, else None (nothing is created)."""
    from nbkit.atomic import being_replaced
    from nbkit.runs import step_path

    path = step_path(scale, "causal") / "model"
    return path if (path / "config.json").exists() or being_replaced(path) else None


class _VocabWithout:
    """A tokenizer's vocabulary without the given tokens (``get_vocab``, ``len``): what it was before
    :func:`nbkit.text.chat.with_chat_template` added its markers, to compare with a checkpoint's."""

    def __init__(self, tok, tokens):
        self.vocab = {t: i for t, i in tok.get_vocab().items() if t not in set(tokens)}

    def get_vocab(self) -> dict:
        return self.vocab

    def __len__(self) -> int:
        return len(self.vocab)


class SFT(CausalLM):
    """``objective="sft"``: ``PER_SCALE["pretraining/sft"]`` over the scale's pretraining rows, also with ``init``
    (SFT starts from a model as a rule: the continued-pretraining rows and lr do not apply, ``init_rows``);
    ``corpus`` names conversation files that :meth:`data` reads, not text for a corpus store (``reads_store``)."""

    name = "sft"
    scale_rows = "pretraining/sft"
    reads_store = False
    init_rows = False
    takes_lora = True

    def unused(self, cfg) -> dict[str, str]:
        why = "objective is sft (conversations: the demo set, or corpus's files)"
        out = {**super().unused(cfg), **dict.fromkeys(("mix", "fit_to_corpus", "budget_minutes"), why)}
        if cfg.corpus is None:
            out["eval_fraction"] = "the demo set keeps notebooks 03 and 07's validation splits"
        else:
            out.update({k: "corpus is set (every conversation of its files)" for k in ("max_train", "corpus_lines")})
        return out

    def prepare_tokenizer(self, cfg, tok) -> dict:
        """Give ``tok`` (in place) its chat template and markers: :func:`nbkit.text.chat.with_chat_template` with
        ``cfg.chat_template``; returns what it did. Called again it changes nothing, so every stage may call it."""
        from nbkit.text.chat import with_chat_template

        return with_chat_template(tok, cfg.chat_template)

    def started_from(self, cfg) -> str | None:
        """``cfg.init``, else notebook 06's model when :meth:`model` picks it (:func:`default_init`), else None."""
        source = cfg.init if cfg.init is not None else default_init(cfg.scale)
        return None if source is None else str(source)

    def data(self, cfg) -> tuple[dict[str, list[dict]], dict]:
        """``(splits, report)``: the conversations (``splits[split]``: lists of ``{"messages", ...}``) and what was
        read, cut and dropped. ``cfg.corpus``'s files (:func:`nbkit.data.instruct.read_conversations`, bad records per
        ``cfg.bad_records``), ``cfg.eval_fraction`` of the distinct conversations held out by ``cfg.split_seed`` (an exact
        copy stays in its original's split, so no held-out loss is on a training conversation; counted in
        ``report["n_duplicates"]``); else the demo set
        (:func:`nbkit.data.instruct.demo_conversations`, with a ``"test"`` split): notebooks 03 and 07's splits
        (``cfg.split_seed``, ``cfg.corpus_lines``), ``cfg.max_train`` examples per task, source texts cut to
        ``TEXT_SHARE * cfg.block_size`` characters.

        Raises:
            DataError: a bad record (file and line named), no conversation, too few to hold one out.
        """
        from nbkit.errors import DataError

        if cfg.corpus is None:
            from nbkit.data.instruct import demo_conversations

            return demo_conversations(seed=cfg.split_seed, ner_lines=cfg.corpus_lines, max_per_task=cfg.max_train,
                                      max_chars=max(8, int(TEXT_SHARE * cfg.block_size)))
        import numpy as np

        from nbkit.data.instruct import read_conversations
        from nbkit.jsonio import dumps

        read = read_conversations(cfg.corpus, bad=cfg.bad_records)
        r = read.report
        shapes = ", ".join(f"{v} {k}" for k, v in r["shapes"].items() if v)
        dropped = ", ".join(f"{v} {k} (first at {', '.join(r['where'][k])})" for k, v in r["dropped"].items() if v)
        print(f"conversations: {r['n_kept']:,} of {r['n_read']:,} records kept ({shapes}); dropped: "
              f"{dropped or 'none'}; trailing turns cut: {r['n_trailing_turns_cut']}"
              + (f"; records with a lone surrogate read as U+FFFD: {r['n_repaired_surrogates']} (first at "
                 f"{', '.join(r['surrogate_records'])})" if r["n_repaired_surrogates"] else ""), flush=True)
        rows = [{"messages": m, "origin": o} for m, o in zip(read.conversations, read.origins)]
        # split by unique conversation: a copy of a training conversation is never held out (its loss is not held-out)
        keys = [dumps(row["messages"], sort_keys=True) for row in rows]
        unique = list(dict.fromkeys(keys))
        r["n_duplicates"] = len(rows) - len(unique)
        n_val = round(cfg.eval_fraction * len(unique))
        if n_val < 1 or n_val >= len(unique):
            raise DataError(f"eval_fraction={cfg.eval_fraction} of {len(unique)} distinct conversations holds out "
                            f"{n_val}: give more conversations or another eval_fraction (at least one held out, one "
                            "to train)")
        order = np.random.default_rng(cfg.split_seed).permutation(len(unique))
        held = {unique[i] for i in order[:n_val].tolist()}
        if r["n_duplicates"]:
            print(f"conversations: {r['n_duplicates']:,} repeat an earlier one exactly; the held-out split is drawn "
                  f"from the {len(unique):,} distinct ones, each copy kept in its original's split", flush=True)
        splits = {"train": [row for row, k in zip(rows, keys) if k not in held],
                  "validation": [row for row, k in zip(rows, keys) if k in held]}
        return splits, read.report

    def blocks(self, cfg, tok, corpus) -> dict:
        """``{"train", "validation"}`` datasets of encoded conversations (``input_ids``, ``assistant_masks``:
        :func:`nbkit.text.chat.encode_conversations`, overflow by ``cfg.overflow``), the counts printed per split,
        after the ``[UNK]`` check of the first 2,000 training conversations
        (:func:`nbkit.text.tokenizer.check_unk_share`).

        Raises:
            DataError: the ``[UNK]`` share above 5 % (without ``allow_unk``), or no conversation of a split fits.
        """
        from datasets import Dataset

        from nbkit.objectives import SPLITS
        from nbkit.text.chat import encode_conversations
        from nbkit.text.tokenizer import check_unk_share

        self.prepare_tokenizer(cfg, tok)
        check_unk_share(tok, [m["content"] for ex in corpus.splits["train"][:2000] for m in ex["messages"]],
                        allow=cfg.allow_unk, what="the training conversations")
        out = {}
        for split in SPLITS:
            cols, r = encode_conversations(tok, [ex["messages"] for ex in corpus.splits[split]], cfg.block_size,
                                           overflow=cfg.overflow)
            print(f"sft {split}: {r['n_kept']:,} of {r['n_conversations']:,} conversations; longer than "
                  f"{cfg.block_size} tokens: {r['n_dropped_too_long']:,} dropped, {r['n_truncated']:,} truncated; "
                  f"{r['n_dropped_no_target']:,} without an answer token in the context dropped; "
                  f"{r['n_target_tokens']:,} answer tokens of {r['n_tokens']:,}", flush=True)
            out[split] = Dataset.from_dict({"input_ids": cols["input_ids"], "assistant_masks": cols["assistant_masks"]})
        return out

    def collator(self, cfg, tok):
        """:class:`nbkit.text.chat.ChatCollator`: one conversation per row, labels on the answers only."""
        from nbkit.text.chat import ChatCollator

        return ChatCollator(tok)

    def model(self, cfg, tok):
        """A ``GPT2LMHeadModel`` / ``LlamaForCausalLM`` from ``cfg.init``, else :func:`default_init`, else random
        weights of ``cfg.model`` (a warning printed); embeddings grown to added markers
        (:func:`nbkit.text.chat.fit_embeddings`), generation stopping at the end-of-turn marker and the document
        separator, gradient checkpointing with ``cfg.gradient_checkpointing``.

        Raises:
            ConfigError: ``tok`` not the checkpoint's (its markers aside), ``block_size`` past its positions, a
                template without generation markers (:meth:`prepare_tokenizer`).
            CheckpointError: weights missing from the checkpoint.
        """
        from nbkit.models.causal import build_causal_model, load_causal_model, positions
        from nbkit.text.causal import document_separator
        from nbkit.text.chat import NEW_MARKERS, fit_embeddings

        info = self.prepare_tokenizer(cfg, tok)
        source = self.started_from(cfg)
        if source is None:
            from nbkit.runs import step_path

            print(f"warning: no causal LM to start from: notebook 06 has saved no model at scale {cfg.scale!r} "
                  f"({step_path(cfg.scale, 'causal') / 'model'} is missing) and init is None, so SFT starts from "
                  f"RANDOM weights of {cfg.model!r}: it learns the answers' form from the conversations alone. Run "
                  "notebook 06 first (python -m nbkit.jobs.pretrain --objective causal), or pass init=<a causal run's "
                  "model folder, or a GPT-2 / Llama checkpoint>", flush=True)
            lm = build_causal_model(cfg.model, tok, cfg.block_size, seed=cfg.seed, dropout=cfg.dropout)
        else:
            lm, report = load_causal_model(source, tokenizer=tok, dropout=cfg.dropout)
            grows = len(tok) > lm.config.vocab_size                     # markers added here: compare without them
            named = SimpleNamespace(init=source, block_size=cfg.block_size)   # notebook 06's when init is None
            self.check_loaded(named, _VocabWithout(tok, NEW_MARKERS) if grows else tok, lm, report, positions(lm.config))
            fit_embeddings(lm, tok)
        stops = list(dict.fromkeys([info["end_of_turn_id"], document_separator(tok)[0]]))
        lm.config.eos_token_id = lm.generation_config.eos_token_id = stops
        if cfg.gradient_checkpointing:
            lm.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            lm.config.use_cache = False
        return lm

    def export(self, cfg, model, tok, model_dir: Path, generation: dict | None = None) -> None:
        """The causal export (:func:`nbkit.models.export.export_causal_lm`) with the chat template moved into
        ``tokenizer_config.json`` (:func:`nbkit.text.chat.store_chat_template`). ``cfg.lora``: ``model`` is the peft
        model; ``cfg.lora_export`` ``merged`` / ``both`` writes ``model_dir`` from
        :func:`nbkit.models.lora.merged_copy`, ``adapter`` / ``both`` the adapters and tokenizer to
        ``model_dir/adapter`` (:func:`nbkit.models.lora.export_adapter`).

        Raises:
            ConfigError: with ``cfg.lora``, a ``model`` without adapters or the model inside the peft model.
        """
        from nbkit.models.lora import export_adapter, merged_copy
        from nbkit.text.chat import store_chat_template

        if not cfg.lora or cfg.lora_export in ("merged", "both"):
            super().export(cfg, merged_copy(model) if cfg.lora else model, tok, model_dir, generation)
            store_chat_template(model_dir)
        if cfg.lora and cfg.lora_export in ("adapter", "both"):
            export_adapter(model, Path(model_dir) / "adapter", tokenizer=tok)
            store_chat_template(Path(model_dir) / "adapter")


OBJECTIVE = SFT()
