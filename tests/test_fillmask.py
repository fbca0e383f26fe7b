"""fill_mask: the standard fill-mask pipeline on nbkit's model, and the frequency-vs-context verdict."""
import pytest

from nbkit.errors import DataError
from nbkit.evaluate.probes import FillMaskReport, fill_mask


def test_verdict_same_top_for_every_sentence_means_frequencies():
    row = [("，", 0.2), ("的", 0.1), ("。", 0.1), ("是", 0.05), ("不", 0.05)]
    rep = FillMaskReport(["a[MASK]", "b[MASK]", "c[MASK]"], [row, list(reversed(row)), row])
    assert rep.top_overlap == 1.0 and not rep.uses_context
    assert "frequent" in rep.verdict()


def test_verdict_frequencies_when_only_the_last_filler_changes():
    """A fresh user's case: five sentences got ，的了为 plus one other token each, at loss above the unigram
    entropy, and the verdict said "uses context" (it only counted identical sets: 2 of 5)."""
    base = [("，", 0.0), ("的", 0.0), ("了", 0.0), ("为", 0.0)]
    rows = [base + [(last, 0.0)] for last in ("是", "是", "不", "在", "有")]
    rep = FillMaskReport([f"{i}[MASK]" for i in range(5)], rows)
    assert rep.top_overlap >= 0.8 and not rep.uses_context and "frequent" in rep.verdict()


def test_verdict_context_when_guesses_differ():
    rep = FillMaskReport(["a", "b", "c"], [[("都", .5)], [("好", .4)], [("园", .3)]])
    assert rep.uses_context and rep.top_overlap == 0.0
    assert "context" in rep.verdict()
    assert list(rep.table().columns) == ["sentence", "top"]


@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory):
    from nbkit import models, text
    texts = ["北京是中国的首都。", "今天天气很好。", "这本书的质量非常好。"] * 20
    tok = text.train_wordpiece(texts, 26, tmp_path_factory.mktemp("tok"), 64)
    return models.build_mlm_model("tiny", tok, 64, seed=0), tok


def test_fill_mask_runs_the_pipeline_and_restores_train_mode(tiny_mlm):
    model, tok = tiny_mlm
    model.train()
    rep = fill_mask(model, tok, ["今天天气很[MASK]。", "北京是中国的首[MASK]。"], top_k=3)
    assert [len(r) for r in rep.top] == [3, 3]
    assert all(0.0 <= p <= 1.0 for row in rep.top for _, p in row)
    assert rep.sentences[0] == "今天天气很[MASK]。"
    assert model.training


def test_fill_mask_needs_one_mask(tiny_mlm):
    model, tok = tiny_mlm
    with pytest.raises(DataError, match="exactly one"):
        fill_mask(model, tok, ["没有遮盖"])
