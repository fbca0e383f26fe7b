import warnings

import pytest
import torch

from nbkit.errors import ConfigError
from nbkit.train.precision import choose_precision, matmul_precision_name


def test_auto_on_cpu_is_fp32_and_prints_reason(capsys):
    p = choose_precision("auto", "cpu")
    assert (p.name, p.use_scaler, p.dtype) == ("fp32", False, None)
    assert p.make_scaler() is None
    assert "precision: fp32" in capsys.readouterr().out


@pytest.mark.parametrize("cap,name,scaler", [((9, 0), "bf16", False), ((8, 0), "bf16", False),
                                             ((7, 5), "fp16", True), ((7, 0), "fp16", True)])
def test_auto_on_cuda_follows_compute_capability(cap, name, scaler):
    p = choose_precision("auto", "cuda", capability=cap, verbose=False)
    assert (p.name, p.use_scaler) == (name, scaler)
    assert f"{cap[0]}.{cap[1]}" in p.reason


def test_fp16_on_cpu_falls_back_to_fp32_with_warning():
    with pytest.warns(UserWarning, match="fp16.*CUDA"):
        p = choose_precision("fp16", "cpu", verbose=False)
    assert p.name == "fp32" and not p.use_scaler


def test_bf16_before_ampere_falls_back_to_fp16_with_scaler():
    with pytest.warns(UserWarning, match="compute capability"):
        p = choose_precision("bf16", "cuda", capability=(7, 5), verbose=False)
    assert p.name == "fp16" and p.use_scaler


def test_supported_explicit_choices_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert choose_precision("bf16", "cuda", capability=(8, 6), verbose=False).use_scaler is False
        assert choose_precision("fp16", "cuda", capability=(8, 6), verbose=False).use_scaler is True
        assert choose_precision("fp32", "cpu", verbose=False).name == "fp32"


def test_unknown_precision_names_the_choices():
    with pytest.raises(ConfigError, match="bf16, fp16, fp32"):
        choose_precision("fp8", "cpu")


def test_bf16_autocast_on_cpu_lowers_matmuls():
    p = choose_precision("bf16", "cpu", verbose=False)
    lin = torch.nn.Linear(4, 4)
    with p.autocast():
        y = lin(torch.randn(2, 4))
    assert y.dtype == torch.bfloat16
    assert lin.weight.dtype == torch.float32  # weights stay fp32


def test_mfu_column_for_fp32_on_cpu():
    assert matmul_precision_name(choose_precision("fp32", "cpu", verbose=False)) == "fp32"
