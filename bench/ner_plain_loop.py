"""A plain PyTorch loop (no nbkit Loop) on the NER recipe's own encoded data, to tell the loop from the model.

The same BertForTokenClassification (``build_classifier``, preset narrow, random weights, seed 0) or the character
BiLSTM of issue 47 (``"arch": "lstm"``) over the same token ids, AdamW with nbkit's decay groups (none on biases and
LayerNorms), linear warm-up and decay (``"sched": "const"``: constant), clipping at 1.0 (``"clip": 0``: none),
shuffled batches; after each epoch the entity F1 of the argmax over each validation window. One JSON line per
epoch. Used for docs/ner.md's diagnosis (bench/results/ner_diagnosis_cpu_2026-12-05.json):

    python bench/ner_plain_loop.py '{"lr": 1e-3, "epochs": 2}'
    python bench/ner_plain_loop.py '{"arch": "lstm", "lr": 2e-3, "epochs": 3, "wd": 0, "warm": 0, "sched": "const", "clip": 0, "bs": 32}'
"""
from __future__ import annotations

import json
import math
import random
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def _batch(rows):
    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.tensor([r["input_ids"] + [0] * (width - len(r["input_ids"])) for r in rows])           # (B, T)
    mask = torch.tensor([[1] * len(r["input_ids"]) + [0] * (width - len(r["input_ids"])) for r in rows])
    labels = torch.tensor([r["labels"] + [-100] * (width - len(r["labels"])) for r in rows])
    return ids, mask, labels


class CharBiLSTM(nn.Module):
    """Embedding 128 -> BiLSTM 128 per direction -> dropout 0.2 -> tags, over the tokenizer's ids."""

    def __init__(self, vocab: int, n_tags: int):
        super().__init__()
        self.emb = nn.Embedding(vocab, 128, padding_idx=0)
        self.lstm = nn.LSTM(128, 128, batch_first=True, bidirectional=True)
        self.drop = nn.Dropout(0.2)
        self.out = nn.Linear(256, n_tags)

    def forward(self, ids, mask):
        return self.out(self.drop(self.lstm(self.drop(self.emb(ids)))[0]))


def main(argv=None) -> int:
    from seqeval.metrics import f1_score

    from nbkit import jsonio
    from nbkit.models.bert import build_classifier
    from nbkit.recipes import finetuning as ft

    torch.set_num_threads(2)
    args = json.loads((argv or sys.argv[1:] or ["{}"])[0])
    arch, lr, epochs = args.get("arch", "bert"), args.get("lr", 1e-3), args.get("epochs", 1)
    wd, warm, bs = args.get("wd", 0.01), args.get("warm", 0.1), args.get("bs", 16)
    sched, clip = args.get("sched", "linear"), args.get("clip", 1.0)
    cfg = ft.FinetuneConfig.for_scale("cpu", task="ner", init="random")
    labeled = ft.data(cfg)
    tok = ft.tokenizer(cfg)
    enc, _ = ft.encode(cfg, tok, labeled, splits=("train", "validation"))
    id2 = ft.id2label_of(labeled)
    torch.manual_seed(0)
    random.seed(0)
    if arch == "bert":
        bert, _ = build_classifier(None, len(id2), id2, tokenizer=tok, preset=args.get("preset", "narrow"), head="token")
        model = bert

        def forward(ids, mask):
            return bert(input_ids=ids, attention_mask=mask).logits                                  # (B, T, K)
    else:
        model = forward = CharBiLSTM(len(tok), len(id2))
    rows = [enc["train"][i] for i in range(len(enc["train"]))]
    steps = math.ceil(len(rows) / bs) * epochs
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": 0}], lr=lr)
    warmup = math.ceil(steps * warm)

    def factor(s):
        up = min(1.0, (s + 1) / max(warmup, 1))
        if sched == "linear" and s >= warmup:
            return up * max(0.0, (steps - s) / max(1, steps - warmup))
        return up

    schedule = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    t0 = time.time()
    for epoch in range(epochs):
        order = list(range(len(rows)))
        random.shuffle(order)
        model.train()
        total = n = 0
        for b in range(0, len(rows), bs):
            ids, mask, labels = _batch([rows[i] for i in order[b:b + bs]])
            loss = F.cross_entropy(forward(ids, mask).reshape(-1, len(id2)), labels.reshape(-1), ignore_index=-100)
            opt.zero_grad()
            loss.backward()
            if clip:
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            schedule.step()
            total, n = total + loss.item(), n + 1
        model.eval()
        gold, pred = [], []
        val = [enc["validation"][i] for i in range(len(enc["validation"]))]
        with torch.no_grad():
            for b in range(0, len(val), 64):
                ids, mask, labels = _batch(val[b:b + 64])
                argmax = forward(ids, mask).argmax(-1)
                for lab, p in zip(labels, argmax):
                    keep = lab != -100
                    gold.append([id2[int(x)] for x in lab[keep]])
                    pred.append([id2[int(x)] for x in p[keep]])
        print(jsonio.dumps({"arch": arch, **{k: v for k, v in args.items() if k != "arch"}, "epoch": epoch + 1,
                          "train_loss": round(total / n, 4), "val_f1": round(f1_score(gold, pred), 4),
                          "s": round(time.time() - t0)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
