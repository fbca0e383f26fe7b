"""jieba word boundaries: a masked span covers a whole multi-character word; cached segmentation."""
import datasets
import torch

from nbkit.text import MLMCollator, add_words, make_blocks, train_wordpiece
from nbkit.text.words import cached_segment, segment

SENTENCE = "我爱北京天安门"


def test_segment_known_sentence():
    assert segment([SENTENCE, "内容充实 翻译流畅"]) == [["我", "爱", "北京", "天安门"], ["内容", "充实", "翻译", "流畅"]]


def test_masked_span_covers_whole_word(tmp_path):
    texts = [SENTENCE] * 40 + ["北京的天安门很大"] * 10
    tok = train_wordpiece(texts, vocab_size=60, out_dir=tmp_path / "tok", model_max_length=64)
    ds = add_words(datasets.Dataset.from_dict({"text": [SENTENCE] * 8}))
    blocks = make_blocks(ds, tok, block_size=16, words_column="words")
    collate = MLMCollator(tok, mlm_probability=0.3, seed=0)
    batch = collate([blocks[i] for i in range(len(blocks))])
    ids = tok.convert_tokens_to_ids(list("天安门"))
    hit = 0
    for row_ids, labels in zip(blocks["input_ids"], batch["labels"]):
        row_ids = torch.tensor(row_ids)
        for start in range(len(row_ids) - 2):
            if row_ids[start:start + 3].tolist() == ids:
                chosen = (labels[start:start + 3] != -100).tolist()
                assert chosen in ([True] * 3, [False] * 3), f"partial word masked: {chosen}"
                hit += chosen[0]
    assert hit > 0, "天安门 was never chosen: the test saw no whole-word target"


def test_cache_is_written_reused_and_survives_corruption(tmp_path, monkeypatch):
    texts = ["今天天气很好", SENTENCE]
    first = cached_segment(texts, tmp_path)
    files = list(tmp_path.glob("words-*.json"))
    assert len(files) == 1
    monkeypatch.setattr("nbkit.text.words.segment", lambda t: (_ for _ in ()).throw(AssertionError("recomputed")))
    assert cached_segment(texts, tmp_path) == first           # read from the cache, not recomputed
    files[0].write_text("{broken")
    monkeypatch.undo()
    assert cached_segment(texts, tmp_path) == first           # corrupt cache ignored and rewritten


def test_add_words_keeps_gold_boundaries():
    ds = datasets.Dataset.from_dict({"text": ["北京天安门", SENTENCE], "words": [["北京天", "安门"], []]})
    assert list(add_words(ds)["words"]) == [["北京天", "安门"], ["我", "爱", "北京", "天安门"]]


def test_importing_jieba_through_nbkit_is_quiet_when_its_source_compiles_fresh(tmp_path):
    # jieba's invalid regex escapes warn when its .py files are compiled (SyntaxWarning on Python
    # 3.12, DeprecationWarning on 3.11): with warnings as errors, a fresh compile fails unless
    # nbkit silences them. Copy jieba's code (no __pycache__) so the compile really happens.
    import shutil
    import subprocess
    import sys
    from importlib.util import find_spec
    from pathlib import Path

    src = Path(find_spec("jieba").origin).parent
    dst = tmp_path / "site" / "jieba"
    shutil.copytree(src / "finalseg", dst / "finalseg", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("__init__.py", "_compat.py"):
        shutil.copy(src / name, dst / name)
    root = Path(__file__).resolve().parents[1]
    env = {"PYTHONPATH": f"{tmp_path / 'site'}:{root}", "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"}
    code = "from nbkit.text.words import _jieba; j = _jieba(); print(j.__file__)"
    flags = ["-W", "error::SyntaxWarning", "-W", "error::DeprecationWarning"]
    out = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert str(dst) in out.stdout
    bare = subprocess.run([sys.executable, *flags, "-c", "import jieba"], capture_output=True, text=True, env=env,
                          timeout=60)
    assert bare.returncode != 0  # the check is real: jieba alone does not compile quietly
