"""Masks are a function of the batch's samples: exact resume with DataLoader workers too."""
import pytest
from loop_helpers import mlm_collate, tiny_mlm, token_data

from nbkit.train import Loop, TrainConfig
from nbkit.train.batching import SeededCollate


class Interrupt(Exception):
    pass


class StopAfterFirstSave:
    def on_save(self, loop, path):
        raise Interrupt(path)


def _losses(history, after=0):
    return [(h["step"], h["loss"]) for h in history if "loss" in h and h["step"] > after]


def _cfg(out, workers, **kw):
    return TrainConfig(max_steps=6, batch_size=4, log_every=1, progress=False, precision="fp32", lr=1e-3,
                       num_workers=workers, output_dir=out, checkpoint_every=3, **kw)


@pytest.mark.slow
def test_resume_with_workers_is_bitwise_and_workers_do_not_change_the_masks(tmp_path):
    data = token_data(40)
    full = Loop(tiny_mlm(), _cfg(tmp_path / "w0", 0), data, collate_fn=mlm_collate).fit()
    with_workers = Loop(tiny_mlm(), _cfg(tmp_path / "w2", 2), data, collate_fn=mlm_collate).fit()
    assert _losses(with_workers.history) == _losses(full.history)          # same masks in workers
    cut = Loop(tiny_mlm(), _cfg(tmp_path / "cut", 2), data, collate_fn=mlm_collate,
               callbacks=[StopAfterFirstSave()])
    with pytest.raises(Interrupt):
        cut.fit()                                                          # stopped after step 3's checkpoint
    resumed = Loop(tiny_mlm(seed=9), _cfg(tmp_path / "cut", 2), data, collate_fn=mlm_collate).fit()
    assert _losses(resumed.history, after=3) == _losses(full.history, after=3)


def test_seeded_collate_depends_on_the_samples_only_and_leaves_the_global_rng_alone():
    import torch

    data = token_data(8)
    collate = SeededCollate(mlm_collate, seed=0, epoch=1)
    items = [(i, data[i]) for i in (3, 5, 7)]
    torch.manual_seed(123)
    before = torch.get_rng_state()
    a = collate(items)
    assert torch.equal(torch.get_rng_state(), before)                      # dropout's RNG untouched
    torch.manual_seed(999)                                                 # another global state
    b = collate(items)
    assert torch.equal(a["labels"], b["labels"]) and torch.equal(a["input_ids"], b["input_ids"])
    other_epoch = SeededCollate(mlm_collate, seed=0, epoch=2)(items)
    other_batch = collate([(i, data[i]) for i in (3, 5, 6)])
    assert not torch.equal(other_epoch["labels"], a["labels"])
    assert not torch.equal(other_batch["labels"][:2], a["labels"][:2])


def test_indexed_dataset_keeps_the_batched_fetch_of_datasets():
    from datasets import Dataset

    from nbkit.train.batching import IndexedDataset

    calls = []

    class Spy(Dataset):
        def __getitems__(self, keys):
            calls.append(list(keys))
            return super().__getitems__(keys)

    base = Dataset.from_dict({"input_ids": [[i, i + 1] for i in range(6)]})
    ds = IndexedDataset(Spy(base.data))
    assert ds.__getitems__([4, 1]) == [(4, {"input_ids": [4, 5]}), (1, {"input_ids": [1, 2]})]
    assert calls == [[4, 1]]                                    # one batched read, not one per example
    assert IndexedDataset([{"a": 1}, {"a": 2}]).__getitems__([1]) == [(1, {"a": 2})]
