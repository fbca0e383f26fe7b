"""Length-grouped batches: same samples, less padding, still exactly resumable."""
import pytest
import torch
from loop_helpers import VOCAB, tiny_classifier

from nbkit.errors import CheckpointError, ConfigError, DataError
from nbkit.train import Loop, TrainConfig
from nbkit.train.batching import input_lengths
from nbkit.train.ddp.sampler import ResumableDistributedSampler


def _lengths(n=400, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, 64, (n,), generator=g).tolist()


def _padded_tokens(order, lengths, batch):
    return sum(max(lengths[i] for i in order[k:k + batch]) * len(order[k:k + batch])
               for k in range(0, len(order), batch))


def test_grouped_order_is_a_seeded_permutation_with_far_less_padding():
    lengths, batch = _lengths(), 8
    grouped = ResumableDistributedSampler(400, seed=2, lengths=lengths, group_size=batch)
    plain = ResumableDistributedSampler(400, seed=2)
    order = grouped.global_order(0)
    assert sorted(order) == list(range(400))
    assert order == ResumableDistributedSampler(400, seed=2, lengths=lengths, group_size=batch).global_order(0)
    assert order != grouped.global_order(1)                        # reshuffled every epoch
    real = sum(lengths)
    waste_grouped = _padded_tokens(order, lengths, batch) - real
    waste_plain = _padded_tokens(plain.global_order(0), lengths, batch) - real
    assert waste_grouped < 0.2 * waste_plain, (waste_grouped, waste_plain)
    assert lengths[order[0]] == max(lengths)                       # longest batch first: OOM early


def test_grouped_order_is_shared_by_ranks_and_resumes_under_another_world_size():
    lengths = _lengths(50)
    ranks = [ResumableDistributedSampler(50, 2, r, seed=1, lengths=lengths, group_size=3 * 2) for r in range(2)]
    assert ranks[0].group_size == 6
    seen = []
    for s in ranks:
        seen += list(s)[:4]
        s.advance(4)
    state = ranks[0].state_dict()
    assert state["grouped"] and sorted(seen) == sorted(ranks[0].global_order()[:8])
    one = ResumableDistributedSampler(50, seed=1, lengths=lengths, group_size=6)
    one.load_state_dict(state)
    assert list(one) == ranks[0].global_order()[8:]


def test_grouping_mismatches_are_rejected_with_the_fix():
    lengths = _lengths(10)
    with pytest.raises(ConfigError, match="one length per sample"):
        ResumableDistributedSampler(11, lengths=lengths)
    state = ResumableDistributedSampler(10, lengths=lengths).state_dict()
    with pytest.raises(CheckpointError, match="grouped"):
        ResumableDistributedSampler(10).load_state_dict(state)


def test_input_lengths_reads_datasets_and_lists_and_names_the_fix():
    from datasets import Dataset

    ds = Dataset.from_dict({"input_ids": [[1, 2], [1, 2, 3]], "label": [0, 1]})
    assert input_lengths(ds) == [2, 3]
    assert input_lengths([{"input_ids": [1]}, {"input_ids": [1, 2, 3, 4]}]) == [1, 4]
    with pytest.raises(DataError, match="Tokenize first"):
        input_lengths(Dataset.from_dict({"text": ["a"]}))
    with pytest.raises(DataError, match="group_by_length=False"):
        input_lengths([{"text": "a"}])


def _ragged(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ids = torch.randint(5, VOCAB, (int(torch.randint(3, 30, (1,), generator=g)),), generator=g)
        out.append({"input_ids": ids, "label": int(ids[0] > VOCAB // 2)})
    return out


def _pad_collate(examples):
    T = max(len(e["input_ids"]) for e in examples)
    ids = torch.zeros(len(examples), T, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, e in enumerate(examples):
        ids[i, :len(e["input_ids"])], mask[i, :len(e["input_ids"])] = e["input_ids"], 1
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([e["label"] for e in examples])}


def test_loop_with_grouping_pads_less_and_resumes_exactly(tmp_path):
    data = _ragged(64)  # one epoch = 16 steps of 4; mega-batches of 16 sorted by length
    cfg = dict(max_steps=16, batch_size=4, log_every=1, progress=False, precision="fp32", lr=1e-3,
               group_by_length=True, output_dir=tmp_path / "full", checkpoint_every=6)
    full = Loop(tiny_classifier(), TrainConfig(**cfg), data, collate_fn=_pad_collate)
    tokens_grouped = full.fit().metrics["train_tokens"]
    plain = Loop(tiny_classifier(), TrainConfig(**{**cfg, "group_by_length": False, "output_dir": tmp_path / "p"}),
                 data, collate_fn=_pad_collate)
    assert tokens_grouped < 0.9 * plain.fit().metrics["train_tokens"]   # padded tokens over the epoch
    class Interrupt(Exception):
        pass

    class StopAfterFirstSave:
        def on_save(self, loop, path):
            raise Interrupt(path)
    cut = Loop(tiny_classifier(), TrainConfig(**{**cfg, "output_dir": tmp_path / "cut"}),
               data, collate_fn=_pad_collate, callbacks=[StopAfterFirstSave()])
    with pytest.raises(Interrupt):
        cut.fit()                                                   # stopped right after step 6's checkpoint
    resumed = Loop(tiny_classifier(seed=5), TrainConfig(**{**cfg, "output_dir": tmp_path / "cut"}),
                   data, collate_fn=_pad_collate)
    res = resumed.fit()
    losses = lambda h: [(x["step"], round(x["loss"], 6)) for x in h if "loss" in x and x["step"] > 6]  # noqa: E731
    assert losses(res.history) == losses(full.state.history)
