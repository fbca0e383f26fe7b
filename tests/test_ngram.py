"""The n-gram baseline (nbkit.evaluate.ngram): hand-computed probabilities, normalisation, back-off, streaming
equals one pass, and an independent dict-based reference of interpolated modified Kneser-Ney."""
from __future__ import annotations

import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import peoples_daily  # noqa: E402
from _store import write_store  # noqa: E402

from nbkit.errors import ConfigError, DataError  # noqa: E402
from nbkit.evaluate.ngram import NgramLM, causal_baselines, score_blocks, store_stream  # noqa: E402

# a tiny corpus with V=3 worked by hand at D=0.5 (docstring of test_bigram_matches_hand_computation)
TINY = np.array([0, 1, 0, 1, 2, 1])


def blocks_of(stream, B=None):
    """``stream`` cut as StoreCausalDataset cuts a split: ``len // B`` blocks of ``B`` tokens, each with the next
    block's first token as ``next_id`` (-100 past the end); ``B=None``: the whole stream as one block."""
    stream = np.asarray(stream)
    B = len(stream) if B is None else B
    return [{"input_ids": stream[b * B:(b + 1) * B],
             "next_id": int(stream[(b + 1) * B]) if (b + 1) * B < len(stream) else -100}
            for b in range(len(stream) // B)]


def test_bigram_matches_hand_computation():
    """Bigrams of TINY: 01 x2, 10, 12, 21. Unigram continuation counts N1+(.w): 0:1, 1:2, 2:1 (A=4), so
    P1 = (1-.5)/4 + (1.5/4)/3 = .25, (2-.5)/4 + .125 = .5, .25. Context 0: A=2, gamma=.5/2, P(1|0) =
    1.5/2 + .25*.5 = .875; context 1: A=2, gamma=.5, P(0|1) = .5/2 + .5*.25 = .375; P(0|0) = .25*.25."""
    lm = NgramLM(2, 3, discount=0.5).fit([TINY])
    np.testing.assert_allclose(lm.distribution([]), [0.25, 0.5, 0.25])
    np.testing.assert_allclose(lm.distribution([0]), [0.0625, 0.875, 0.0625])
    np.testing.assert_allclose(lm.distribution([1]), [0.375, 0.25, 0.375])
    np.testing.assert_allclose(lm.distribution([2]), [0.125, 0.75, 0.125])
    out = score_blocks(lm, blocks_of([2, 1, 0, 0]))   # predicts 1|2, 0|1, 0|0
    assert out["eval_tokens"] == 3 and out["train_tokens"] == 6
    assert out["eval_perplexity"] == pytest.approx((0.75 * 0.375 * 0.0625) ** (-1 / 3))


def test_unseen_context_and_token_back_off():
    """Token 3 never occurs: its context backs off to the unigram level, and it still gets mass."""
    lm = NgramLM(2, 4, discount=0.5).fit([TINY])
    np.testing.assert_allclose(lm.distribution([3]), lm.distribution([]))
    p1 = lm.distribution([])
    assert p1[3] == pytest.approx(0.375 / 4) and p1.sum() == pytest.approx(1.0)
    lm3 = NgramLM(3, 4, discount=0.5).fit([TINY])
    # trigram context (3, 0) unseen: equals the bigram level of context 0, which is seen
    np.testing.assert_allclose(lm3.distribution([3, 0]), lm3.distribution([0]))
    assert not np.allclose(lm3.distribution([0]), lm3.distribution([]))


def _corpus(n=3000, vocab=40, seed=0):
    """``n`` tokens of one fixed Markov chain over ``vocab`` ids (skewed transitions, so counts of 1, 2, 3+
    all occur); ``seed`` picks the sample, never the chain."""
    trans = np.random.default_rng(1234).dirichlet(np.full(vocab, 0.2), size=vocab)
    rng = np.random.default_rng(seed)
    out = [0]
    for _ in range(n - 1):
        out.append(int(rng.choice(vocab, p=trans[out[-1]])))
    return np.array(out)


@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("discount", [None, 0.75])
def test_distributions_sum_to_one(order, discount):
    ids = _corpus()
    lm = NgramLM(order, 45, discount=discount).fit([ids])  # ids 40..44 never seen
    for ctx in ([], [3], [ids[10], ids[11]], [44, 44], [ids[5], 44], [44, ids[5]]):
        p = lm.distribution(ctx)
        assert p.shape == (45,) and (p > 0).all()
        assert p.sum() == pytest.approx(1.0, abs=1e-12)


def _reference_kn(train, V, n, discount=None):
    """Interpolated modified KN written plainly from Chen & Goodman (1998) with dicts."""
    raw = {k: Counter(tuple(train[i:i + k]) for i in range(len(train) - k + 1)) for k in range(1, n + 1)}
    counts = {n: raw[n]}
    for k in range(n - 1, 0, -1):
        counts[k] = Counter(g[1:] for g in raw[k + 1])
    disc = {}
    for k, c in counts.items():
        if discount is not None:
            disc[k] = (discount,) * 3
            continue
        nn = Counter(c.values())
        if not nn[1] or not nn[2]:
            disc[k] = (0.5, 1.0, 1.5)   # the documented fallback
            continue
        y = nn[1] / (nn[1] + 2 * nn[2])
        disc[k] = tuple(min(max(j - (j + 1) * y * nn[j + 1] / nn[j], 0), j) for j in (1, 2, 3))
    ctx = {k: defaultdict(list) for k in counts}
    for k, c in counts.items():
        for g, v in c.items():
            ctx[k][g[:-1]].append(v)

    def d(k, v):
        return disc[k][min(v, 3) - 1]

    def p(w, h):
        k = len(h) + 1
        if k == 0 + 1 and not counts[1]:
            return 1 / V
        lower = p(w, h[1:]) if h else 1 / V
        vals = ctx[k].get(tuple(h))
        if not vals:
            return lower
        A = sum(vals)
        gamma = sum(d(k, v) for v in vals) / A
        c = counts[k].get((*h, w), 0)
        return max(c - d(k, c), 0) / A + gamma * lower if c else gamma * lower

    return p


@pytest.mark.parametrize("order", [2, 3])
@pytest.mark.parametrize("discount", [None, 0.6])
def test_matches_an_independent_reference(order, discount):
    ids = _corpus(n=800, vocab=30)
    held = _corpus(n=200, vocab=30, seed=1)
    V = 32
    lm = NgramLM(order, V, discount=discount).fit([ids])
    ref = _reference_kn(ids.tolist(), V, order, discount)
    held_l = held.tolist()
    want = [ref(held_l[t], tuple(held_l[max(0, t - order + 1):t])) for t in range(1, len(held_l))]
    got = lm.probabilities(held[None, :])[0]
    np.testing.assert_allclose(got, want, rtol=1e-10)
    nll = -np.mean(np.log(want))
    assert score_blocks(lm, blocks_of(held))["eval_perplexity"] == pytest.approx(math.exp(nll), rel=1e-10)


def test_streaming_equals_one_pass():
    ids = _corpus(n=2000)
    one = NgramLM(3, 40).fit([ids])
    chunks = NgramLM(3, 40).fit(np.array_split(ids, 7))
    for k in (1, 2, 3):
        np.testing.assert_array_equal(one._raw[k][0], chunks._raw[k][0])
        np.testing.assert_array_equal(one._raw[k][1], chunks._raw[k][1])
    held = _corpus(n=2 * 1500 + 1, seed=2)    # 1,500 blocks of 2: scored in batches of 1,024 rows
    out = score_blocks(one, blocks_of(held, 2))
    want, n_want = _block_reference(one, held, 2)
    assert out["eval_tokens"] == n_want == 3000 and out["eval_loss"] == pytest.approx(want, rel=1e-10)


def _block_reference(lm, held, B, max_blocks=None):
    """Mean NLL of the targets a causal LM's evaluation over blocks of B scores, token by token."""
    n_blocks = len(held) // B if max_blocks is None else min(max_blocks, len(held) // B)
    logps = []
    for b in range(n_blocks):
        for j in range(b * B + 1, min((b + 1) * B, len(held) - 1) + 1):   # targets of block b
            ctx = held[max(b * B, j - lm.order + 1):j]
            logps.append(math.log(lm.distribution(ctx)[held[j]]))
    return -np.mean(logps), len(logps)


@pytest.mark.parametrize("n_held,max_blocks", [(107, None), (100, None), (101, None), (107, 4)])
def test_block_scoring_matches_a_causal_lm_evaluation(n_held, max_blocks):
    """Block b predicts tokens bB+1 .. (b+1)B (its last target is the next block's first token, as
    StoreCausalDataset's next_id), context never before bB, a trailing partial block unscored."""
    ids = _corpus(n=2000)
    held = _corpus(n=n_held, seed=3)
    lm = NgramLM(3, 40).fit([ids])
    want, n_want = _block_reference(lm, held, 10, max_blocks)
    out = score_blocks(lm, blocks_of(held, 10), max_blocks=max_blocks)
    assert out["eval_tokens"] == n_want and out["eval_loss"] == pytest.approx(want, rel=1e-10)
    # the same blocks as a datasets.Dataset (the bundled-mix path) score the same
    import datasets

    ds = datasets.Dataset.from_list([{"input_ids": b["input_ids"].tolist(), "next_id": b["next_id"]}
                                     for b in blocks_of(held, 10)])
    assert score_blocks(lm, ds, max_blocks=max_blocks)["eval_loss"] == pytest.approx(want, rel=1e-12)
    whole = score_blocks(lm, blocks_of(held))                    # context never cut: another score
    assert whole["eval_loss"] != pytest.approx(want)


def test_higher_order_fits_a_markov_chain_better():
    ids, held = _corpus(n=20000), _corpus(n=3000, seed=4)
    ppl = [score_blocks(NgramLM(k, 40).fit([ids]), blocks_of(held))["eval_perplexity"] for k in (1, 2)]
    assert ppl[1] < 0.8 * ppl[0]


def test_bad_input_names_the_fix():
    with pytest.raises(ConfigError, match="order >= 1"):
        NgramLM(0, 10)
    with pytest.raises(ConfigError, match="int64"):
        NgramLM(3, 3_000_000)
    with pytest.raises(ConfigError, match="discount"):
        NgramLM(2, 10, discount=1.5)
    with pytest.raises(DataError, match="outside"):
        NgramLM(2, 3).fit([np.array([0, 1, 5])])
    with pytest.raises(DataError, match="no tokens"):
        NgramLM(2, 3).fit([])
    with pytest.raises(DataError, match="not been fitted"):
        score_blocks(NgramLM(2, 3), blocks_of([0, 1]))
    lm = NgramLM(2, 3).fit([TINY])
    with pytest.raises(DataError, match="no block to score"):
        score_blocks(lm, blocks_of([1]))                           # one token: nothing to predict
    with pytest.raises(DataError, match="no block to score"):
        score_blocks(lm, blocks_of([1, 2, 0], 8))                  # shorter than one block
    with pytest.raises(DataError, match="outside"):
        score_blocks(lm, blocks_of([1, 2, 7]))


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    docs = [list(words) for _, words in peoples_daily(300)]
    return write_store(tmp_path_factory.mktemp("store"), docs, shard_tokens=700)


@pytest.mark.slow   # trains a WordPiece for the store (~7 s)
def test_baselines_over_a_store(store_dir):
    from nbkit.corpus import store
    from nbkit.corpus.dataset import StoreCausalDataset

    path = store_dir
    train = np.concatenate(list(store_stream(path, "train", chunk_tokens=333)))
    val = np.concatenate(list(store_stream(path, "validation")))
    m = store.read_manifest(path)
    assert len(train) == m["splits"]["train"]["n_tokens"] and len(val) == m["splits"]["validation"]["n_tokens"]
    assert (train == m["sep_id"]).sum() == 270    # each document ends with the separator
    blocks = {split: StoreCausalDataset(path, 64, split) for split in ("train", "validation")}
    rows = causal_baselines(blocks, m["tokenizer"]["vocab_size"], (2, 3))
    assert [r["order"] for r in rows] == [2, 3] and rows[0]["model"] == "2-gram KN"
    n_eval = min(len(val) // 64 * 64, len(val) - 1)
    seen = min(len(train), len(train) // 64 * 64 + 1)             # what the LM's training reads
    unigram = _add_one_unigram_perplexity(train[:seen], val, n_eval, m["tokenizer"]["vocab_size"])
    for r in rows:
        assert r["train_tokens"] == seen
        assert r["eval_tokens"] == n_eval
        # a model that predicts from the same context as the maximum-likelihood fit on the scored targets cannot
        # beat that fit; a smoothed n-gram must beat an add-one unigram fitted on the same training tokens
        assert _mle_perplexity(val, r["order"], 64, n_eval) <= r["eval_perplexity"] < unigram, (r, unigram)
    assert rows[1]["eval_perplexity"] < rows[0]["eval_perplexity"]    # this corpus: 71 vs 91 (unigram 557)


def _mle_perplexity(val, order: int, block: int, n_eval: int) -> float:
    """The perplexity of the maximum-likelihood conditional model fitted on the scored targets themselves
    (targets 1..n_eval, each from up to order-1 tokens before it inside its block): a lower bound for any model
    that predicts from the same context."""
    import math
    from collections import Counter

    contexts, pairs = Counter(), Counter()
    for t in range(1, n_eval + 1):
        start = (t - 1) // block * block
        ctx = tuple(val[max(start, t - order + 1):t].tolist())
        contexts[ctx] += 1
        pairs[ctx, int(val[t])] += 1
    nll = -sum(c * math.log(c / contexts[ctx]) for (ctx, _), c in pairs.items())
    return math.exp(nll / n_eval)


def _add_one_unigram_perplexity(train, val, n_eval: int, vocab_size: int) -> float:
    """Perplexity on targets 1..n_eval of the add-one (Laplace) unigram fitted on ``train``."""
    counts = np.bincount(train, minlength=vocab_size).astype(np.float64)
    p = (counts + 1) / (counts.sum() + vocab_size)
    return float(np.exp(-np.log(p[val[1:n_eval + 1]]).mean()))


@pytest.mark.slow   # the store fixture trains a WordPiece
def test_block_scores_are_the_collator_targets(store_dir):
    """score_blocks averages over exactly the labels CausalCollator gives the loop: a bigram 'model' whose
    logits are the n-gram's log-probabilities of each next token has the same mean CE."""
    import datasets
    import torch

    from nbkit.corpus.dataset import StoreCausalDataset
    from nbkit.text.causal import CausalCollator

    val = StoreCausalDataset(store_dir, 32, "validation")
    train = StoreCausalDataset(store_dir, 32, "train")
    V = int(val.manifest["tokenizer"]["vocab_size"])
    seen = np.concatenate(list(store_stream(store_dir, "train")))[:len(train) * 32 + 1]   # what training reads
    lm = NgramLM(2, V).fit([seen])
    table = torch.from_numpy(np.log(np.stack([lm.distribution([v]) for v in range(V)])))   # (V, V)

    class Tok:
        pad_token_id, sep_token_id, sep_token = 0, int(val.sep_id), "[SEP]"

    batch = CausalCollator(Tok())([val[i] for i in range(len(val))])
    logits = table[batch["input_ids"]]                                   # (N, T, V): P(. | this token)
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, V), batch["labels"].reshape(-1), ignore_index=-100)
    out = score_blocks(lm, val)
    # the block's first target has one token of context: the bigram level, as the table row
    assert out["eval_tokens"] == int((batch["labels"] != -100).sum())
    assert out["eval_loss"] == pytest.approx(float(ce), rel=1e-9)
    assert score_blocks(lm, val, max_blocks=3)["eval_tokens"] == 3 * 32
    # the same blocks as a datasets.Dataset (the bundled-mix path) score the same
    ds = datasets.Dataset.from_dict({"input_ids": [val[i]["input_ids"].tolist() for i in range(len(val))],
                                     "next_id": [val[i]["next_id"] for i in range(len(val))]})
    assert score_blocks(lm, ds)["eval_loss"] == pytest.approx(out["eval_loss"], rel=1e-12)
    rows = causal_baselines({"train": train, "validation": val}, V, (2,))
    assert rows[0]["eval_loss"] == pytest.approx(out["eval_loss"], rel=1e-12)
    assert rows[0]["train_tokens"] == len(seen)
