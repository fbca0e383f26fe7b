"""export_token_classifier: a folder transformers' token-classification pipeline loads as it is, whose tags on a
test split are the job's, so the entity-level F1 computed from the pipeline's spans equals the job's; on sentences
longer than the model's block too, when the pipeline is given the run's stride."""
import json

import pytest
from _ner_items import fake_ner

from nbkit.data.ner import entity_spans


def entities(tags) -> set:
    return set(entity_spans(tags))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A BertForTokenClassification from a stand-in checkpoint, trained a few steps on hand-made items; every
    fourth sentence of each split is long (12 entities, ~60 characters: two or three windows of 32 tokens)."""
    from transformers import AutoTokenizer

    from nbkit.models.standin import build_standin
    from nbkit.recipes import finetuning as ft
    from nbkit.recipes.finetuning import FinetuneConfig

    root = tmp_path_factory.mktemp("ner_export")
    folder = build_standin(root / "bert")
    tok = AutoTokenizer.from_pretrained(str(folder))
    labeled = fake_ner(n_train=64, n_eval=24, long_every=4)
    cfg = FinetuneConfig.for_scale("smoke", task="ner", init=str(folder), max_length=32, batch_size=16, max_steps=40,
                                   lr=5e-3, eval_every=0, checkpoint_every=0, progress=False, report_to="none")
    encoded, _ = ft.encode(cfg, tok, labeled)
    model, _ = ft.model(cfg, tok, labeled)
    loop, _ = ft.train(cfg, model, tok, encoded)
    return cfg, loop.model, tok, labeled, root


@pytest.mark.slow
def test_pipeline_loads_the_export_and_gives_the_jobs_tags_and_f1(trained):
    from transformers import pipeline

    from nbkit.evaluate.inference import predict_tags
    from nbkit.evaluate.ner_report import pipeline_tags
    from nbkit.recipes import finetuning as ft

    cfg, model, tok, labeled, root = trained
    out = ft.export(cfg, model, tok, labeled, root / "export")
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["BertForTokenClassification"] and "auto_map" not in config
    assert config["id2label"] == {str(i): name for i, name in enumerate(labeled.labels)}
    pipe = pipeline("token-classification", model=str(out), aggregation_strategy="first", device="cpu")
    test = [it for it in labeled.splits["test"] if len(it["tokens"]) <= cfg.max_length - 2]   # one window each
    assert len(test) >= 12
    job, _ = predict_tags(model, tok, test, ft.id2label_of(labeled), cfg.max_length)
    from_pipe = pipeline_tags(pipe, test)
    predicted = sum(len(entities(t)) for t in job)
    assert predicted > 0, "the trained model predicts no entity: the comparison would be empty"
    assert [sorted(entities(t)) for t in from_pipe] == [sorted(entities(t)) for t in job]
    ner = pytest.importorskip("nbkit.evaluate.ner")
    gold = [it["tags"] for it in test]
    assert ner.entity_scores(gold, from_pipe)["f1"] == ner.entity_scores(gold, job)["f1"]
    # plain text (no word split): the same spans on Chinese-only sentences
    plain = pipe("".join(test[0]["tokens"]))
    assert {(s["entity_group"], s["start"], s["end"]) for s in plain} == entities(job[0])


@pytest.mark.slow
def test_a_sentence_longer_than_the_block_the_pipeline_with_stride_and_the_job_tag_alike(trained):
    """Sentences of 2-3 windows: the job's evaluation (windows merged per character) and the exported pipeline
    given the run's stride find the same entities, those past the first window included, so the F1s are equal;
    the pipeline's default call truncates at max_length tokens and finds none past it (README: pass stride)."""
    from transformers import pipeline

    from nbkit.evaluate.ner_report import pipeline_tags
    from nbkit.recipes import finetuning as ft

    cfg, model, tok, labeled, root = trained
    body = cfg.max_length - 2
    long = [it for it in labeled.splits["test"] if len(it["tokens"]) > body]
    assert len(long) >= 4
    gold = [it["tags"] for it in long]
    late = lambda tags: {e for e in entities(tags) if e[1] >= body}          # noqa: E731  past the first window
    assert sum(len(late(g)) for g in gold) >= 20
    job = ft.evaluate_ner(cfg, model, tok, type(labeled)({**labeled.splits, "test": long}), baseline=False)
    assert job["windows"]["n_windowed"] == len(long) and job["windows"]["n_windows"] >= 2 * len(long)
    # the job scores every gold entity, and the model finds most of those past the first window
    assert sum(len(late(g) & late(p)) for g, p in zip(gold, job["pred"])) >= 0.8 * sum(len(late(g)) for g in gold)

    pipe = pipeline("token-classification", model=str(ft.export(cfg, model, tok, labeled, root / "export-long")),
                    aggregation_strategy="first", device="cpu")
    windowed = pipeline_tags(pipe, long, stride=cfg.stride)
    assert [sorted(entities(t)) for t in windowed] == [sorted(entities(t)) for t in job["pred"]]
    ner = pytest.importorskip("nbkit.evaluate.ner")
    assert ner.entity_scores(gold, windowed)["f1"] == job["report"]["f1"]
    cut = pipeline_tags(pipe, long)                                          # no stride: truncated at max_length
    assert all(not late(t) for t in cut) and ner.entity_scores(gold, cut)["f1"] < job["report"]["f1"]


@pytest.mark.slow
def test_export_refuses_a_sequence_classifier_and_bad_labels(trained, tmp_path):
    from nbkit.errors import ConfigError
    from nbkit.models.bert import build_classifier
    from nbkit.models.export import export_token_classifier

    cfg, model, tok, labeled, root = trained
    seq, _ = build_classifier(None, 2, {0: "a", 1: "b"}, tokenizer=tok, preset="tiny")
    with pytest.raises(ConfigError, match="takes a token classifier"):
        export_token_classifier(seq, tok, tmp_path / "x")
    with pytest.raises(ConfigError, match="id2label has ids"):
        export_token_classifier(model, tok, tmp_path / "y", {0: "O"})
    assert not (tmp_path / "y").exists()


def test_the_export_records_the_runs_stride_not_a_quarter_of_max_length(trained, tmp_path):
    """The token-classification export wrote stride = max_length // 4 whatever the run's ``stride`` was, so the
    documented pipeline call windowed differently from training and scoring."""
    from nbkit.recipes import finetuning as ft

    cfg, model, tok, labeled, _ = trained
    for stride in (5, 20):                                          # neither is 32 // 4
        out = ft.export(cfg.replace(stride=stride), model, tok, labeled, tmp_path / f"s{stride}")
        config = json.loads((out / "config.json").read_text(encoding="utf-8"))
        assert config["task_specific_params"]["token-classification"]["stride"] == stride
