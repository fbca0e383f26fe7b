import pytest

from nbkit import runs
from nbkit.recipes.scale import PRESETS, get_scale


def test_env_var_picks_preset(monkeypatch):
    monkeypatch.setenv("NBKIT_SCALE", "smoke")
    assert get_scale().name == "smoke"
    assert get_scale("cpu").name == "cpu"


def test_unknown_scale_names_the_choices(monkeypatch):
    monkeypatch.setenv("NBKIT_SCALE", "huge")
    with pytest.raises(ValueError, match="smoke, cpu, gpu"):
        get_scale()


def test_one_preset_per_scale_name_and_the_doctor_reads_names_alike(monkeypatch):
    """The names live in nbkit.settings (env checks NBKIT_SCALE without importing pipeline): one preset each,
    and " CPU " means cpu for get_scale exactly as for the doctor's check."""
    from nbkit.settings import SCALES, scale_name

    assert tuple(PRESETS) == SCALES
    assert scale_name(" CPU\t") == "cpu" and get_scale(" CPU\t").name == "cpu"
    monkeypatch.setenv("NBKIT_SCALE", " Smoke ")
    assert get_scale().name == "smoke"


def test_default_without_cuda_is_cpu(monkeypatch):
    monkeypatch.delenv("NBKIT_SCALE", raising=False)
    monkeypatch.setattr("nbkit.recipes.scale.cuda_usable", lambda: False)
    assert get_scale().name == "cpu"


def test_presets_grow_with_scale():
    s, c, g = (PRESETS[n] for n in ("smoke", "cpu", "gpu"))
    assert s.mlm_steps < c.mlm_steps < g.mlm_steps
    assert s.vocab_size < c.vocab_size <= g.vocab_size


def test_step_dir_under_runs_dir(runs_tmp):
    d = runs.step_dir("smoke", "mlm")
    assert d == runs_tmp.resolve() / "smoke" / "mlm" and d.is_dir()


def test_import_nbkit_is_cheap():
    import subprocess
    import sys

    code = "import sys, nbkit; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
