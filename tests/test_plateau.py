"""The unigram-plateau check of notebook 02 (nbkit.evaluate.probes)."""
import math

import pytest

from nbkit import evaluate
from nbkit.evaluate.probes import unigram_entropy


def test_unigram_entropy_of_a_known_distribution_ignoring_special_ids():
    rows = [[101, 5, 5, 6, 102], [101, 7, 8, 102]]  # tokens 5,5,6,7,8 -> p = .4, .2, .2, .2
    h = unigram_entropy(rows, ignore_ids=[101, 102])
    assert h == pytest.approx(-(0.4 * math.log(0.4) + 3 * 0.2 * math.log(0.2)))
    with pytest.raises(ValueError, match="no tokens"):
        unigram_entropy([[101, 102]], ignore_ids=[101, 102])


def test_a_loss_at_the_entropy_is_stuck_and_names_the_fix():
    rows = [list(range(1, 101))] * 3  # uniform over 100 tokens: entropy ln 100 = 4.61 nats
    stuck = evaluate.plateau_check(4.5, rows)
    assert stuck.stuck and "STUCK" in stuck.text() and "lower learning rate" in stuck.text()
    ok = evaluate.plateau_check(3.0, rows)
    early = evaluate.plateau_check(6.0, rows)  # above the entropy: too few steps, not "stuck"
    assert early.above and not early.stuck and "more steps" in early.text() and "STUCK" not in early.text()
    assert not ok.stuck and not ok.above and ok.gap == pytest.approx(math.log(100) - 3.0) and "uses context" in ok.text()


def test_special_ids_come_from_the_tokenizer_and_a_dataset_works():
    datasets = pytest.importorskip("datasets")

    class Tok:
        all_special_ids = [0]

    ds = datasets.Dataset.from_dict({"input_ids": [[0, 1, 2], [0, 1, 2]]})
    assert evaluate.plateau_check(0.1, ds, Tok()).unigram_entropy == pytest.approx(math.log(2))
    with pytest.raises(ValueError, match="evaluate first"):
        evaluate.plateau_check(float("nan"), ds)
