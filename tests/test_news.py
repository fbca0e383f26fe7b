"""The optional news corpus: restricted unpickling, validation, loading from the package layout."""
import os
import pickle

import pytest

from nbkit.data import news
from nbkit.errors import DataError


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def write_split(root, name, value):
    (root / name).write_bytes(pickle.dumps(value, protocol=2))


def fake_package(root):
    write_split(root, "train.pkl", (["标题一", "标题二", "重复"], ["正文一。", "正文二！", "正文"], [0, 2, 1]))
    write_split(root, "dev.pkl", (["开发"], ["开发集正文"], [1]))
    write_split(root, "test.pkl", (["测试", "重复"], ["测试集正文", "正文"], [2, 1]))
    return root


def test_restricted_unpickler_loads_plain_data():
    value = ([1, 2.5, "文本", None, True], {"k": (b"x", {3})})
    assert news.restricted_loads(pickle.dumps(value)) == value


def test_restricted_unpickler_refuses_code(tmp_path):
    data = pickle.dumps(Evil())
    with pytest.raises(DataError, match=r"refusing to unpickle (posix|os|nt)\.system.*carries code"):
        news.restricted_loads(data)
    write_split(tmp_path, "train.pkl", (["t"], ["c"], [Evil()]))
    with pytest.raises(DataError, match="refusing"):
        news.read_news_split("train", tmp_path)


def test_refuses_any_class_even_harmless_ones():
    import collections

    with pytest.raises(DataError, match="collections.OrderedDict"):
        news.restricted_loads(pickle.dumps(collections.OrderedDict(a=1)))


def test_corrupt_and_malformed_pickles_are_data_errors(tmp_path):
    with pytest.raises(DataError, match="not a readable pickle"):
        news.restricted_loads(b"\x80\x02(")
    write_split(tmp_path, "train.pkl", (["t"], ["c"]))
    with pytest.raises(DataError, match="three lists of equal length"):
        news.read_news_split("train", tmp_path)
    write_split(tmp_path, "train.pkl", (["t"], ["c"], ["0"]))
    with pytest.raises(DataError, match="labels int"):
        news.read_news_split("train", tmp_path)
    with pytest.raises(DataError, match="unknown news split"):
        news.read_news_split("dev", tmp_path)


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setattr(news.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(DataError, match=r"pip install -e \.\[news\].*Private"):
        news.news_dir()
    assert news.news_available() is False


def test_texts_and_sentiment_from_package_layout(tmp_path):
    root = fake_package(tmp_path)
    texts = news.load_news_texts(root=root)
    assert texts["text"] == ["标题一\n正文一。", "标题二\n正文二！", "重复\n正文"]  # training split only by default
    data = news.load_news_sentiment(root=root)
    assert data.label2id == {"positive": 0, "neutral": 1, "negative": 2}
    assert data.report["n_overlap_dropped"] == 1            # the test article that repeats a training one
    assert sorted(data.splits["test"]["text"]) == ["测试\n测试集正文"]


@pytest.mark.skipif(not news.news_available(), reason="optional: pip install -e .[news]")
def test_real_package_loads_restricted():
    titles, contents, labels = news.read_news_split("validation")
    assert len(titles) == len(contents) == len(labels) > 900 and set(labels) == {0, 1, 2}
