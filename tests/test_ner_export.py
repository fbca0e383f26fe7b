"""export_token_classifier: a folder transformers' token-classification pipeline loads as it is, whose tags on a
test split are the job's, so the entity-level F1 computed from the pipeline's spans equals the job's."""
import json

import pytest
from _ner_items import fake_ner


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A BertForTokenClassification from a stand-in checkpoint, trained a few steps on hand-made items."""
    from transformers import AutoTokenizer

    from nbkit.models.standin import build_standin
    from nbkit.recipes import finetuning as ft
    from nbkit.recipes.finetuning import FinetuneConfig

    root = tmp_path_factory.mktemp("ner_export")
    folder = build_standin(root / "bert")
    tok = AutoTokenizer.from_pretrained(str(folder))
    labeled = fake_ner(n_train=64, n_eval=24)
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
    from nbkit.evaluate.ner_report import entities, pipeline_tags
    from nbkit.recipes import finetuning as ft

    cfg, model, tok, labeled, root = trained
    out = ft.export(cfg, model, tok, labeled, root / "export")
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["BertForTokenClassification"] and "auto_map" not in config
    assert config["id2label"] == {str(i): name for i, name in enumerate(labeled.labels)}
    pipe = pipeline("token-classification", model=str(out), aggregation_strategy="simple", device="cpu")
    test = labeled.splits["test"]
    assert max(len(it["tokens"]) for it in test) <= cfg.max_length - 2      # the pipeline, unlike the job, truncates
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
