"""The causal LM's honest baseline: an interpolated Kneser-Ney n-gram model over a store's token ids.

A GPT's held-out perplexity beside a bigram's and a trigram's, trained and scored on the same tokens, says what
the network learned past local statistics. Smoothing: interpolated modified Kneser-Ney (Chen & Goodman 1998,
three discounts per order), or one fixed discount ``D``; the unigram level is interpolated with the uniform
distribution, so every id in ``[0, vocab_size)`` gets a probability > 0.

Over integer ids with numpy (``nltk.lm`` works on strings and is far slower; ``kenlm`` needs a C++ build): an
n-gram is one int64 key (``V**order < 2**63``), counts are sorted key arrays, lookups ``np.searchsorted``.
Fitting and scoring cost ``O(n log T)`` per token (``T`` distinct n-grams), memory ``O(T)``.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from nbkit.errors import ConfigError, DataError

_CHUNK = 1 << 20   # tokens per chunk when streaming (8 MiB of int64 ids)


def _ngram_keys(ids: np.ndarray, k: int, vocab_size: int) -> np.ndarray:
    """``(len(ids) - k + 1,)`` int64 keys of every k-gram of ``ids`` (base ``vocab_size``, oldest token first)."""
    n = len(ids) - k + 1
    if n <= 0:
        return np.empty(0, dtype=np.int64)
    keys = ids[:n].astype(np.int64)
    for j in range(1, k):
        keys = keys * vocab_size + ids[j:j + n]
    return keys


def _merge(keys: np.ndarray, counts: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys and summed counts of ``(keys, counts)`` plus the raw keys ``new``."""
    u, c = np.unique(new, return_counts=True)
    merged, at = np.unique(np.concatenate([keys, u]), return_inverse=True)
    summed = np.bincount(at, weights=np.concatenate([counts, c]).astype(np.float64), minlength=len(merged))
    return merged, summed.astype(np.int64)                                 # float64 counts are exact below 2**53


def _lookup(sorted_keys: np.ndarray, values: np.ndarray, query: np.ndarray, default=0.0) -> np.ndarray:
    """``values`` at ``query`` keys found in ``sorted_keys``, ``default`` elsewhere (``(len(query),)``)."""
    out = np.full(len(query), default, dtype=np.float64)
    if len(sorted_keys) == 0 or len(query) == 0:
        return out
    at = np.searchsorted(sorted_keys, query)
    at_c = np.minimum(at, len(sorted_keys) - 1)
    hit = sorted_keys[at_c] == query
    out[hit] = values[at_c[hit]]
    return out


def _discounts(counts: np.ndarray) -> tuple[float, float, float]:
    """Modified-KN discounts ``(D1, D2, D3+)`` from count-of-counts ``n_c`` (Chen & Goodman 1998):
    ``Y = n1/(n1+2 n2)``, ``D_c = c - (c+1) Y n_{c+1}/n_c``; each clipped to ``[0, c]`` (a tiny corpus can
    make the estimate leave that range, and ``D_c <= c`` keeps every probability >= 0)."""
    n = [int(np.count_nonzero(counts == c)) for c in (1, 2, 3, 4)]
    if n[0] == 0 or n[1] == 0:
        return 0.5, 1.0, 1.5   # too few counts to estimate: the usual middle values
    y = n[0] / (n[0] + 2 * n[1])
    out = []
    for c in (1, 2, 3):
        d = c - (c + 1) * y * n[c] / n[c - 1] if n[c - 1] else c - 0.5
        out.append(float(min(max(d, 0.0), c)))
    return out[0], out[1], out[2]


class _Level:
    """One order's tables: n-gram keys -> discounted numerator, context keys -> total and back-off weight."""

    def __init__(self, keys: np.ndarray, counts: np.ndarray, k: int, vocab_size: int, discount):
        self.k = k
        self.d = _discounts(counts) if discount is None else (float(discount),) * 3
        d = np.asarray(self.d)
        disc = np.where(counts >= 3, d[2], d[np.clip(counts, 1, 3) - 1])   # D(c) of each n-gram, (T,)
        self.keys, self.num = keys, np.maximum(counts - disc, 0.0)
        ctx = keys // vocab_size                                            # the context of each n-gram
        first = np.ones(len(ctx), dtype=bool)
        first[1:] = ctx[1:] != ctx[:-1]                                     # keys sorted => contexts grouped
        starts = np.flatnonzero(first)
        self.ctx_keys = ctx[starts]
        self.ctx_total = np.add.reduceat(counts, starts).astype(np.float64) if len(starts) else np.empty(0)
        mass = np.add.reduceat(disc, starts) if len(starts) else np.empty(0)
        self.ctx_gamma = mass / np.maximum(self.ctx_total, 1e-300)


class NgramLM:
    """An interpolated (modified) Kneser-Ney n-gram model over token ids ``0 .. vocab_size-1``.

    ``P_k(w | h) = max(a_k(hw) - D(a_k(hw)), 0) / A_k(h) + gamma_k(h) * P_{k-1}(w | h')`` with ``h'`` the
    context ``h`` without its oldest token, ``A_k(h) = sum_w a_k(hw)``, ``gamma_k(h)`` the discounted mass
    ``sum_w D(a_k(hw)) / A_k(h)``, and ``P_k(w|h) = P_{k-1}(w|h')`` where ``A_k(h) = 0``. ``a_n`` are raw counts;
    ``a_k`` (``k < n``) continuation counts ``N1+(. h w)``; ``P_0 = 1/vocab_size``. Near a row's start the
    context is shorter, as a causal LM's first positions see less.

    Args:
        order: ``n`` (1, 2 or 3 typical; any ``n >= 1`` with ``vocab_size**n < 2**63``).
        vocab_size: ``V``; every id must be in ``[0, V)``.
        discount: ``None`` for modified KN (three discounts per order from the data), or one ``D`` in
            ``(0, 1]`` for every count (interpolated absolute discounting with KN lower orders).

    Attributes:
        train_tokens: tokens of the training stream(s) seen by :meth:`fit`.
        discounts: ``{k: (D1, D2, D3+)}`` used at each order after :meth:`fit`.

    Raises:
        ConfigError: ``order < 1``, ``vocab_size < 1``, ``vocab_size**order`` past int64, a discount out of
            range.
    """

    def __init__(self, order: int, vocab_size: int, discount: float | None = None):
        order, vocab_size = int(order), int(vocab_size)
        if order < 1 or vocab_size < 1:
            raise ConfigError(f"NgramLM needs order >= 1 and vocab_size >= 1, got order={order}, "
                              f"vocab_size={vocab_size}")
        if vocab_size ** order >= 2 ** 63:
            raise ConfigError(f"vocab_size**order = {vocab_size}**{order} does not fit an int64 key; use a lower "
                              "order or a smaller vocabulary")
        if discount is not None and not 0 < float(discount) <= 1:
            raise ConfigError(f"discount must be in (0, 1] or None (modified Kneser-Ney), got {discount}")
        self.order, self.vocab_size, self.discount = order, vocab_size, discount
        self.train_tokens = 0
        self._raw = {k: (np.empty(0, np.int64), np.empty(0, np.int64)) for k in range(1, order + 1)}
        self._levels: dict[int, _Level] | None = None

    def __repr__(self) -> str:
        return (f"NgramLM(order={self.order}, vocab_size={self.vocab_size}, discount={self.discount}, "
                f"train_tokens={self.train_tokens:,})")

    def _check(self, ids: np.ndarray, what: str) -> np.ndarray:
        ids = np.asarray(ids)
        if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
            raise DataError(f"{what}: expected a 1-D array of integer token ids, got shape {ids.shape} "
                            f"dtype {ids.dtype}")
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size):
            raise DataError(f"{what}: token ids span [{int(ids.min())}, {int(ids.max())}], outside "
                            f"[0, {self.vocab_size}); pass the vocab_size of the tokenizer that made them")
        return ids.astype(np.int64, copy=False)

    def fit(self, chunks: Iterable[np.ndarray]) -> "NgramLM":
        """Count the n-grams of one token stream given as consecutive chunks (``(L_i,)`` int arrays; n-grams
        that span two chunks are counted, as in the whole stream). Calling again adds another stream (no
        n-gram spans the two). Returns ``self``.

        Raises:
            DataError: an id outside ``[0, vocab_size)``, or no tokens at all.
        """
        tail = np.empty(0, dtype=np.int64)
        for chunk in chunks:
            chunk = self._check(chunk, "NgramLM.fit")
            if not chunk.size:
                continue
            ids = np.concatenate([tail, chunk])
            for k in range(1, self.order + 1):
                # n-grams ending in this chunk only: the tail adds context, never a token counted twice
                keys = _ngram_keys(ids[max(0, len(tail) - k + 1):], k, self.vocab_size)
                self._raw[k] = _merge(*self._raw[k], keys)
            self.train_tokens += int(chunk.size)
            tail = ids[-(self.order - 1):] if self.order > 1 else tail
        if self.train_tokens == 0:
            raise DataError("NgramLM.fit got no tokens; pass the training split's token stream")
        self._levels = None
        return self

    @property
    def levels(self) -> dict[int, _Level]:
        """The smoothed tables per order, built on first use after :meth:`fit`."""
        if self._levels is None:
            if self.train_tokens == 0:
                raise DataError("NgramLM has not been fitted; call fit(train_stream) first")
            V, lv = self.vocab_size, {}
            for k in range(1, self.order + 1):
                if k == self.order:
                    keys, counts = self._raw[k]
                else:   # continuation counts: distinct left extensions of each k-gram among (k+1)-gram types
                    keys, counts = np.unique(self._raw[k + 1][0] % V ** k, return_counts=True)
                lv[k] = _Level(keys, counts.astype(np.int64), k, V, self.discount)
            self._levels = lv
        return self._levels

    @property
    def discounts(self) -> dict[int, tuple[float, float, float]]:
        """``{order k: (D1, D2, D3+)}`` applied at each order (estimated, or the fixed ``discount``)."""
        return {k: level.d for k, level in self.levels.items()}

    def _window_probs(self, windows: np.ndarray, ctx_len: np.ndarray) -> np.ndarray:
        """``(P,)`` ``P(windows[:, -1] | the ctx_len tokens before it in the window)``: ``windows`` ``(P, n)``
        int64 (leading columns past ``ctx_len`` are ignored), ``ctx_len`` ``(P,)`` in ``[0, n-1]``."""
        V, levels = self.vocab_size, self.levels
        p = np.full(len(windows), 1.0 / V)                              # P_0, (P,)
        for k in range(1, self.order + 1):
            idx = np.flatnonzero(ctx_len >= k - 1)                      # positions with k-1 tokens of context
            if not len(idx):
                break
            keys = np.zeros(len(idx), dtype=np.int64)                   # the k-gram ending at each, (P_k,)
            for col in range(self.order - k, self.order):
                keys = keys * V + windows[idx, col]
            lv, ctx = levels[k], keys // V
            total = _lookup(lv.ctx_keys, lv.ctx_total, ctx)
            gamma = _lookup(lv.ctx_keys, lv.ctx_gamma, ctx)
            num = _lookup(lv.keys, lv.num, keys)
            seen, lower = total > 0, p[idx]
            p[idx] = np.where(seen, num / np.where(seen, total, 1.0) + gamma * lower, lower)
        return p

    def probabilities(self, rows: np.ndarray) -> np.ndarray:
        """``(N, L-1)`` ``P(row[t] | row[max(0, t-n+1):t])`` for ``t = 1 .. L-1`` of each row of ``rows``
        ``(N, L)`` (or one ``(L,)`` row): each row is scored as a causal LM scores a block (no context crosses
        rows, the first token is context only).

        Raises:
            DataError: ids out of range, rows shorter than 2 tokens.
        """
        rows = np.asarray(rows)
        if rows.ndim == 1:
            rows = rows[None, :]
        if rows.ndim != 2 or rows.shape[1] < 2:
            raise DataError(f"NgramLM.probabilities needs rows of >= 2 tokens (N, L), got shape {rows.shape}")
        n_rows, length = rows.shape
        flat = self._check(rows.reshape(-1), "NgramLM.probabilities")  # (N*L,)
        pos = np.arange(len(flat))                                      # (N*L,)
        n = self.order
        windows = np.stack([flat[np.maximum(pos - j, 0)] for j in range(n - 1, -1, -1)], axis=1)  # (N*L, n)
        ctx_len = np.minimum(np.tile(np.arange(length), n_rows), n - 1)  # context stops at the row's start
        return self._window_probs(windows, ctx_len).reshape(n_rows, length)[:, 1:]

    def distribution(self, context: Iterable[int] = ()) -> np.ndarray:
        """``(V,)`` ``P(w | context)`` for every id ``w`` (the last ``n-1`` tokens of ``context`` are used; an
        empty context gives the unigram level ``P_1``). It sums to 1. ``O(n V log T)``: for tests and
        inspection, not for scoring a stream."""
        ctx = self._check(np.asarray(list(context), dtype=np.int64), "NgramLM.distribution")
        ctx = ctx[len(ctx) - min(len(ctx), self.order - 1):]
        V = self.vocab_size
        windows = np.zeros((V, self.order), dtype=np.int64)             # (V, n): context right-aligned, then w
        if len(ctx):
            windows[:, self.order - 1 - len(ctx):self.order - 1] = ctx
        windows[:, -1] = np.arange(V)
        return self._window_probs(windows, np.full(V, len(ctx)))


def store_stream(path, split: str, chunk_tokens: int = _CHUNK) -> Iterator[np.ndarray]:
    """The token ids of one split of a prepared store, in manifest order (the stream the store's datasets
    cut into blocks; documents end with the store's ``sep_id``), as ``(<= chunk_tokens,)`` int64 chunks.

    Raises:
        DataError: not a complete store, an unknown split, a damaged shard (``nbkit.corpus.store``).
    """
    from nbkit.corpus import store

    path = Path(path).expanduser()
    manifest = store.read_manifest(path)
    dtype = np.dtype(manifest["dtype"]).newbyteorder("<")
    for ids_path, _, n in store.split_shards(path, manifest, split):
        mm = np.memmap(ids_path, dtype=dtype, mode="r", shape=(n,)) if n else np.empty(0, dtype)
        for lo in range(0, n, chunk_tokens):
            yield np.asarray(mm[lo:lo + chunk_tokens], dtype=np.int64)


def _block_rows(blocks, max_blocks: int | None = None, chunk: int = 1024) -> Iterator[np.ndarray]:
    """``(n, B+1)`` int64 rows of causal blocks: ``input_ids`` then ``next_id`` (-100 where the block has no
    next token), from a ``datasets.Dataset`` of :func:`nbkit.text.mlm.make_blocks` (``causal=True``) or a
    :class:`nbkit.corpus.dataset.StoreCausalDataset`, the first ``max_blocks`` (None: all)."""
    n = len(blocks) if max_blocks is None else min(len(blocks), int(max_blocks))
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        if hasattr(blocks, "column_names"):       # datasets.Dataset: a slice is a dict of columns
            part = blocks[lo:hi]
            ids, nxt = part["input_ids"], part.get("next_id") or [-100] * (hi - lo)
        else:
            items = [blocks[i] for i in range(lo, hi)]
            ids = [np.asarray(x["input_ids"]) for x in items]
            nxt = [int(x.get("next_id", -100)) for x in items]
        yield np.concatenate([np.asarray(ids, dtype=np.int64), np.asarray(nxt, dtype=np.int64)[:, None]], axis=1)


def score_blocks(lm: NgramLM, blocks, max_blocks: int | None = None) -> dict:
    """Held-out cross-entropy of ``lm`` over the first ``max_blocks`` causal blocks (None: all) exactly as the loop
    evaluates a causal LM on them (``nbkit.text.causal.CausalCollator``'s labels): in each block, every token after
    the first and the block's ``next_id`` where there is one, each from up to ``order - 1`` tokens before it inside
    the block. ``blocks``: a ``datasets.Dataset`` of causal blocks, a
    :class:`nbkit.corpus.dataset.StoreCausalDataset`, or any sequence of ``{"input_ids": (B,) ids, "next_id": int}``
    (``next_id`` -100 or absent: no next token).

    Returns:
        ``{"order", "eval_loss" (mean negative log-likelihood, nats/token), "eval_perplexity" (exp of it),
        "eval_tokens" (targets scored), "train_tokens" (tokens ``lm`` was fitted on)}``.

    Raises:
        DataError: no block with a target, ids outside the model's vocabulary, the model not fitted.
    """
    nll, count = 0.0, 0
    for rows in _block_rows(blocks, max_blocks):
        has_next = rows[:, -1] != -100                       # (n,)
        rows = rows.copy()
        rows[~has_next, -1] = 0                               # a placeholder id, never scored
        logp = np.log(lm.probabilities(rows))                 # (n, B) targets 1 .. B
        logp[~has_next, -1] = 0.0
        nll -= float(logp.sum())
        count += int(logp.shape[0] * (logp.shape[1] - 1) + has_next.sum())
    if count == 0:
        raise DataError("score_blocks got no block to score; pass the validation blocks (pretraining.blocks)")
    loss = nll / count
    return {"order": lm.order, "eval_loss": loss, "eval_perplexity": math.exp(loss), "eval_tokens": count,
            "train_tokens": lm.train_tokens}


def _train_chunks(blocks) -> Iterator[np.ndarray]:
    """The token stream a causal LM trains on from ``blocks``: a store's split stream read directly (as far as
    its blocks reach, plus the last one's next token), else the blocks' ``input_ids`` in order."""
    from nbkit.corpus.dataset import StoreCausalDataset

    if isinstance(blocks, StoreCausalDataset):
        left = min(blocks.n_tokens, len(blocks) * blocks.block_size + 1)
        for chunk in store_stream(blocks.path, blocks.split):
            if left <= 0:
                break
            yield chunk[:left]
            left -= len(chunk)
        return
    for rows in _block_rows(blocks):
        yield rows[:, :-1].reshape(-1)


def causal_baselines(blocks: dict, vocab_size: int, orders: Iterable[int] = (2, 3), *,
                     max_eval_blocks: int | None = None, discount: float | None = None) -> list[dict]:
    """One :class:`NgramLM` per order fitted on every token of ``blocks["train"]`` once and scored with
    :func:`score_blocks` on the first ``max_eval_blocks`` of ``blocks["validation"]``: ``[{"model": "2-gram KN",
    **score_blocks' keys}, ...]``. Raises as :class:`NgramLM` and :func:`score_blocks`."""
    out = []
    for order in orders:
        lm = NgramLM(order, vocab_size, discount=discount).fit(_train_chunks(blocks["train"]))
        kind = "KN" if discount is None else f"abs. discount {discount}"
        out.append({"model": f"{order}-gram {kind}",
                    **score_blocks(lm, blocks["validation"], max_blocks=max_eval_blocks)})
    return out


def compare_with_baselines(lm: dict, baselines: list[dict]) -> dict:
    """The causal LM's held-out perplexity beside the n-gram baselines' (:func:`causal_baselines`' rows). ``lm``:
    its ``eval_loss``, ``eval_perplexity``, ``eval_tokens``, ``train_tokens`` and ``model`` name.

    Returns:
        ``{"rows": [{"model", "eval_perplexity", "eval_loss", "eval_tokens", "train_tokens"}, ...] (the LM
        first), "beats": {"2-gram KN": bool, ...}, "same_targets": bool (every row scored as many targets),
        "text": one line per baseline saying whether the LM beat it and by how much}``.
    """
    keys = ("model", "eval_perplexity", "eval_loss", "eval_tokens", "train_tokens")
    rows = [{k: lm.get(k) for k in keys}, *({k: b.get(k) for k in keys} for b in baselines)]
    ppl = lm["eval_perplexity"]
    beats = {b["model"]: bool(ppl < b["eval_perplexity"]) for b in baselines}
    same = len({r["eval_tokens"] for r in rows}) == 1
    lines = [f"{lm['model']}: perplexity {ppl:,.1f} "
             f"{'beats' if beats[b['model']] else 'does not beat'} the {b['model']}'s {b['eval_perplexity']:,.1f} "
             f"({ppl / b['eval_perplexity']:.2f}x)" for b in baselines]
    if not same:
        lines.append("warning: the rows scored different numbers of held-out tokens "
                     f"({sorted({r['eval_tokens'] for r in rows})}); compare with care")
    return {"rows": rows, "beats": beats, "same_targets": same, "text": "\n".join(lines)}
