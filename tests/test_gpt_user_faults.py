"""The GPT path tried with the files and calls users bring (issue 52's GPT items): each case a file or call a
user would have, built locally (nothing is downloaded)."""
from __future__ import annotations

import zipfile

import pytest
import torch

from nbkit.errors import ConfigError, DataError  # noqa: F401
from nbkit.models.standin import build_standin
from nbkit.recipes import pretraining as pt


@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    """A UER-layout GPT-2 and a ckiplab-layout BERT whose ``pytorch_model.bin`` is in torch's legacy
    (pre-1.6, non-zip) format, as many older uploads are."""
    root = tmp_path_factory.mktemp("legacy")
    out = {}
    for name, layout in (("causal", "uer-gpt2"), ("mlm", "ckiplab")):
        folder = build_standin(root / name, layout=layout)
        state = torch.load(folder / "pytorch_model.bin", weights_only=True)
        torch.save(state, folder / "pytorch_model.bin", _use_new_zipfile_serialization=False)
        assert not zipfile.is_zipfile(folder / "pytorch_model.bin")
        out[name] = folder
    return out


@pytest.mark.parametrize("objective", ["causal", "mlm"])
def test_old_format_weights_load_through_init_as_from_pretrained_does(legacy, objective):
    """Item 1: the probe of names and dtypes memory-mapped the file, which torch refuses for the legacy format."""
    from transformers import AutoModelForCausalLM, BertForMaskedLM

    from nbkit.models.loading import stored_dtype, weight_names

    init = legacy[objective]
    embedding = "transformer.wte.weight" if objective == "causal" else "bert.embeddings.word_embeddings.weight"
    assert stored_dtype(init) == "float32" and embedding in weight_names(init)      # the probe reads the old format
    cfg = pt.PretrainConfig.for_scale("smoke", objective=objective, init=str(init))
    mine = pt.model(cfg, pt.tokenizer(cfg, pt.PretrainCorpus())).state_dict()
    ref = (AutoModelForCausalLM if objective == "causal" else BertForMaskedLM).from_pretrained(str(init)).state_dict()
    assert set(ref) <= set(mine)
    assert all(torch.equal(mine[k], ref[k]) for k in ref), [k for k in ref if not torch.equal(mine[k], ref[k])]
