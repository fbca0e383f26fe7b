"""What prepare_corpus dropped, per file and reason: exact counts, the first locations of every reason, the fix.

Fresh inputs: a GBK file among UTF-8 ones, a mostly-UTF-8 file with broken lines, a corpus with blank,
missing, too-short, duplicate, non-CJK and excluded lines; the manifest, the CLI summary, resume and
2 workers agree.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from nbkit.corpus.report import MAX_PROBLEMS, PER_FILE_REASON, file_note
from nbkit.data.filecheck import non_utf8_message, scan_lines
from tests.corpus_helpers import prepare, review_lines, small_tokenizer, write_txt


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return small_tokenizer(tmp_path_factory.mktemp("tok"))


def run(inputs, out, tok_dir, **kw):
    return prepare(inputs, out, tok_dir, heldout_share=0.0, **kw)


def gbk_lines(n: int, start: int = 0) -> list[bytes]:
    """``n`` review lines that GBK can encode, GBK-encoded."""
    out = []
    for t in review_lines(3 * n, start, which="pos"):
        try:
            out.append(t.encode("gbk"))
        except UnicodeEncodeError:
            continue
        if len(out) == n:
            return out
    raise AssertionError("not enough GBK-encodable lines")


def located(m, name: str, reason: str) -> list[int | None]:
    return [p["line"] for p in m["problems"] if Path(p["path"]).name == name and p["reason"] == reason]


def folder_with_gbk(root: Path) -> Path:
    d = root / "in"
    d.mkdir()
    write_txt(d / "a_good.txt", review_lines(40))
    gbk = gbk_lines(300)
    gbk[10:10] = [b"plain ascii line one", b"plain ascii line two"]  # lines 11-12: ASCII, valid UTF-8, kept
    (d / "b_gbk.txt").write_bytes(b"\n".join(gbk) + b"\n")
    good = [t.encode() for t in review_lines(30, 40)]
    good[6] = good[6][:-1] + b"\xff"                 # line 7: one broken byte in a UTF-8 file
    (d / "c_mostly_utf8.txt").write_bytes(b"\n".join(good) + b"\n")
    (d / "d_gbk.txt.gz").write_bytes(gzip.compress(b"\n".join(gbk_lines(20, 900)) + b"\n"))
    return d


def test_a_gbk_file_gets_one_line_with_the_fix_and_does_not_flood_the_problems(tmp_path, tok_dir, capsys):
    from nbkit.cli.main import main

    d = folder_with_gbk(tmp_path)
    out = tmp_path / "out"
    assert main(["prepare-corpus", str(d), "--out", str(out), "--tokenizer", str(tok_dir),
                 "--num-workers", "1", "--heldout-share", "0"]) == 0
    m = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert m["dropped"]["bad_utf8"] == 300 + 1 + 20  # exact, whatever the cap
    gbk, mixed, gz = (str(d / n) for n in ("b_gbk.txt", "c_mostly_utf8.txt", "d_gbk.txt.gz"))
    f = m["by_file"][gbk]
    assert (f["n_lines"], f["dropped"]) == (302, {"bad_utf8": 300})
    assert f["note"].startswith("300 of 302 lines not UTF-8: it reads as GBK")
    assert f"iconv -f GBK -t UTF-8 '{gbk}' > '{d / 'b_gbk.utf8.txt'}'" in f["note"]
    assert m["by_file"][gz]["note"].count("zcat") == 1 and "| gzip >" in m["by_file"][gz]["note"]
    # the mostly-UTF-8 file: not told to convert from GBK; its bad line located
    assert "reads as GBK" not in m["by_file"][mixed]["note"] and "garble" in m["by_file"][mixed]["note"]
    assert located(m, "c_mostly_utf8.txt", "bad_utf8") == [7]
    # one file cannot take the list: the first few per file and reason
    assert located(m, "b_gbk.txt", "bad_utf8") == [1, 2, 3, 4, 5, 6][:PER_FILE_REASON]
    assert str(d / "a_good.txt") not in m["by_file"]
    printed = capsys.readouterr().out
    assert f"  {gbk}: 302 lines; dropped bad_utf8 300 (line 1, 2, 3, ...)" in printed
    assert "300 of 302 lines not UTF-8: it reads as GBK" in printed
    assert f"{mixed}: 30 lines; dropped bad_utf8 1 (line 7)" in printed


def test_a_gbk_json_array_is_not_called_not_gbk(tmp_path, tok_dir):
    good = review_lines(20)
    (tmp_path / "a.json").write_bytes(("[" + ",".join(json.dumps({"text": t}, ensure_ascii=False) for t in good[:5])
                                       + ",").encode() + b'{"text": "' + gbk_lines(1)[0] + b'"}]')
    write_txt(tmp_path / "b.txt", good[5:])
    m = run([tmp_path / "a.json", tmp_path / "b.txt"], tmp_path / "out", tok_dir)
    note = m["by_file"][str(tmp_path / "a.json")]["note"]
    assert note.startswith("not UTF-8 (a JSON array") and "GBK is common" in note and "reads as GBK" not in note
    assert len(located(m, "a.json", "bad_utf8")) == 1


def test_file_note_and_the_loaders_message_share_one_verdict(tmp_path):
    gbk = tmp_path / "g.txt"
    gbk.write_bytes(b"\n".join(gbk_lines(50)) + b"\n")
    mixed = tmp_path / "m.txt"
    lines = [t.encode() for t in review_lines(50)]
    lines[3] = b"\xb0\xa1" + lines[3]
    mixed.write_bytes(b"\n".join(lines) + b"\n")
    for path, gbk_said in ((gbk, True), (mixed, False)):
        scan = scan_lines(path)
        note = file_note(str(path), scan["lines"], scan["bad_lines"], scan)
        assert ("reads as GBK" in note) is gbk_said
        assert ("reads as GBK" in non_utf8_message(path)) is gbk_said


def filter_corpus(d: Path) -> tuple[Path, Path]:
    """A .txt with blank, short, duplicate and non-CJK lines at known places, and a .jsonl with null texts."""
    good = review_lines(40)
    lines = list(good[:30])
    for at in (2, 5, 8, 11, 14, 17, 20):          # 0-based -> blank lines 3, 7, 11, ... once inserted in order
        lines.insert(at, "   " if at % 2 else "\u200b\u2060")
    lines.insert(9, "好的")                          # too short
    lines.insert(15, "ok")                          # too short
    lines += [good[0], good[1], good[0]]            # duplicates of lines already read
    lines += ["This line is all English and has no Chinese at all."]  # non_cjk at min_cjk_share 0.3
    lines += [good[35]]                             # excluded
    txt = write_txt(d / "f.txt", lines)
    rows = [{"text": good[31]}, {"text": None}, {"text": good[32]}, {"text": None}]
    jl = d / "g.jsonl"
    jl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return txt, jl


def expected_lines(txt: Path) -> dict[str, list[int]]:
    text = txt.read_text(encoding="utf-8").split("\n")[:-1]
    want: dict[str, list[int]] = {"blank": [], "too_short": [], "duplicate": [], "non_cjk": []}
    seen = set()
    for i, t in enumerate(text, start=1):
        if not t.strip() or set(t) <= {"\u200b", "\u2060"}:
            want["blank"].append(i)
        elif len(t.replace(" ", "")) < 5:
            want["too_short"].append(i)
        elif t.isascii():
            want["non_cjk"].append(i)
        elif t in seen:
            want["duplicate"].append(i)
        seen.add(t)
    return want


@pytest.mark.parametrize("num_workers", [1, 2])
def test_every_reason_is_located_with_exact_counts(tmp_path, tok_dir, num_workers):
    txt, jl = filter_corpus(tmp_path)
    excl = review_lines(40)[35]
    m = run([txt, jl], tmp_path / "out", tok_dir, min_cjk_share=0.3, exclude_texts=[excl], num_workers=num_workers,
            chunk_items=8)
    want = expected_lines(txt)
    assert m["dropped"]["blank"] == len(want["blank"]) == 7
    for reason, lines in want.items():
        assert m["by_file"][str(txt)]["dropped"][reason] == len(lines) == m["dropped"][reason], reason
        assert located(m, "f.txt", reason) == lines[:PER_FILE_REASON], reason
    assert located(m, "f.txt", "excluded") == [len(txt.read_text(encoding="utf-8").split("\n")) - 1]
    assert located(m, "g.jsonl", "missing") == [2, 4]
    assert m["by_file"][str(jl)] == {"n_lines": 4, "dropped": {"missing": 2}, "note": None}
    assert "first 5 locations per file and reason" in m["problems_rule"]


def test_locations_are_bounded_on_a_corpus_with_many_bad_files(tmp_path, tok_dir):
    d = tmp_path / "in"
    d.mkdir()
    n_files = MAX_PROBLEMS // (2 * PER_FILE_REASON) + 3
    good = review_lines(n_files)
    for k in range(n_files):  # each: 12 blank and 12 too-short lines beside a good one
        write_txt(d / f"x{k:04d}.txt", [good[k]] + [""] * 12 + ["短"] * 12)
    m = run(d, tmp_path / "out", tok_dir, chunk_items=500)
    assert (m["dropped"]["blank"], m["dropped"]["too_short"]) == (12 * n_files, 12 * n_files)
    assert len(m["problems"]) == MAX_PROBLEMS
    assert len(m["by_file"]) == n_files and all(f["dropped"] == {"blank": 12, "too_short": 12}
                                                for f in m["by_file"].values())


def test_a_resumed_run_reports_what_an_uninterrupted_one_does(tmp_path, tok_dir):
    txt, jl = filter_corpus(tmp_path)
    gb = tmp_path / "h_gbk.txt"
    gb.write_bytes(b"\n".join(gbk_lines(40)) + b"\n")
    kw = dict(chunk_items=4, shard_tokens=150, min_cjk_share=0.3)
    ref = run([txt, gb, jl], tmp_path / "ref", tok_dir, **kw)
    out = tmp_path / "out"
    run([txt, gb, jl], out, tok_dir, **kw)
    parts = sorted((out / "shards").glob("part-*.done.json"))
    assert len(parts) > 3
    (out / "manifest.json").unlink()
    for marker in parts[2:]:
        marker.unlink()
    m = run([txt, gb, jl], out, tok_dir, **kw)
    assert m["timing"]["resumed_parts"] == 2
    assert (m["problems"], m["by_file"], m["dropped"]) == (ref["problems"], ref["by_file"], ref["dropped"])
    assert "reads as GBK" in m["by_file"][str(gb)]["note"]


def test_a_json_error_names_the_column_once(tmp_path):
    from nbkit.data.userfiles import load_text_file
    from nbkit.errors import DataError

    p = tmp_path / "t.jsonl"
    p.write_text('{"text": "好的很好"}\n{"text": "有\t制表符的文本"}\n', encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_text_file(p, errors="raise")
    assert "Invalid control character at column 12" in str(err.value)
    assert "at at" not in str(err.value)


# ----- what every entry point says, and the fix for each file-level cause ---------------------------------
def mixed_inputs(d: Path) -> dict[str, Path]:
    """A good .txt beside a GBK file, a UTF-16 file, parquet files without the text column or with ints in it,
    and a .jsonl that is plain text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = review_lines(60)
    files = {"ok": write_txt(d / "ok.txt", lines[:40]), "gbk": d / "gbk.txt", "u16": d / "u16.txt",
             "nocol": d / "nocol.parquet", "intcol": d / "intcol.parquet", "plain": d / "plain.jsonl"}
    files["gbk"].write_bytes(b"\n".join(gbk_lines(30)) + b"\n")
    files["u16"].write_bytes("".join(t + "\n" for t in lines[40:50]).encode("utf-16"))
    pq.write_table(pa.table({"content": lines[50:53]}), files["nocol"])
    pq.write_table(pa.table({"text": [1, 2, 3]}), files["intcol"])
    write_txt(files["plain"], lines[53:60])
    return files


def test_prepare_corpus_prints_the_per_file_report_for_every_entry_point(tmp_path, tok_dir, capsys):
    """The jobs, the recipes and the notebooks prepare through corpus_store/prepare_corpus(progress=True): the
    per-file lines and the iconv fixes the CLI prints, not only counts (a UTF-16 file named at all)."""
    from nbkit.corpus.store import corpus_store

    f = mixed_inputs(tmp_path)
    inputs = [str(f["ok"]), str(f["gbk"]), str(f["u16"])]
    corpus_store(inputs, tmp_path / "store", tokenizer=str(tok_dir), num_workers=1)
    printed = capsys.readouterr().out
    assert f"[prepare-corpus] {tmp_path / 'store'}: 40 texts, train" in printed
    assert f"[prepare-corpus]   {f['gbk']}: 30 lines; dropped bad_utf8 30 (line 1, 2, 3, ...)" in printed
    assert f"iconv -f GBK -t UTF-8 '{f['gbk']}' > '{tmp_path / 'gbk.utf8.txt'}'" in printed
    assert f"[prepare-corpus]   {f['u16']}: 0 lines; dropped not_utf8_file 1" in printed
    assert f"iconv -f UTF-16 -t UTF-8 '{f['u16']}' > '{tmp_path / 'u16.utf8.txt'}'" in printed
    corpus_store(inputs, tmp_path / "store", tokenizer=str(tok_dir), num_workers=1)   # reused: said again
    assert f"{f['u16']}: 0 lines; dropped not_utf8_file 1" in capsys.readouterr().out


def test_a_file_dropped_whole_gets_a_note_with_its_fix_printed_whole(tmp_path, tok_dir, capsys):
    from nbkit.cli.main import main

    f = mixed_inputs(tmp_path)
    out = tmp_path / "out"
    assert main(["prepare-corpus", *(str(f[k]) for k in ("ok", "u16", "nocol", "intcol", "plain")), "--out",
                 str(out), "--tokenizer", str(tok_dir), "--num-workers", "1", "--heldout-share", "0"]) == 0
    by_file = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["by_file"]
    notes = {k: by_file[str(f[k])]["note"] for k in ("u16", "nocol", "intcol", "plain")}
    assert notes["u16"].endswith(f"iconv -f UTF-16 -t UTF-8 '{f['u16']}' > '{tmp_path / 'u16.utf8.txt'}', and "
                                 "prepare the converted copy instead")
    assert "no column 'text' (columns: ['content'])" in notes["nocol"] and "text_field=NAME" in notes["nocol"]
    assert "int64" in notes["intcol"] and "cast it to string" in notes["intcol"]
    assert notes["plain"].startswith("none of its 7 lines is JSON") and "rename it to .txt" in notes["plain"]
    printed = capsys.readouterr().out
    assert all(f"    {n}" in printed for n in notes.values())   # whole, under its file's line


def test_a_jsonl_file_with_some_bad_lines_gets_no_plain_text_hint(tmp_path, tok_dir):
    lines = review_lines(20)
    jl = tmp_path / "a.jsonl"
    jl.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in lines[:15]) + "not json\n",
                  encoding="utf-8")
    m = run(jl, tmp_path / "out", tok_dir)
    assert m["by_file"][str(jl)] == {"n_lines": 16, "dropped": {"bad_json": 1}, "note": None}


@pytest.mark.parametrize("given", [False, True])
def test_nothing_kept_names_each_files_cause_and_fix(tmp_path, tok_dir, given):
    """A corpus of GBK files alone: the error names GBK and the iconv command, with a trained tokenizer (the
    sample pass) and with a given one (the main pass)."""
    from nbkit.corpus import prepare_corpus
    from nbkit.errors import DataError

    gbk = tmp_path / "gbk.txt"
    gbk.write_bytes(b"\n".join(gbk_lines(30)) + b"\n")
    u16 = tmp_path / "u16.txt"
    u16.write_bytes("".join(t + "\n" for t in review_lines(5)).encode("utf-16"))
    kw = {"tokenizer": str(tok_dir)} if given else {"vocab_size": 300}
    with pytest.raises(DataError) as err:
        prepare_corpus([gbk, u16], tmp_path / "out", num_workers=1, progress=False, **kw)
    msg = str(err.value)
    assert "no text of 2 input file(s) was kept" in msg and "'bad_utf8': 30" in msg
    assert f"{gbk}: 30 of 30 lines not UTF-8: it reads as GBK" in msg and "iconv -f GBK -t UTF-8" in msg
    assert f"{u16}: not_utf8_file: UTF-16" in msg and "iconv -f UTF-16 -t UTF-8" in msg
