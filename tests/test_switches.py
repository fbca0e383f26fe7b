"""D02: every temporary switch of state is undone when its block raises (nbkit.switches and its users)."""
from __future__ import annotations

import logging
import random

import numpy as np
import pytest
import torch
from loop_helpers import cls_collate, cls_data, tiny_classifier

from nbkit import switches


class Boom(Exception):
    pass


def test_model_mode_restores_each_submodule_after_an_exception():
    model = tiny_classifier()
    model.train()
    model.bert.embeddings.eval()                   # a frozen part: eval inside a training model
    before = {n: m.training for n, m in model.named_modules()}
    with pytest.raises(Boom), switches.model_mode(model, training=False):
        assert not any(m.training for m in model.modules())
        raise Boom
    assert {n: m.training for n, m in model.named_modules()} == before


def test_isolated_rng_restores_every_stream_after_an_exception_and_seeds_inside():
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    expect = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    with pytest.raises(Boom), switches.isolated_rng(123):
        inside = torch.rand(1).item()
        random.random(), np.random.rand()
        raise Boom
    torch.manual_seed(123)
    assert inside == torch.rand(1).item()
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    with pytest.raises(Boom), switches.isolated_rng(7):
        raise Boom
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expect


def test_logger_level_and_transformers_verbosity_come_back_after_an_exception():
    from transformers.utils import logging as hf_logging

    log = logging.getLogger("nbkit.test.switch")
    log.setLevel(logging.INFO)
    old_hf = hf_logging.get_verbosity()
    with pytest.raises(Boom), switches.logger_level("nbkit.test.switch", logging.CRITICAL), \
            switches.transformers_verbosity(logging.ERROR):
        assert log.level == logging.CRITICAL and hf_logging.get_verbosity() == logging.ERROR
        raise Boom
    assert log.level == logging.INFO and hf_logging.get_verbosity() == old_hf


@pytest.mark.parametrize("library", ["transformers", "datasets"])
def test_progress_bars_come_back_after_an_exception(library):
    is_on, enable, disable = switches._bar_switch(library)
    for start in (True, False):
        (enable if start else disable)()
        with pytest.raises(Boom), switches.progress_bars(library, not start):
            assert is_on() is (not start)
            raise Boom
        assert is_on() is start
    enable()


def test_quiet_loaders_restore_their_switches_when_the_load_fails():
    from transformers.utils import logging as hf_logging

    from nbkit.data.userfiles import _quiet_datasets
    from nbkit.models.loading import quiet_transformers

    hf_logging.enable_progress_bar()
    old = hf_logging.get_verbosity()
    with pytest.raises(Boom), quiet_transformers(capture=[]):
        raise Boom
    assert hf_logging.is_progress_bar_enabled() and hf_logging.get_verbosity() == old
    log = logging.getLogger("datasets.packaged_modules.json.json")
    level = log.level
    with pytest.raises(Boom), _quiet_datasets("json"):
        assert log.level == logging.CRITICAL
        raise Boom
    assert log.level == level


def test_predict_that_raises_inside_leaves_the_model_in_its_mode():
    from nbkit.evaluate import inference as pipeline
    from tests._corpus import char_tokenizer

    tok = char_tokenizer()
    model = tiny_classifier(vocab_size=len(tok))
    model.train()
    h = model.register_forward_pre_hook(lambda m, a, kw: (_ for _ in ()).throw(torch.OutOfMemoryError("sim")),
                                        with_kwargs=True)
    with pytest.raises(torch.OutOfMemoryError):
        pipeline.predict(model, tok, ["很好", "不好"], max_length=16)
    h.remove()
    assert model.training and all(m.training for m in model.modules())
    pipeline.predict(model, tok, ["很好"], max_length=16)
    assert model.training


def test_evaluate_that_raises_restores_train_mode():
    from nbkit.train import Loop, TrainConfig

    loop = Loop(tiny_classifier(), TrainConfig(max_steps=1, batch_size=4, progress=False, precision="fp32"),
                cls_data(n=8), cls_data(n=8, seed=2), collate_fn=cls_collate)
    loop.model.train()
    h = loop.model.register_forward_pre_hook(lambda m, a, kw: (_ for _ in ()).throw(Boom()), with_kwargs=True)
    with pytest.raises(Boom):
        loop.evaluate()
    h.remove()
    assert loop.model.training
