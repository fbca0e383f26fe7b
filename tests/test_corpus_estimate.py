"""nbkit.corpus.estimate: a preparation's duration sized and timed before it starts (notebook 02's first
corpus cell). Its figures depend on the machine, so these tests check what it reads, its arithmetic and its
errors, not its speed."""
import re

import pytest

from nbkit.corpus import estimate as est
from nbkit.corpus.prepare import CorpusProgress
from nbkit.errors import ConfigError

LINE = "今天天气很好，我们去公园散步。ＧＤＰ增长７．８％，市场很活跃。" * 3


def _corpus(tmp_path, n_lines=20000):
    path = tmp_path / "corpus.txt"
    path.write_text("".join(f"{i} {LINE}\n" for i in range(n_lines)), encoding="utf-8")
    return path


def test_the_estimate_sizes_all_the_input_and_times_only_its_first_sample_mb(tmp_path, monkeypatch):
    path = _corpus(tmp_path)                        # about 4 MB
    total = path.stat().st_size
    seen = []
    from nbkit.corpus import worker

    encode = worker.encode_chunk
    monkeypatch.setattr(worker, "encode_chunk", lambda chunk, s, p: seen.append(sum(map(len, chunk.items)))
                        or encode(chunk, s, p))
    e = est.estimate_preparation(str(path), sample_mb=0.5, num_workers=1, chunk_items=200)
    assert e.input_mb == pytest.approx(total / 1e6, abs=1e-3)
    read = sum(seen) + 200 * len(seen)
    assert 0.5e6 <= read < 0.5e6 + 200 * (len(LINE.encode()) + 8)   # the sample, and at most the chunk crossing it
    assert e.measured_mb == pytest.approx(read / 1e6, rel=0.02)
    assert e.seconds == pytest.approx(e.input_mb / e.mb_per_s, rel=0.01, abs=0.06)   # rounded to 0.1 s
    assert e.num_workers == 1 and e.trains_tokenizer
    assert repr(e) == (f"PrepEstimate(input_mb={total / 1e6:.1f}, mb_per_s={e.mb_per_s:.2f}, seconds={e.seconds:.0f}, "
                       f"measured_mb={read / 1e6:.1f}, num_workers=1)")       # sizes from the file and the spy
    assert e.text().startswith(f"preparing {total / 1e6:,.1f} MB of input: about ")


def test_more_workers_scale_one_cores_rate_by_the_measured_parallel_share(tmp_path, monkeypatch):
    path = _corpus(tmp_path, 3000)                  # about 0.5 MB: under the 2 MB sample, read whole
    monkeypatch.setattr("nbkit.corpus.prepare.default_workers", lambda: 2)
    from nbkit.corpus import worker

    chunks, encode = [], worker.encode_chunk
    monkeypatch.setattr(worker, "encode_chunk", lambda chunk, s, p: chunks.append(1) or encode(chunk, s, p))
    clock = iter(range(0, 10**6, 2))                # each encode_chunk "takes" 2 s: the rates are exact
    monkeypatch.setattr(est.time, "perf_counter", lambda: next(clock))
    one = est.estimate_preparation(str(path), num_workers=1)
    per_core = path.stat().st_size / 1e6 / (2 * len(chunks))   # MB read / seconds timed, computed here
    two = est.estimate_preparation(str(path), num_workers=2)
    four = est.estimate_preparation(str(path), num_workers=4)    # more workers than cores: the cores count
    assert len(chunks) == 3 * 3                                  # 3,000 lines in chunks of 1,000, in each estimate
    assert one.mb_per_s == round(per_core, 3) and one.measured_mb == round(path.stat().st_size / 1e6, 3)
    assert two.mb_per_s == round(per_core * 2 * est.PARALLEL_SHARE, 3) == four.mb_per_s
    assert two.seconds == round(path.stat().st_size / 1e6 / (per_core * 2 * est.PARALLEL_SHARE), 1)
    assert four.num_workers == 4


def test_a_missing_input_is_a_config_error_naming_it(tmp_path):
    with pytest.raises(ConfigError, match=re.escape(str(tmp_path / "nope.txt")) + ".*matches no corpus file"):
        est.estimate_preparation(str(tmp_path / "nope.txt"))


def test_print_estimate_says_when_there_is_nothing_to_prepare(tmp_path, capsys):
    assert est.print_estimate(None) is None
    assert "nothing to prepare" in capsys.readouterr().out
    path = _corpus(tmp_path, 2000)
    got = est.print_estimate(str(path), store=tmp_path / "not-a-store-yet")
    assert isinstance(got, est.PrepEstimate)
    assert capsys.readouterr().out.strip() == got.text()


class _EarlyProgress:
    """CorpusProgress with the estimate due after the first chunk (0 s, 0 MB measured): the line's position in
    the output is then what is tested, on a corpus small enough for a unit test."""

    def __new__(cls, total, **kw):
        return CorpusProgress(total, tty=False, estimate_after_s=0.0, estimate_after_mb=0.0, **kw)


@pytest.mark.parametrize("kind", ["file", "tree", "dataset"])
def test_the_eta_line_comes_before_the_long_part_for_every_input_kind(tmp_path, monkeypatch, capsys, kind):
    import json

    from nbkit.corpus import prepare as prep

    texts = [f"{i} {LINE}" for i in range(3000)]
    if kind == "file":
        path = tmp_path / "corpus.txt"
        path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        inputs = str(path)
    elif kind == "tree":                             # wiki_zh's layout: extension-less JSON lines in folders
        for k in range(6):
            f = tmp_path / "wiki" / f"A{'AB'[k // 3]}" / f"wiki_{k % 3:02d}"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text("".join(json.dumps({"id": str(j), "url": f"https://zh.wikipedia.org/wiki?curid={j}",
                                             "title": "t", "text": texts[j]}, ensure_ascii=False) + "\n"
                                 for j in range(k * 500, (k + 1) * 500)), encoding="utf-8")
        inputs = str(tmp_path / "wiki")
    else:
        datasets = pytest.importorskip("datasets")
        inputs = datasets.Dataset.from_dict({"text": texts})
    monkeypatch.setattr(prep, "CorpusProgress", _EarlyProgress)
    prep.prepare_corpus(inputs, tmp_path / "store", num_workers=1, chunk_items=100, sample_mb=0.2, vocab_size=300,
                        segmenter="none")
    out = capsys.readouterr().out.splitlines()
    eta = [i for i, line in enumerate(out) if line.startswith("[prepare-corpus] tokenize: about ")]
    done = [i for i, line in enumerate(out) if line.startswith("[prepare-corpus] tokenize done in ")]
    assert len(eta) == 1 and len(done) == 1 and eta[0] < done[0], out
    m = re.search(r"at ([\d.]+) MB/s for ([\d,.]+) MB of input \(measured on the first ([\d,.]+) MB\)", out[eta[0]])
    assert m, out[eta[0]]
    assert float(m.group(3)) < float(m.group(2).replace(",", "")) / 2   # before the long part: under half read
