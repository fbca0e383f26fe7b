"""Named entities through the fine-tuning recipe (task ner): config, a BertForTokenClassification from a
published-layout checkpoint, the loop (loss, resume), entity-level evaluation beside the CRF, the job."""
import json
from pathlib import Path

import pytest
from _ner_items import fake_ner

from nbkit.recipes.finetuning import FinetuneConfig


def test_ner_defaults_and_run_folders(tmp_path):
    cfg = FinetuneConfig.for_scale("smoke", task="ner")
    assert (cfg.max_length, cfg.stride, cfg.corpus_lines) == (32, 8, 600)
    assert cfg.table().loc["stride", "from"] == "scale smoke, task ner"
    assert cfg.run_dir().name == "ner"
    assert "text_column" in cfg.unused() and "pooling" in cfg.unused()
    own = cfg.replace(train_file=str(tmp_path / "mine.conll"))
    assert own.run_dir().name.startswith("ner-own-mine-") and "corpus_lines" in own.unused()
    assert cfg.replace(seed=3).run_dir().name == "ner-seed3"
    reviews = FinetuneConfig.for_scale("smoke")
    assert "stride" in reviews.unused() and reviews.run_tag() == ""       # the NER fields leave sentiment alone
    assert FinetuneConfig.for_scale("cpu", task="ner").max_length == 128


def test_token_head_from_a_published_checkpoint_and_from_random_weights(tmp_path):
    from transformers import AutoTokenizer, BertForTokenClassification

    from nbkit.models.bert import build_classifier
    from nbkit.models.standin import build_standin

    folder = build_standin(tmp_path / "bert")
    tok = AutoTokenizer.from_pretrained(str(folder))
    labels = dict(enumerate(["O", "B-PER", "I-PER"]))
    model, how = build_classifier(folder, 3, labels, tokenizer=tok, head="token")
    assert isinstance(model, BertForTokenClassification) and "classifier" in how and "per token" in how
    assert model.config.id2label == labels
    scratch, how = build_classifier(None, 3, labels, tokenizer=tok, preset="tiny", head="token")
    assert isinstance(scratch, BertForTokenClassification) and how.startswith("from scratch")


class Losses:
    """Callback: the training loss of every log line."""

    def __init__(self):
        self.values = []

    def on_log(self, loop, logs):
        self.values.append(logs["loss"])


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    from nbkit.models.standin import build_standin

    return build_standin(tmp_path_factory.mktemp("standin") / "bert")


@pytest.mark.slow
def test_smoke_run_learns_resumes_and_scores_every_entity(standin, tmp_path, capsys):
    pytest.importorskip("nbkit.evaluate.ner")
    from nbkit.recipes import finetuning as ft

    labeled = fake_ner(n_train=96, n_eval=16, long_every=4)
    cfg = FinetuneConfig.for_scale("smoke", task="ner", init=str(standin), max_length=16, stride=4, batch_size=8,
                                   max_steps=24, lr=3e-3, eval_every=12, checkpoint_every=12, progress=False,
                                   report_to="none", n_boot=20)
    out, losses = tmp_path / "run", Losses()
    metrics = ft.run_finetuning(cfg, out, labeled=labeled, callbacks=[losses])
    assert len(losses.values) >= 4 and losses.values[-1] < losses.values[0]
    assert metrics["windows"]["n_windowed"] == 4 and metrics["windows"]["n_windows"] > 16
    assert metrics["train"]["eval_accuracy"] > 0 and "eval_perplexity" not in metrics["train"]
    # a floor a broken tagger cannot pass: all-O scores 0, and so do tags shifted by one character; this run
    # (24 steps on 96 easy sentences) finds about half of the entities (0.54 on 2026-12-05), the CRF all of them
    assert metrics["test_entity_f1"] >= 0.35 and metrics["test_entity_recall"] >= 0.25, metrics["n_errors"]
    assert metrics["baseline_entity_f1"] >= 0.9
    assert "fine-tuned BERT" in metrics["table"].index
    # the same run longer: it resumes from step 24's checkpoint
    capsys.readouterr()
    again = ft.run_finetuning(cfg.replace(max_steps=30), out, labeled=labeled)
    assert "resumed from" in capsys.readouterr().out and again["train"]["steps"] == 30


SAMPLE = Path(__file__).resolve().parents[1] / "notebooks" / "data" / "sample_ner.conll"


@pytest.mark.slow
def test_the_job_trains_on_the_users_conll_file(standin, tmp_path, capsys):
    pytest.importorskip("nbkit.evaluate.ner")
    from nbkit.jobs import finetune

    out = tmp_path / "out"
    rc = finetune.main(["--scale", "smoke", "--task", "ner", "--train-file", str(SAMPLE), "--init", str(standin),
                        "--max-steps", "4", "--n-boot", "20", "--report-to", "none", "--output-dir", str(out),
                        "--export"])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["task"] == "ner" and metrics["config"]["train_file"] == str(SAMPLE)
    assert (metrics["n_train"], metrics["n_val"], metrics["n_test"]) == (161, 20, 20)
    assert "fine-tuned BERT" in printed and "CRF" in printed and "exported model" in printed
    saved = json.loads((out / "model" / "config.json").read_text(encoding="utf-8"))
    assert saved["architectures"] == ["BertForTokenClassification"] and "B-PER" in saved["label2id"]


def test_job_flags_for_ner(tmp_path):
    from nbkit.errors import ConfigError
    from nbkit.jobs import finetune

    cfg, out = finetune.config(finetune.parser().parse_args(["--scale", "smoke", "--task", "ner"]))
    assert cfg.task == "ner" and cfg.train_file is None and out.name == "ner"
    cfg, out = finetune.config(finetune.parser().parse_args(["--scale", "smoke", "--task", "ner", "--train-file",
                                                             str(SAMPLE), "--stride", "4"]))
    assert cfg.task == "ner" and cfg.stride == 4 and out.name.startswith("ner-own-sample_ner-")
    with pytest.raises(ConfigError, match="add --train-file"):
        finetune.config(finetune.parser().parse_args(["--scale", "smoke", "--task", "ner", "--test-file", "t.conll"]))
    cfg, out = finetune.config(finetune.parser().parse_args(["--scale", "smoke", "--task", "ner", "--train-file",
                                                             str(SAMPLE), "--span-offsets", "utf16"]))
    assert cfg.span_offsets == "utf16" and out.name.endswith("-span_offsetsutf16")
    with pytest.raises(ConfigError, match="span_offsets"):
        finetune.config(finetune.parser().parse_args(["--scale", "smoke", "--task", "ner", "--train-file",
                                                      str(SAMPLE), "--span-offsets", "bytes"]))


def test_run_notebooks_headline_of_notebook_07(tmp_path):
    from nbkit.cli.run_notebooks import headline

    (tmp_path / "ner").mkdir()
    (tmp_path / "ner" / "metrics.json").write_text(json.dumps({"test_entity_f1": 0.7512, "baseline_entity_f1": 0.8}))
    assert headline("07_named_entities.ipynb", tmp_path) == "test entity F1 0.751 vs CRF baseline 0.800 (-4.9 points)"


def _users_files(tmp_path: Path) -> tuple[Path, Path]:
    """A user's CoNLL training file as export tools write them (``-DOCSTART-`` lines, an ``I-`` without ``B-``,
    a repeated sentence, an emoji the vocabulary lacks) and a Label Studio-style JSON lines test file whose span
    carries a leading space."""
    rows = ["-DOCSTART-\tO", ""]
    for i in range(40):
        rows += [f"{c}\tO" for c in "我在"] + ["北\tB-LOC", "京\tI-LOC"] + [f"{c}\tO" for c in f"{i}号"] + [""]
        rows += ["张\tB-PER", "三\tI-PER", f"{'😀' if i % 10 == 0 else '好'}\tO"] + [f"{c}\tO" for c in str(i)] + [""]
    rows += ["李\tO", "四\tI-PER", "来\tO", ""]                                     # I-PER without B-PER
    rows += ["-DOCSTART-\tO", ""] + ["我\tO", "在\tO", "北\tB-LOC", "京\tI-LOC", "0\tO", "号\tO", ""]  # a duplicate
    train = tmp_path / "train.conll"
    train.write_text("\n".join(rows) + "\n", encoding="utf-8")
    test = tmp_path / "test.jsonl"
    test.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [
        {"text": "他 去 上海", "label": [{"start": 3, "end": 6, "labels": ["LOC"], "text": " 上海"}]},
        {"text": "王五在北京", "label": [{"start": 0, "end": 2, "labels": ["PER"], "text": "王五"},
                                        {"start": 3, "end": 5, "labels": ["LOC"], "text": "北京"}]}]), encoding="utf-8")
    return train, test


def test_report_text_names_every_repair_and_drop(tmp_path):
    from nbkit.data.ner import load_ner_files, report_text
    from nbkit.recipes import finetuning as ft

    train, test = _users_files(tmp_path)
    data = load_ner_files(train, test=test, val_fraction=0.1)
    text = report_text(data.report)
    assert "data: 84 sentences read, kept 73 train / 8 validation / 2 test" in text
    assert "dropped: 1 duplicate sentence" in text
    assert "repaired: 1 I- without B- read as B- (lines 544), 1 span trimmed of edge whitespace" in text
    assert "skipped: 2 -DOCSTART- lines" in text
    cfg = FinetuneConfig.for_scale("smoke", task="ner", train_file=str(train), test_file=str(test))
    from transformers import AutoTokenizer

    from nbkit.models.standin import build_standin

    tok = AutoTokenizer.from_pretrained(str(build_standin(tmp_path / "bert")))
    _, windows = ft.encode(cfg, tok, data)
    assert "tokens: 2 characters without a token" in report_text(data.report, windows)
    assert "characters read as [UNK] ('😀')" in report_text(data.report, windows)


@pytest.mark.slow
def test_the_job_prints_what_the_data_report_repaired_dropped_and_kept(standin, tmp_path, capsys):
    from nbkit.jobs import finetune

    train, test = _users_files(tmp_path)
    rc = finetune.main(["--scale", "smoke", "--task", "ner", "--train-file", str(train), "--test-file", str(test),
                        "--init", str(standin), "--max-steps", "2", "--n-boot", "10", "--report-to", "none",
                        "--output-dir", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    for line in ("data: 84 sentences read, kept 73 train / 8 validation / 2 test", "dropped: 1 duplicate sentence",
                 "repaired: 1 I- without B- read as B- (lines 544), 1 span trimmed of edge whitespace",
                 "skipped: 2 -DOCSTART- lines", "characters read as [UNK] ('😀')"):
        assert line in printed, printed
    assert printed.index("skipped: 2 -DOCSTART- lines") < printed.index("train step 1")      # before training
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["n_spans_trimmed"] == 1 and metrics["n_docstart_lines"] == 2
    # item 23: the CRF is saved with the run, named on screen, and tags plain text from there
    from nbkit.evaluate.ner import CrfTagger

    assert metrics["baseline_model"] == str(tmp_path / "out" / "crf") and "CRF baseline: " in printed
    assert [e["entity_group"] for e in CrfTagger.load(tmp_path / "out" / "crf").predict("我在北京3号")] == ["LOC"]


@pytest.mark.slow
def test_the_job_says_on_screen_before_training_that_the_encoder_is_random(tmp_path, monkeypatch, capsys):
    from nbkit.jobs import finetune

    monkeypatch.setenv("NBKIT_RUNS_DIR", str(tmp_path / "runs"))          # notebook 02 never ran here
    train, test = _users_files(tmp_path)
    rc = finetune.main(["--scale", "smoke", "--task", "ner", "--train-file", str(train), "--test-file", str(test),
                        "--max-steps", "1", "--n-boot", "10", "--report-to", "none", "--eval-every", "0",
                        "--output-dir", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    warning = printed.index("warning: no pretrained encoder")
    assert warning < printed.index("train step 1"), printed
    line = printed[warning:].splitlines()[0]
    assert "RANDOM weights" in line and "--init" in line and "notebook 02" in line and "nbkit.jobs.pretrain" in line


def test_random_weights_are_said_for_every_task_unless_asked_for(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from nbkit.models.standin import build_standin
    from nbkit.recipes import finetuning as ft

    monkeypatch.setenv("NBKIT_RUNS_DIR", str(tmp_path / "runs"))
    tok = AutoTokenizer.from_pretrained(str(build_standin(tmp_path / "bert")))
    labeled = SimpleNamespace(num_labels=2, id2label={0: "neg", 1: "pos"})
    sentiment = FinetuneConfig.for_scale("smoke")                            # notebook 03's and the job's task
    ft.model(sentiment, tok, labeled)
    assert "warning: no pretrained encoder" in capsys.readouterr().out
    ft.model(sentiment.replace(init="random"), tok, labeled)                 # asked for: no warning
    assert "warning" not in capsys.readouterr().out
    (tmp_path / "runs" / "smoke" / "mlm" / "model").mkdir(parents=True)      # notebook 02's model is there
    (tmp_path / "runs" / "smoke" / "mlm" / "model" / "config.json").write_text("{}")
    assert ft.random_encoder_warning(sentiment) == ""
