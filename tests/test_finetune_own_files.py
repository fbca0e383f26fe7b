"""`python -m nbkit.jobs.finetune --train-file ...`: the job on the user's labelled files (notebook 05's loader),
its folder per data, and the summary it ends with."""
import json
import os

import pytest

LABELS = {"正面": "很好非常满意推荐", "负面": "太差失望退货", "中性": "一般还行普通"}


def _csv(path, n=30, shift=0):
    """A CSV with columns 评论 (text) and 情感 (label), Chinese label names."""
    rows = ["编号,评论,情感"]
    for lab, w in LABELS.items():
        rows += [f"{i},{w[(i + shift) % len(w):]}{w[:(i + shift) % len(w)]}第{i + shift}回,{lab}" for i in range(n)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def own_job(tmp_path, monkeypatch):
    """The job module with a tiny tokenizer for notebook 01's and no pretrained encoder (random weights)."""
    from nbkit import text
    from nbkit.jobs import finetune as job
    from nbkit.recipes import finetuning as ft
    from nbkit.recipes import tokenizer as tk

    train = _csv(tmp_path / "data" / "my_reviews.csv")
    tok = text.train_wordpiece([w * 3 for w in LABELS.values()] + [f"第{i}回" for i in range(40)], vocab_size=40,
                               out_dir=tmp_path / "tok", model_max_length=64)
    monkeypatch.setattr(tk, "load", lambda scale: tok)
    monkeypatch.setattr(ft, "default_encoder", lambda scale: None)
    monkeypatch.setenv("NBKIT_RUNS_DIR", str(tmp_path / "runs"))
    return job, train


@pytest.mark.filterwarnings("ignore:class .* has recall 0", "ignore:degenerate classifier")
def test_job_trains_on_own_csv_with_custom_columns_and_chinese_labels(own_job, capsys):
    job, train = own_job
    assert job.main(["--scale", "smoke", "--train-file", str(train), "--text-column", "评论", "--label-column", "情感",
                     "--max-steps", "2", "--batch-size", "8", "--resume", "none", "--export"]) == 0
    _, out_dir = job.config(job.parser().parse_args(["--scale", "smoke", "--train-file", str(train), "--text-column", "评论",
                                            "--label-column", "情感", "--max-steps", "2", "--batch-size", "8"]))
    assert out_dir.name.startswith("sentiment-own-my_reviews-") and out_dir.name.endswith("-batch_size8-max_steps2")
    m = json.loads((out_dir / "metrics.json").read_text(encoding="utf-8"))
    assert m["task"] == "own" and m["data_files"]["train"] == str(train) and m["train"]["steps"] == 2
    assert m["n_test"] == 9 and m["baseline_accuracy"] is not None and m["baseline_cut_accuracy"] is not None
    config = json.loads((out_dir / "model" / "config.json").read_text(encoding="utf-8"))
    assert sorted(config["id2label"].values()) == sorted(LABELS) and set(config["label2id"]) == set(LABELS)
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("fine-tuned BERT"))
    assert row.split()[-3:] == [f"{m['test_accuracy']:.3f}", f"{m['test_macro_f1']:.3f}", "9"]   # accuracy, F1, n
    assert "TF-IDF + LR (full text)" in out and "TF-IDF + LR (same 64-token cut)" in out
    assert f"-> {out_dir} (metrics.json); exported model: {out_dir / 'model'}" in out
    for w in m["warnings"]:                                                      # e.g. a degenerate classifier
        assert f"warning: {w}" in out


def test_task_and_own_files_are_one_or_the_other(own_job, capsys):
    job, train = own_job
    assert job.main(["--task", "news", "--train-file", str(train)]) == 2
    assert "--task news is a bundled task; --train-file trains on your own files" in capsys.readouterr().err
    assert job.main(["--test-file", str(train), "--label-column", "y"]) == 2
    err = capsys.readouterr().err
    assert "--test-file, --label-column" in err and "add --train-file" in err
    cfg, _ = job.config(job.parser().parse_args(["--train-file", str(train)]))
    assert (cfg.task, cfg.text_column, cfg.label_column) == ("own", "text", "label")   # load_labeled_files' defaults


def test_other_files_or_columns_get_other_folders(own_job, tmp_path):
    """Two files named alike (and the same file read by other columns) never share a folder, or the bundled one's."""
    job, train = own_job
    other = _csv(tmp_path / "elsewhere" / "my_reviews.csv", shift=1)
    folder = lambda *flags: job.config(job.parser().parse_args(["--scale", "smoke", *flags]))[1]  # noqa: E731
    names = {folder("--train-file", str(train)), folder("--train-file", str(other)),
             folder("--train-file", str(train), "--text-column", "编号"),
             folder("--train-file", str(train), "--test-file", str(other)), folder()}
    assert len(names) == 5 and folder().name == "sentiment"
    assert folder("--train-file", str(train)) == folder("--train-file", str(train))   # resumes its own run


def test_a_job_refused_for_its_data_leaves_no_empty_run_folder(own_job, tmp_path, capsys):
    """A job stopped by bad input (here a train file without the default text column) left runs/<scale>/<run>/ created and
    empty; a folder with anything in it (an earlier run's) stays."""
    job, train = own_job
    runs = tmp_path / "runs"
    assert job.main(["--scale", "smoke", "--train-file", str(train), "--label-column", "absent"]) == 2
    assert "has no" in capsys.readouterr().err
    assert not runs.exists() or not any(p.is_dir() and not any(p.iterdir()) for p in runs.rglob("*"))
    kept = runs / "smoke" / "earlier"
    kept.mkdir(parents=True)
    (kept / "metrics.json").write_text("{}")
    assert job.main(["--scale", "smoke", "--train-file", str(train), "--label-column", "absent"]) == 2
    assert (kept / "metrics.json").exists() and sorted(p.name for p in (runs / "smoke").iterdir()) == ["earlier"]


@pytest.mark.parametrize("task, name, columns", [("own", "reviews.csv", {"text_column": "t", "label_column": "l"}),
                                                 ("ner", "tags.conll", {})])
def test_an_edited_data_file_gets_another_run_folder_so_no_run_resumes_a_model_of_other_data(tmp_path, task, name,
                                                                                             columns):
    from nbkit.recipes.finetuning import FinetuneConfig

    train = tmp_path / name
    cfg = FinetuneConfig.for_scale("smoke", task=task, train_file=str(train), **columns)
    missing = cfg.run_dir().name                 # a missing file names a folder; its loader raises the error
    train.write_text("t,l\n好,正面\n", encoding="utf-8")
    first = cfg.run_dir().name
    os.utime(train, (1, 1))                      # touched or copied, same bytes: the same folder (a resume)
    assert cfg.run_dir().name == first != missing
    train.write_text("t,l\n好,负面\n", encoding="utf-8")                       # a label fixed in place
    edited = cfg.run_dir().name
    assert edited != first and edited.rsplit("-", 1)[0] == first.rsplit("-", 1)[0]   # same stem, other hash
