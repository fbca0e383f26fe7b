"""The one config mechanism (nbkit.recipes.config): scales, defaults from the one table, overrides, names."""
from __future__ import annotations

import dataclasses

import pytest

from nbkit import runs
from nbkit.errors import ConfigError
from nbkit.recipes.config import resolve_scale
from nbkit.recipes.finetuning import FinetuneConfig
from nbkit.recipes.own_data import OwnDataConfig
from nbkit.recipes.pretraining import PretrainConfig
from nbkit.recipes.profiling import ProfileConfig
from nbkit.recipes.scales import CONSTANT, PER_SCALE, D
from nbkit.recipes.tokenizer import TokenizerConfig
from nbkit.settings import SCALES

CONFIGS = (TokenizerConfig, PretrainConfig, FinetuneConfig, ProfileConfig, OwnDataConfig)


def test_the_scale_comes_from_the_name_the_env_or_the_hardware(monkeypatch):
    monkeypatch.setenv("NBKIT_SCALE", " Smoke ")
    assert resolve_scale() == "smoke" and resolve_scale(" CPU\t") == "cpu"
    monkeypatch.delenv("NBKIT_SCALE")
    monkeypatch.setattr("nbkit.recipes.config.cuda_usable", lambda: False)
    assert resolve_scale() == "cpu"
    monkeypatch.setattr("nbkit.recipes.config.cuda_usable", lambda: True)
    assert resolve_scale() == "gpu"
    monkeypatch.setenv("NBKIT_SCALE", "huge")
    with pytest.raises(ConfigError, match=r"NBKIT_SCALE='huge' is not a scale: use one of smoke, cpu, gpu"):
        resolve_scale()
    with pytest.raises(ConfigError, match=r"scale='large' is not a scale"):
        PretrainConfig.for_scale("large")


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("scale", SCALES)
def test_every_default_the_table_gives_is_the_configs(cls, scale):
    cfg = cls.for_scale(scale)
    i = SCALES.index(scale)
    for name, row in PER_SCALE[cls.RECIPE].items():
        assert getattr(cfg, name) == (row.value if isinstance(row, D) else row)[i], (cls.__name__, name)
    for name, d in CONSTANT.get(cls.RECIPE, {}).items():
        assert getattr(cfg, name) == d.value, (cls.__name__, name)
    assert cfg.overrides() == {} and cfg.run_tag() == ""


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_field_says_what_it_means(cls):
    missing = [f.name for f in dataclasses.fields(cls) if not cls.HELP.get(f.name)]
    assert not missing, f"{cls.__name__} fields without HELP: {missing}"


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_a_constant_with_a_reason_is_written_once_in_scales(cls):
    """The dataclass default of a field in the recipe's CONSTANT group is that value (read from scales.py, not a
    second copy), and the table prints its reason beside it."""
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    table = cls.for_scale("cpu").table()
    for name, d in CONSTANT.get(cls.RECIPE, {}).items():
        assert defaults[name] == d.value, (cls.__name__, name)
        assert table.loc[name, "from"] == f"recipe: {d.why}"


def test_every_reason_is_said():
    for group in (*PER_SCALE.values(), *CONSTANT.values()):
        for name, entry in group.items():
            assert not isinstance(entry, D) or len(entry.why) > 10, name


def test_the_table_rows_are_fields_of_their_config():
    fields = {c.RECIPE: {f.name for f in dataclasses.fields(c)} for c in CONFIGS}
    fields["finetuning/news"] = fields["finetuning/ner"] = fields["finetuning"]
    fields["pretraining/init"] = fields["pretraining"]
    fields["pretraining/causal"] = fields["pretraining/sft"] = fields["pretraining"]
    fields["finetuning/base"] = fields["finetuning"]
    for recipe, rows in PER_SCALE.items():
        assert set(rows) <= fields[recipe], (recipe, set(rows) - fields[recipe])
        assert all(len(v.value if isinstance(v, D) else v) == len(SCALES) for v in rows.values())
    for recipe, constants in CONSTANT.items():
        assert set(constants) <= fields[recipe], (recipe, set(constants) - fields[recipe])
        assert all(isinstance(d, D) for d in constants.values())


def test_presets_grow_with_scale():
    s, c, g = (PretrainConfig.for_scale(n) for n in SCALES)
    assert s.max_steps < c.max_steps < g.max_steps
    assert TokenizerConfig.for_scale("smoke").vocab_size < TokenizerConfig.for_scale("cpu").vocab_size


def test_overrides_are_coerced_named_and_tag_the_run():
    cfg = PretrainConfig.for_scale("CPU", seed=3, lr=1, corpus_lines="all", max_steps=40.0, model=None)
    assert cfg.scale == "cpu" and cfg.lr == 1.0 and isinstance(cfg.max_steps, int) and cfg.model == "narrow"
    assert cfg.overrides() == {"seed": 3, "lr": 1.0, "max_steps": 40}
    assert cfg.run_tag() == "-lr1-max_steps40-seed3"
    assert cfg.replace(seed=None) is cfg                                  # a None override keeps the value
    prof = ProfileConfig.for_scale("smoke", bench_sizes="[64, 128]")      # papermill -p passes lists as text
    assert prof.bench_sizes == (64, 128) and prof.run_tag() == ""          # the smoke value already
    assert ProfileConfig.for_scale("cpu", bench_sizes=[64]).run_tag() == "-bench_sizes64"


@pytest.mark.parametrize("kwargs, match", [
    (dict(seeds=3), r"seeds \(did you mean seed\?\): not a PretrainConfig field; the fields are scale, model"),
    (dict(max_step=3, batchsize=2), r"batchsize \(did you mean batch_size or block_size\?\), max_step \(did you mean "
                                    r"max_steps\?\): not a PretrainConfig field"),
    (dict(learning_rate=3), r"learning_rate: not a PretrainConfig field; the fields are .*\blr\b"),
    (dict(max_steps="big"), r"max_steps='big': expected a whole number \(default 30\)"),
    (dict(seed=True), r"seed=True: expected a whole number"),
    (dict(lr="fast"), r"lr='fast': expected a number"),
    (dict(whole_word="yes please"), r"whole_word='yes please': expected True or False"),
])
def test_a_bad_value_is_named_with_the_fix(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        PretrainConfig.for_scale("smoke", **kwargs)


def test_the_task_picks_fine_tuning_defaults_and_names_the_run(runs_tmp):
    news = FinetuneConfig.for_scale("cpu", task="news")
    assert (news.max_length, news.class_weights, news.eval_every) == (128, "balanced", 0)
    assert news.overrides() == {} and news.run_dir().name == "news"       # not "-class_weightsbalanced-..."
    assert FinetuneConfig.for_scale("cpu", task="news", lr=1e-3).run_dir().name == "news-lr0.001"
    table = news.table()
    assert table.loc["class_weights", "from"] == f"task news: {CONSTANT['finetuning/news']['class_weights'].why}"
    assert table.loc["max_length", "from"] == "scale cpu, task news"
    assert table.loc["warmup_ratio", "from"].startswith("recipe: 10 %")
    with pytest.raises(ConfigError, match=r"task='weather': use one of reviews, news, own"):
        FinetuneConfig.for_scale("cpu", task="weather")


def test_the_table_says_where_each_value_comes_from():
    t = PretrainConfig.for_scale("smoke", lr=2e-3).table()
    assert t.loc["lr", "from"] == "override" and t.loc["model", "from"] == "scale smoke"
    assert t.loc["warmup_ratio", "from"].startswith("recipe: 6 %") and t.loc["lr", "meaning"] == "peak learning rate"
    assert "unused: no corpus" in t.loc["fit_to_corpus", "from"]


def test_step_path_looks_and_step_dir_creates(runs_tmp):
    assert not runs.step_path("smoke", "mlm").exists()
    d = runs.step_dir("smoke", "mlm")
    assert d == runs_tmp.resolve() / "smoke" / "mlm" and d.is_dir()


def test_import_nbkit_is_cheap():
    import subprocess
    import sys

    code = "import sys, nbkit; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_the_table_tells_a_sized_value_from_an_override():
    """pretraining.size replaces fields with its plan's values but keeps ``given()`` the user's: the table says
    which values the sizing chose."""
    cfg = PretrainConfig.for_scale("cpu", lr=2e-3)
    sized = cfg.replace(max_steps=77)
    object.__setattr__(sized, "_given", cfg.given())     # what pretraining.size does with its plan
    t = sized.table()
    assert t.loc["max_steps", "from"] == "sized for the corpus" and t.loc["lr", "from"] == "override"


def test_the_reason_of_a_scale_or_context_value_is_printed_beside_it():
    t = PretrainConfig.for_scale("cpu", objective="causal").table()
    assert t.loc["lr", "from"] == f"scale cpu, causal: {PER_SCALE['pretraining/causal']['lr'].why}"
    assert t.loc["model", "from"] == "scale cpu, causal"                   # a plain row: the scale is its reason
    assert t.loc["max_steps", "value"] == "1300"
