"""Hand-made named-entity items in the shape of nbkit.data.ner.NerData (one character per token, BIO tags),
for the token-classification tests; and a stand-in tokenizer with bert-base-chinese's vocabulary layout."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

NAMES = {"PER": ["张三", "李四", "王小明"], "LOC": ["北京", "上海", "广州"], "ORG": ["新华社", "人民日报"]}
FILLER = "我们在这里看到了今天天气很好的消息大家都说"
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]


def sentence(rng: random.Random, n_entities: int = 2, i: int = 0) -> dict:
    """One item: filler characters with ``n_entities`` entities from :data:`NAMES` between them."""
    tokens, tags = [], []
    for _ in range(n_entities):
        for _ in range(rng.randint(1, 4)):
            tokens.append(rng.choice(FILLER))
            tags.append("O")
        kind = rng.choice(sorted(NAMES))
        name = rng.choice(NAMES[kind])
        tokens.extend(name)
        tags.extend([f"B-{kind}"] + [f"I-{kind}"] * (len(name) - 1))
    tokens.append("。")
    tags.append("O")
    return {"id": f"s{i}", "tokens": tokens, "tags": tags}


@dataclass
class FakeNerData:
    """NerData's contract: ``splits`` (train / validation / test lists of items), ``types``, ``labels``, ``report``."""

    splits: dict
    types: list = field(default_factory=lambda: ["LOC", "ORG", "PER"])
    labels: list = field(default_factory=lambda: list(LABELS))
    report: dict = field(default_factory=dict)


def fake_ner(n_train: int = 96, n_eval: int = 16, seed: int = 0, long_every: int = 0) -> FakeNerData:
    """Seeded splits; ``long_every``: every n-th item is a long sentence (12 entities) that needs windows."""
    rng = random.Random(seed)
    make = lambda n, base: [sentence(rng, 12 if long_every and i % long_every == 0 else 2, base + i)  # noqa: E731
                            for i in range(n)]
    splits = {"train": make(n_train, 0), "validation": make(n_eval, 10_000), "test": make(n_eval, 20_000)}
    return FakeNerData(splits, report={"n_train": n_train, "n_val": n_eval, "n_test": n_eval})
