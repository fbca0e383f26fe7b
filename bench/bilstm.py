"""The plain neural reference beside nbkit's transformers: a character BiLSTM, as a tagger (NER) and as a
classifier (sentiment), in PyTorch alone.

A model that loses to this reference on the same split and budget points to a defect in nbkit's path before it
points to the machine (design.md, section 11). Both read characters (one embedding row per character seen in
training, the rest one unknown row), so they need no tokenizer and no pretraining:

- tagger: embedding 128 -> one bidirectional LSTM layer of 128 per direction -> dropout 0.2 -> a softmax over the
  BIO tags per character; whole sentences (an LSTM has no block), Adam 2e-3, batch 32.
- classifier: the same encoder, max-pooled over the characters -> a softmax over the classes; each text cut at
  ``max_chars`` characters (the transformer's cut, so both read the same text).

Cost on 2 CPU cores: the tagger's 6 epochs over 3,000 sentences (564 steps) take ~1-2 min; the classifier's 2
epochs over ~14,000 reviews cut at 62 characters ~1-2 min. ``bench/ner_seeds.py`` and
``bench/sentiment_seeds.py`` run them per seed on the recipe's own split.
"""
from __future__ import annotations

import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, UNK = 0, 1


def char_vocab(texts) -> dict[str, int]:
    """Character -> row, over the training texts only (0 padding, 1 unknown)."""
    vocab = {}
    for text in texts:
        for ch in text:
            vocab.setdefault(ch, len(vocab) + 2)
    return vocab


def _ids(text, vocab, max_chars=None) -> list[int]:
    chars = list(text)[:max_chars] if max_chars else list(text)
    return [vocab.get(ch, UNK) for ch in chars] or [UNK]


class BiLSTM(nn.Module):
    """Characters (B, T) -> per-character logits (B, T, K), or with ``pool`` max-pooled logits (B, K)."""

    def __init__(self, n_chars: int, n_out: int, dim: int = 128, dropout: float = 0.2, pool: bool = False):
        super().__init__()
        self.emb = nn.Embedding(n_chars, dim, padding_idx=PAD)
        self.lstm = nn.LSTM(dim, dim, batch_first=True, bidirectional=True)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(2 * dim, n_out)
        self.pool = pool

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.drop(self.lstm(self.drop(self.emb(ids)))[0])          # (B, T, 2 * dim)
        if self.pool:
            h = h.masked_fill((ids == PAD).unsqueeze(-1), float("-inf")).amax(1)   # (B, 2 * dim)
        return self.out(h)                                              # (B, T, K) or (B, K)


def _pad(rows: list[list[int]], fill: int) -> torch.Tensor:
    width = max(map(len, rows))
    return torch.tensor([r + [fill] * (width - len(r)) for r in rows])


def _fit(model, xs: list[list[int]], ys: list, epochs: float, batch_size: int, lr: float, seed: int, per_char: bool):
    """Adam over shuffled batches for ``epochs`` passes; returns the mean loss of the last pass (nats)."""
    rng = random.Random(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    steps = math.ceil(math.ceil(len(xs) / batch_size) * epochs)
    order, step, last = [], 0, []
    model.train()
    while step < steps:
        if not order:
            order = list(range(len(xs)))
            rng.shuffle(order)
            last = []
        idx, order = order[:batch_size], order[batch_size:]
        ids = _pad([xs[i] for i in idx], PAD)
        logits = model(ids)
        if per_char:
            labels = _pad([ys[i] for i in idx], -100)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
        else:
            loss = F.cross_entropy(logits, torch.tensor([ys[i] for i in idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        last.append(loss.item())
        step += 1
    return sum(last) / max(len(last), 1)


@torch.no_grad()
def _predict(model, xs: list[list[int]], batch_size: int = 128) -> list:
    model.eval()
    out = []
    for b in range(0, len(xs), batch_size):
        rows = xs[b:b + batch_size]
        pred = model(_pad(rows, PAD)).argmax(-1)
        out += [p[:len(r)].tolist() if pred.dim() == 2 else int(p) for r, p in zip(rows, pred)]
    return out


def tag(train_items, test_items, labels: list[str], *, epochs: float = 6, batch_size: int = 32, lr: float = 2e-3,
        seed: int = 0) -> tuple[list[list[str]], dict]:
    """Train the tagger on ``train_items`` (dicts with ``tokens``, one character each, and ``tags``) and tag
    ``test_items``; returns ``(tags per test item, {"train_loss", "steps", "parameters"})``."""
    torch.manual_seed(seed)
    vocab = char_vocab("".join(it["tokens"]) for it in train_items)
    index = {name: i for i, name in enumerate(labels)}
    model = BiLSTM(len(vocab) + 2, len(labels))
    xs = [_ids(it["tokens"], vocab) for it in train_items]
    ys = [[index[t] for t in it["tags"]] for it in train_items]
    loss = _fit(model, xs, ys, epochs, batch_size, lr, seed, per_char=True)
    pred = _predict(model, [_ids(it["tokens"], vocab) for it in test_items])
    return ([[labels[i] for i in p] for p in pred],
            {"train_loss": loss, "steps": math.ceil(math.ceil(len(xs) / batch_size) * epochs),
             "parameters": sum(p.numel() for p in model.parameters())})


def classify(train_texts, train_labels, test_texts, n_classes: int, *, max_chars: int | None, epochs: float = 2,
             batch_size: int = 32, lr: float = 2e-3, seed: int = 0) -> tuple[list[int], dict]:
    """Train the classifier on ``train_texts`` (each cut at ``max_chars`` characters) and predict ``test_texts``
    (cut the same way); returns ``(class ids, {"train_loss", "steps", "parameters"})``."""
    torch.manual_seed(seed)
    vocab = char_vocab(train_texts)
    model = BiLSTM(len(vocab) + 2, n_classes, pool=True)
    xs = [_ids(t, vocab, max_chars) for t in train_texts]
    loss = _fit(model, xs, [int(y) for y in train_labels], epochs, batch_size, lr, seed, per_char=False)
    pred = _predict(model, [_ids(t, vocab, max_chars) for t in test_texts])
    return pred, {"train_loss": loss, "steps": math.ceil(math.ceil(len(xs) / batch_size) * epochs),
                  "parameters": sum(p.numel() for p in model.parameters())}
