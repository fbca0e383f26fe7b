"""D11: long corpus rows are cut at sentence ends before any per-row step; the largest row's share is
reported; split errors name their cause. Inputs are generated fresh (no case files)."""
import random

import datasets
import pytest

from nbkit.data.corpora import split_corpus
from nbkit.data.textrule import CORPUS_MAX_CHARS, cut_rows
from nbkit.data.userfiles import load_text_file
from nbkit.errors import DataError


def _one_line_corpus(n_sentences=600, seed=3) -> str:
    rng = random.Random(seed)
    chars = "天地人和山水风云日月春秋花鸟书画琴棋诗酒茶"
    ends = "。！？"
    return "".join("".join(rng.choice(chars) for _ in range(rng.randint(5, 60))) + rng.choice(ends)
                   for _ in range(n_sentences))


def test_one_line_file_is_cut_at_sentence_ends_and_reported(tmp_path):
    corpus = _one_line_corpus()
    (tmp_path / "c.txt").write_text(corpus, encoding="utf-8")     # no newline at all
    report = {}
    ds = load_text_file(tmp_path / "c.txt", report=report)
    pieces = ds["text"]
    assert len(pieces) > 5 and max(map(len, pieces)) <= CORPUS_MAX_CHARS
    assert "".join(pieces) == corpus and all(p[-1] in "。！？" for p in pieces)
    assert report["n_rows_cut"] == 1 and report["largest_row_share"] == 1.0
    assert report["largest_row_chars"] == len(corpus)
    assert len(load_text_file(tmp_path / "c.txt", max_chars=None)) == 1


@pytest.mark.parametrize("seed", range(8))
def test_split_corpus_of_a_giant_row_holds_out_about_the_fraction(seed):
    text = _one_line_corpus(seed=seed)
    ds = datasets.Dataset.from_dict({"text": [text, "短句一。", "短句二。"]})
    parts = split_corpus(ds, eval_fraction=0.1, seed=seed)
    val_chars = sum(map(len, parts["validation"]["text"]))
    total = val_chars + sum(map(len, parts["train"]["text"]))
    assert 0.02 < val_chars / total < 0.25                    # never the whole corpus in one split


def test_split_corpus_errors_say_the_cause():
    with pytest.raises(DataError, match=r"1 row\(s\) \(4 characters\).*too little text"):
        split_corpus(datasets.Dataset.from_dict({"text": ["很短的句"]}))
    parts = split_corpus(datasets.Dataset.from_dict({"text": [_one_line_corpus(200)]}))   # one row, but big
    assert len(parts["train"]) > 1 and len(parts["validation"]) >= 1


def test_cut_rows_without_punctuation_cuts_hard_and_measures_share():
    rows, info = cut_rows(["甲" * 4500, "乙" * 500], 2000)
    assert [len(r) for r in rows] == [2000, 2000, 500, 500]
    assert info == {"n_rows_cut": 1, "largest_row_chars": 4500, "largest_row_share": 0.9}


def test_pretraining_corpus_cuts_a_giant_own_row_for_every_seed():
    from nbkit.data.labeled import build_labeled_data
    from nbkit.recipes.pretraining import pretraining_corpus

    texts = [f"评论{i}号，{'很好' if i % 2 else '很差'}" for i in range(40)]
    lab = build_labeled_data({"train": (texts, [i % 2 for i in range(40)])}, seed=0)
    corpus = datasets.Dataset.from_dict({"text": [_one_line_corpus()]})
    for seed in range(10):
        with pytest.warns(UserWarning, match=r"1 corpus row\(s\) longer than 2,000.*100% of the corpus"):
            splits, mixed = pretraining_corpus((("own", 1.0), ("reviews", 1.0)), labeled=lab, texts=corpus,
                                               eval_fraction=0.05, seed=seed, words=False)
        assert max(map(len, splits["validation"]["text"])) <= CORPUS_MAX_CHARS
        assert mixed.report["own"]["n_rows_cut"] == 1 and mixed.report["own"]["largest_row_share"] == 1.0


def test_notebook_05_mix_of_labelled_and_own_texts_cuts_the_giant_row_for_every_seed():
    from nbkit.data.labeled import build_labeled_data
    from nbkit.recipes.own_data import pretraining_texts  # public: notebook 05's in-memory mix

    texts = [f"评论{i}号，{'很好' if i % 2 else '很差'}" for i in range(40)]
    lab = build_labeled_data({"train": (texts, [i % 2 for i in range(40)])}, seed=0)
    corpus = datasets.Dataset.from_dict({"text": [_one_line_corpus(seed=5)]})
    for seed in range(4):
        with pytest.warns(UserWarning, match="longer than 2,000"):
            splits, report = pretraining_texts(lab, corpus, eval_fraction=0.05, seed=seed)
        assert max(map(len, splits["validation"]["text"])) <= CORPUS_MAX_CHARS
        assert report["own"]["n_rows_cut"] == 1 and "reviews" in report
    splits, report = pretraining_texts(lab)                            # no corpus: the labelled texts only
    assert "own" not in report and "reviews" in report
