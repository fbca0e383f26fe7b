"""NER evaluation: seqeval entity scores against a hand-computed example, bootstrap intervals over sentences, and
the CRF baseline beating a per-character majority tagger."""
from __future__ import annotations

from collections import Counter, defaultdict

import pytest
from _load import load_script

from nbkit.errors import ConfigError, DataError
from nbkit.evaluate import ner

GOLD = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG", "O"]]
PRED = [["B-PER", "I-PER", "O", "O"], ["B-ORG", "O", "B-LOC"]]  # PER right, ORG cut short, LOC missed + spurious


def test_entity_scores_hand_computed():
    s = ner.entity_scores(GOLD, PRED)
    # gold: PER, LOC, ORG; predicted: PER (right), ORG[0:1] (wrong end), LOC in sentence 2 (spurious)
    assert (s["n_gold"], s["n_pred"], s["n_correct"], s["n_sentences"]) == (3, 3, 1, 2)
    assert s["precision"] == pytest.approx(1 / 3) and s["recall"] == pytest.approx(1 / 3)
    assert s["f1"] == pytest.approx(1 / 3)
    assert s["per_type"] == {"LOC": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1},
                             "ORG": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1},
                             "PER": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1}}
    assert all(type(v) is float for v in (s["precision"], s["recall"], s["f1"]))


def test_default_mode_reads_an_orphan_i_as_an_entity_start():
    s = ner.entity_scores([["O", "B-PER", "I-PER", "O"]], [["O", "I-PER", "I-PER", "O"]])
    assert s["f1"] == 1.0 and s["mode"] == "default"  # conlleval; strict mode would score 0


def test_the_one_entity_reader_ends_exclusive_and_reads_as_the_scores_do():
    from nbkit.data.ner import entity_spans

    tags = ("I-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "I-ORG", "B-PER")   # a tuple is read too
    # an orphan I- opens an entity; B-LOC B-LOC are two; I-ORG after LOC opens ORG; an entity at the end
    spans = [("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 6), ("ORG", 6, 7), ("PER", 7, 8)]
    assert entity_spans(tags) == spans
    assert entity_spans(["O", "O"]) == [] and entity_spans([]) == []
    assert ner.entity_scores([list(tags)], [list(tags)])["n_gold"] == len(spans)
    one_off = ["O", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "I-ORG", "B-PER"]   # PER cut short: 4 of 5 match
    assert ner.entity_scores([list(tags)], [one_off])["n_correct"] == 4


def test_entity_scores_refuses_misaligned_input():
    with pytest.raises(DataError, match="2 sentences but gold 1"):
        ner.entity_scores([["O"]], [["O"], ["O"]])
    with pytest.raises(DataError, match="sentence 1: pred has 2 tags but gold 3"):
        ner.entity_scores(GOLD, [PRED[0], ["O", "O"]])


def _system(n: int = 60):
    gold = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC"] for _ in range(n)]
    pred = [g if i % 3 else ["O", "O", "O", "B-LOC", "I-LOC"] for i, g in enumerate(gold)]
    return gold, pred


def test_interval_brackets_the_full_set_f1_and_is_seeded():
    gold, pred = _system()
    f1 = ner.entity_scores(gold, pred)["f1"]
    lo, hi = ner.entity_f1_interval(gold, pred, n_boot=300, seed=0)
    assert lo < f1 < hi and 0 <= lo and hi <= 1
    assert ner.entity_f1_interval(gold, pred, n_boot=300, seed=0) == (lo, hi)
    assert ner.entity_f1_interval(gold, gold, n_boot=50) == (1.0, 1.0)
    # two seeds' runs: the interval of their mean F1 lies between the two systems'
    lo2, hi2 = ner.entity_f1_interval(gold, [pred, gold], n_boot=300)
    assert lo < lo2 and hi2 <= 1.0
    with pytest.raises(ConfigError, match="n_boot=0"):
        ner.entity_f1_interval(gold, pred, n_boot=0)


def test_paired_difference():
    gold, pred = _system()
    same = ner.entity_f1_diff(gold, pred, pred, n_boot=100)
    assert same["value"] == same["low"] == same["high"] == 0.0
    better = ner.entity_f1_diff(gold, gold, pred, n_boot=300)
    assert better["value"] == pytest.approx(1 - ner.entity_scores(gold, pred)["f1"])
    assert 0 < better["low"] <= better["value"] <= better["high"]
    with pytest.raises(DataError):
        ner.entity_f1_diff(gold, pred, pred[:-1])


def test_char_features_window_and_classes():
    feats = ner.char_features(["张", "3", "，", "A"])
    assert len(feats) == 4 and len(feats[0]) == 15
    assert {"c0=张", "c-1=BOS1", "c-2=BOS2", "c1=3", "c0c1=张|3", "c-1c1=BOS1|3", "t0=H"} <= set(feats[0])
    assert {"t0=D", "t1=P"} <= set(feats[1]) and "t0=L" in feats[3] and "c2=EOS1" in feats[2] and "c2=EOS2" in feats[3]


def test_crf_baseline_beats_a_majority_tagger_on_a_small_subset():
    from nbkit.data.ner import load_peoples_daily_ner

    data = load_peoples_daily_ner(lines=500, seed=0)
    train, test = data.splits["train"][:300], data.splits["test"][:150]
    gold = [item["tags"] for item in test]
    crf = ner.entity_scores(gold, ner.crf_baseline(train, test, max_iter=30))
    seen: dict[str, Counter] = defaultdict(Counter)  # the trivial tagger: each character's most frequent tag
    for item in train:
        for ch, tag in zip(item["tokens"], item["tags"]):
            seen[ch][tag] += 1
    majority = [[seen[ch].most_common(1)[0][0] if ch in seen else "O" for ch in item["tokens"]] for item in test]
    trivial = ner.entity_scores(gold, majority)
    assert crf["f1"] > trivial["f1"] + 0.2, (crf["f1"], trivial["f1"])


def test_crf_baseline_refuses_empty_or_misaligned_training():
    with pytest.raises(DataError, match="no training sentences"):
        ner.crf_baseline([], [{"tokens": ["a"]}])
    with pytest.raises(DataError, match="sentence x: tags and tokens differ"):
        ner.crf_baseline([{"id": "x", "tokens": ["a", "b"], "tags": ["O"]}], [{"tokens": ["a"]}])


def test_docs_block_comes_from_the_recorded_run(tmp_path):
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    table = load_script(root / "scripts" / "ner_baseline_table.py")
    run = table.newest("ner_baseline_*.json")
    block = table.render(run)
    for path in table.FILES:
        inside = path.read_text(encoding="utf-8").split(table.START, 1)[1].split(table.END, 1)[0]
        assert inside.strip() == block, f"{path.name}'s block is stale: run .venv/bin/python scripts/ner_baseline_table.py"
    d = json.loads(run.read_text(encoding="utf-8"))
    assert f"{d['test']['f1']:.3f} [{d['test']['f1_low']:.3f}, {d['test']['f1_high']:.3f}]" in block
    assert d["machine"] in block and "shared" in d["machine"]
    d["test"]["f1"] = 0.123456  # the block follows the file, nothing typed by hand
    other = tmp_path / "ner_baseline_cpu_2099-01-01.json"
    other.write_text(json.dumps(d), encoding="utf-8")
    assert "0.123 [" in table.render(other)
    with pytest.raises(ValueError, match="needs exactly one"):
        sys.modules["blocks"].replace_block("no markers", "B", table.START, table.END)


def test_the_crf_is_saved_loaded_in_a_fresh_process_and_tags_plain_text_the_same(tmp_path):
    """Issue 52, item 23: the CRF that wins could be neither saved nor served."""
    import json
    import subprocess
    import sys

    from nbkit.data.ner import load_peoples_daily_ner

    data = load_peoples_daily_ner(lines=300, seed=0)
    train, test = data.splits["train"][:200], data.splits["test"][:40]
    pred = ner.crf_baseline(train, test, max_iter=20, save_to=tmp_path / "crf")
    assert sorted(p.name for p in (tmp_path / "crf").iterdir()) == ["crf.json", "model.crfsuite"]
    meta = json.loads((tmp_path / "crf" / "crf.json").read_text(encoding="utf-8"))
    assert meta["features"] == ner.FEATURES_VERSION and "B-LOC" in meta["labels"] and meta["n_train_sentences"] == 200
    texts = ["".join(item["tokens"]) for item in test]
    code = ("import json, sys; from nbkit.evaluate.ner import CrfTagger; crf = CrfTagger.load(sys.argv[1]); "
            "texts = json.loads(sys.argv[2]); print(json.dumps([[crf.tags(list(t)) for t in texts], crf.predict(texts),"
            " crf.predict(texts[0])], ensure_ascii=False))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "crf"), json.dumps(texts, ensure_ascii=False)],
                         capture_output=True, text=True, check=True)
    tags, spans, one = json.loads(out.stdout)
    assert tags == pred                                       # the same tags from the file, in another process
    assert one == spans[0]                                    # a string: one list; a list of strings: one each
    from nbkit.data.ner import entity_spans

    for text, sentence_tags, found in zip(texts, pred, spans):
        assert [(e["entity_group"], e["start"], e["end"]) for e in found] == entity_spans(sentence_tags)
        assert all(e["word"] == text[e["start"]:e["end"]] and 0 < e["score"] <= 1 for e in found)
    assert sum(map(len, spans)) > 10                          # it found entities at all


def test_a_saved_crf_of_another_feature_template_or_a_missing_one_is_refused(tmp_path):
    from nbkit.errors import ConfigError

    items = [{"tokens": list("张三在北京"), "tags": ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]}] * 3
    crf = ner.CrfTagger.fit(items, max_iter=5)
    crf.save(tmp_path / "crf")
    assert ner.CrfTagger.load(tmp_path / "crf").predict("张三在北京")[0]["word"] == "张三"
    meta = tmp_path / "crf" / "crf.json"
    meta.write_text(meta.read_text(encoding="utf-8").replace(ner.FEATURES_VERSION, "old/0"), encoding="utf-8")
    with pytest.raises(ConfigError, match="feature template 'old/0'.*Retrain"):
        ner.CrfTagger.load(tmp_path / "crf")
    with pytest.raises(DataError, match="holds no saved CRF"):
        ner.CrfTagger.load(tmp_path / "nothing")
    with pytest.raises(DataError, match="a string or a list of strings"):
        crf.predict([["张", "三"]])
