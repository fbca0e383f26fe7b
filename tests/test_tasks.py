"""The fine-tuning tasks (nbkit.tasks): a registry that names every task, each carrying its scale rows, and a
recipe that asks the task instead of testing its name."""
import re
from pathlib import Path

import pytest

from nbkit import tasks
from nbkit.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_an_unknown_task_is_a_config_error_listing_every_task():
    with pytest.raises(ConfigError) as e:
        tasks.get("weather")
    assert str(e.value).startswith("task='weather': use one of reviews, news, own, ner (")
    assert all(f"{name}: {t.about}" in str(e.value) for name, t in tasks.TASKS.items())


def test_each_task_is_found_by_its_name_and_its_rows_are_scale_rows():
    from nbkit.recipes.scales import PER_SCALE

    for name, task in tasks.TASKS.items():
        assert tasks.get(name) is task and task.name == name
        assert task.rows is None or task.rows in PER_SCALE
    assert tasks.get("ner").rows == "finetuning/ner" and tasks.get("news").rows == "finetuning/news"
    assert [t.files for t in tasks.TASKS.values()] == [None, None, "labelled", "tagged"]


def test_a_bundled_task_refuses_files_it_would_ignore():
    from nbkit.recipes.finetuning import FinetuneConfig

    with pytest.raises(ConfigError, match="trains on the bundled news and would ignore them"):
        FinetuneConfig.for_scale("smoke", task="news", train_file="mine.csv")
    assert FinetuneConfig.for_scale("smoke", task="ner", train_file="mine.conll").train_file == "mine.conll"


@pytest.mark.parametrize("path", ["nbkit/recipes/finetuning.py", "nbkit/jobs/finetune.py"])
def test_the_recipe_and_the_job_ask_the_task_instead_of_testing_its_name(path):
    text = (ROOT / path).read_text(encoding="utf-8")
    assert not re.search(r"\btask\s*[!=]=|\btask\s+(not\s+)?in\s*\(", text)
