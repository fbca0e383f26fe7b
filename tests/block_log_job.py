"""``nbkit.jobs.pretrain`` with the loop's training fetches logged, for tests that check which blocks each rank read.

``[torchrun ...] python tests/block_log_job.py LOG_DIR [pretrain flags]``: every batched fetch of the
``Loop``'s training data (the DataLoader's ``__getitems__``) appends its indices, one JSON list per
line, to ``LOG_DIR/blocks-rank<RANK>.jsonl``; then the job runs as ``python -m nbkit.jobs.pretrain``.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path


class BlockLog:
    """``data`` with each batched fetch logged to ``path``; every other attribute is ``data``'s."""

    def __init__(self, data, path: Path):
        self.data, self.path = data, path

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]

    def __getitems__(self, indices):
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps([int(i) for i in indices]) + "\n")
        getitems = getattr(self.data, "__getitems__", None)
        return getitems(indices) if getitems else [self.data[i] for i in indices]

    def __getattr__(self, name):   # block_size, token_id_range, column_names, ...
        if name == "data":
            raise AttributeError(name)
        return getattr(self.data, name)


def install(log_dir: Path) -> None:
    """Wrap the training data of every ``Loop`` built from now on in a :class:`BlockLog` of this rank."""
    from nbkit.train.loop import Loop

    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / f"blocks-rank{int(os.environ.get('RANK', '0'))}.jsonl"
    build = Loop.__init__

    def logged(self, model, config, train_data, *args, **kwargs):
        build(self, model, config, BlockLog(train_data, path), *args, **kwargs)

    Loop.__init__ = logged


if __name__ == "__main__":
    install(Path(sys.argv[1]))
    from nbkit.jobs import pretrain

    sys.exit(pretrain.main(sys.argv[2:]))
