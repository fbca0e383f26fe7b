"""What a corpus preparation dropped and how its inputs were read, for the manifest and for a person:
``dropped`` (exact counts per reason), ``by_file`` (per file that lost anything, with a ``note`` naming each
file-level cause and its fix: ``iconv`` for GBK or UTF-16, ``text_field`` for a missing column, .txt for a
.jsonl of plain text, ...) and ``problems`` (the first :data:`PER_FILE_REASON` locations per file and reason, at
most :data:`MAX_PROBLEMS`: one broken file cannot hide the others). A kept line costs one ``isascii`` test.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from nbkit.data.filecheck import merge_scans, utf8_verdict

PER_FILE_REASON = 5  # locations kept per (file, reason)
MAX_PROBLEMS = 1000  # locations kept in all
RULE = (f"the first {PER_FILE_REASON} locations per file and reason, at most {MAX_PROBLEMS} in all; "
        "dropped and by_file hold the exact counts")


def keep_location(problems: list, seen: Counter, path: str, line: int | None, reason: str, detail: str = "") -> None:
    """Append ``{"path", "line", "reason", "detail"}`` while ``(path, reason)`` and the list have room."""
    if seen[path, reason] < PER_FILE_REASON and len(problems) < MAX_PROBLEMS:
        seen[path, reason] += 1
        problems.append({"path": path, "line": line, "reason": reason, "detail": detail[:120]})


def locate_mask(problems: list, seen: Counter, path: str, reason: str, lines, mask, detail: str = "") -> None:
    """:func:`keep_location` for the first ``True`` entries of ``mask`` (a chunk's texts, ``lines`` 1-based);
    O(room), not O(chunk)."""
    room = PER_FILE_REASON - seen[path, reason]
    for i in np.flatnonzero(mask)[:max(0, room)].tolist():
        keep_location(problems, seen, path, int(lines[i]), reason, detail)


class DropLog:
    """Drops by file and reason with their first locations, fed in input order by the main process; ``marker``:
    the done-marker of the part to continue from (a resume; its :meth:`state` is saved there), or None."""

    def __init__(self, drop_reasons: tuple[str, ...], marker: dict | None = None):
        self.reasons = drop_reasons
        marker = marker or {}
        self.problems: list[dict] = list(marker.get("problems", []))
        self.files: dict[str, dict] = {p: {"n_lines": f["n_lines"], "dropped": Counter(f["dropped"]),
                                           "scan": f.get("scan"), "faults": dict(f.get("faults", {}))}
                                       for p, f in marker.get("drop_files", {}).items()}
        self.seen: Counter = Counter()
        for p in self.problems:
            self.seen[p["path"], p["reason"]] += 1
        self.last = next(reversed(self.files), None)  # the file being read (input order: only it can go on)

    def _file(self, path: str) -> dict:
        if path != self.last:  # the stream moved on: forget the previous file unless it lost something
            if self.last is not None and not self.files[self.last]["dropped"]:
                del self.files[self.last]
            self.last = path
        return self.files.setdefault(path, {"n_lines": 0, "dropped": Counter(), "scan": None, "faults": {}})

    def add(self, path: str, line: int | None, reason: str, detail: str = "", n: int = 1) -> None:
        """Count ``n`` drops of ``reason`` in ``path``, a fault of the whole file (or of its rest): its whole
        ``detail`` is kept for the file's note; locate the first at ``line`` (1-based) if there is room."""
        f = self._file(path)
        f["dropped"][reason] += n
        f["faults"].setdefault(reason, detail)
        keep_location(self.problems, self.seen, path, line, reason, detail)

    def add_chunk(self, path: str, counts: Counter, problems: list[dict], scan: dict | None) -> None:
        """One worker chunk of ``path``: its exact counts, its located lines (already capped), its line scan."""
        f = self._file(path)
        f["n_lines"] += int(counts.get("n_items", 0))
        for reason in self.reasons:
            if counts.get(reason):
                f["dropped"][reason] += int(counts[reason])
        for p in problems:
            keep_location(self.problems, self.seen, path, p["line"], p["reason"], p.get("detail", ""))
        if scan is not None and scan["non_ascii_lines"]:
            f["scan"] = scan if f["scan"] is None else merge_scans(f["scan"], scan)

    def locate(self, path: str, reason: str, lines: np.ndarray, mask: np.ndarray, detail: str = "") -> None:
        """Drops found in the main process (``duplicate``, ``excluded``) over a chunk's texts: the file's count and
        the first locations (``dropped`` is counted by the caller)."""
        n = int(mask.sum())
        if not n:
            return
        self._file(path)["dropped"][reason] += n
        locate_mask(self.problems, self.seen, path, reason, lines, mask, detail)

    def state(self) -> dict:
        """JSON-able state for a part's done-marker (``problems``, ``drop_files``)."""
        return {"problems": list(self.problems),
                "drop_files": {p: {"n_lines": f["n_lines"], "dropped": dict(f["dropped"]), "scan": f["scan"],
                                   **({"faults": f["faults"]} if f["faults"] else {})}
                               for p, f in self.files.items()}}

    def by_file(self, compression: dict[str, str | None]) -> dict[str, dict]:
        """The manifest's ``by_file`` in input order (``compression``: path -> "gz"/"zst"/None)."""
        out = {}
        for path, f in self.files.items():
            dropped = {r: int(f["dropped"][r]) for r in self.reasons if f["dropped"].get(r)}
            if dropped:
                first = {p["reason"]: p["detail"] for p in reversed(self.problems) if p["path"] == path}
                notes = [file_note(path, f["n_lines"], dropped.get("bad_utf8", 0), f["scan"], compression.get(path)),
                         *(fault_note(r, d) for r, d in f["faults"].items() if r != "bad_utf8"),
                         whole_file_note(f["n_lines"], dropped, first)]
                out[path] = {"n_lines": f["n_lines"], "dropped": dropped,
                             "note": "; and ".join(n for n in notes if n) or None}
        return out


def _converted(path: str, compression: str | None) -> str:
    stem, dot, ext = path.rpartition(".") if compression is None else path[:-len(compression) - 1].rpartition(".")
    base = f"{stem}.utf8.{ext}" if dot else f"{path}.utf8"
    return base if compression is None else f"{base}.{compression}"


def convert_command(path: str, conv: str, compression: str | None = None) -> str:
    """The shell command running ``conv`` (e.g. ``iconv -f UTF-16 -t UTF-8``) over ``path`` into a converted copy
    beside it (``a.txt`` -> ``a.utf8.txt``, ``a.txt.gz`` -> ``a.utf8.txt.gz``)."""
    return _pipe(path, _converted(path, compression), conv, compression)


#: The fix for a file-level drop whose reader's detail names none (``not_utf8_file``, ``no_text_field`` and
#: ``not_text`` details name theirs: the ``iconv`` command, ``text_field=``).
FAULT_FIXES = {
    "empty_file": "nothing to read: remove it from the inputs, or fill it",
    "binary_file": "not a text file: remove it from the inputs (or narrow the glob or folder)",
    "truncated_file": "the file ends early (a copy or download cut short); the texts before it are kept: copy, "
                      "download or compress it again",
    "unreadable_file": "the texts before the fault are kept: check that the file is the one meant and whole (open "
                       "it, e.g. with zcat or pyarrow), and replace it",
    "bad_json": "a JSON array read up to a fault; the elements before it are kept: fix the JSON there, or write "
                "the texts one JSON object per line as .jsonl",
}


def fault_note(reason: str, detail: str) -> str:
    """The note for a fault of a whole file (or of its rest): the reader's detail and its fix."""
    fix = FAULT_FIXES.get(reason)
    return f"{reason}: {detail}" + (f"; {fix}" if fix else "")


def whole_file_note(n_lines: int, dropped: dict[str, int], first: dict[str, str]) -> str | None:
    """The note for a JSON-lines file that lost *every* line to one cause: ``bad_json`` (plain text named .jsonl)
    or ``no_text_field`` (another key); ``first``: the first located detail per reason. None otherwise."""
    blank = dropped.get("blank", 0)   # a blank line of a JSON-lines file is "blank", whatever the file holds
    if dropped.get("bad_json") and dropped["bad_json"] + blank == n_lines:
        return (f"none of its {n_lines:,} lines is JSON (line 1: {first.get('bad_json', '?')}): if it is plain "
                "text, one text per line, rename it to .txt (a .jsonl or .json name is read as JSON lines; a file "
                "of another name is read by its content)")
    if dropped.get("no_text_field") and dropped["no_text_field"] + blank == n_lines:
        return (f"none of its {n_lines:,} lines has the text key ({first.get('no_text_field', '?')}): pass "
                "text_field=KEY naming the key that holds the text")
    return None


def _pipe(path: str, out: str, conv: str, compression: str | None) -> str:
    """The shell command running ``conv`` (e.g. ``iconv -f GBK -t UTF-8``) over ``path`` into ``out``."""
    if compression is None:
        return f"{conv} '{path}' > '{out}'"
    cat, pack = ("zcat", "gzip") if compression == "gz" else ("zstdcat", "zstd")
    return f"{cat} '{path}' | {conv} | {pack} > '{out}'"


def file_note(path: str, n_lines: int, bad_utf8: int, scan: dict | None, compression: str | None = None) -> str | None:
    """One line naming a file's encoding fault and its fix (the verdict of
    :func:`nbkit.data.filecheck.utf8_verdict`, the loaders' rule); None when every line was UTF-8."""
    if not bad_utf8:
        return None
    out = _converted(path, compression)
    if not scan or not scan["bad_lines"]:  # a JSON array: its reader stops at the first non-UTF-8 byte
        return ("not UTF-8 (a JSON array is dropped from its first 1 MB block holding a non-UTF-8 byte "
                f"on, {n_lines:,} element(s) read before it): find its encoding (file -bi '{path}'; GBK is common for "
                f"Chinese text) and convert it: {_pipe(path, out, 'iconv -f THAT_ENCODING -t UTF-8', compression)}")
    head = f"{bad_utf8:,} of {n_lines:,} lines not UTF-8"
    verdict = utf8_verdict(scan)
    if verdict == "gbk":
        return (f"{head}: it reads as GBK (common for Chinese text); convert it: "
                f"{_pipe(path, out, 'iconv -f GBK -t UTF-8', compression)}, and prepare the converted copy instead")
    if verdict == "broken_lines":
        return (f"{head} (the rest is UTF-8, so converting it from GBK would garble it); those lines are dropped; "
                f"to keep their good bytes: {_pipe(path, out, 'iconv -c -f UTF-8 -t UTF-8', compression)}")
    return (f"{head}, and it does not read as GBK either: find its encoding (file -bi '{path}') and convert it: "
            f"{_pipe(path, out, 'iconv -f THAT_ENCODING -t UTF-8', compression)}")


def input_lines(sources: list[dict], skipped: list[dict], max_lines: int = 10) -> list[str]:
    """Lines for a person: inputs read by name and by content (each, or per format past ``max_lines``), then
    what was left out and why."""
    sniffed = [x for x in sources if x.get("detected", "name") != "name"]
    out = [f"inputs: {len(sources):,} ({len(sources) - len(sniffed):,} by file name, {len(sniffed):,} by content)"]
    if len(sniffed) <= max_lines:
        out += [f"  {x['path']}: {x['kind']}, by {x['detected']}" for x in sniffed]
    else:
        kinds: dict[str, list[dict]] = {}
        for x in sniffed:
            kinds.setdefault(x["kind"], []).append(x)
        for kind, xs in kinds.items():
            out.append(f"  {len(xs):,} read as {kind} by content, e.g. {xs[0]['path']} ({xs[0]['detected']})")
    if skipped:
        out.append(f"left out: {len(skipped):,}")
        out += [f"  {x['path']}: {x['reason']}" for x in skipped[:max_lines]]
        if len(skipped) > max_lines:
            out.append(f"  ... and {len(skipped) - max_lines:,} more (manifest.json: inputs.skipped)")
    return out


def nothing_kept(n_files: int, dropped: dict[str, int], by_file: dict[str, dict], fix: str,
                 max_files: int = 5) -> str:
    """The message for a preparation that kept no text: the drops, each file's note (its file-level cause and
    fix, at most ``max_files``), then ``fix`` for the rest."""
    notes = [f"{path}: {f['note']}" for path, f in by_file.items() if f.get("note")]
    more = f"; and {len(notes) - max_files:,} more file(s) with a note" if len(notes) > max_files else ""
    return (f"no text of {n_files:,} input file(s) was kept (dropped: { {k: v for k, v in dropped.items() if v} })"
            + "".join(f"; {n}" for n in notes[:max_files]) + more + f"; {fix}")


def report_lines(manifest: dict, out_dir) -> list[str]:
    """What a preparation gives a person, as every entry point prints it (the CLI, the jobs, the recipes and
    notebooks through ``prepare_corpus(progress=True)``): one summary line, then :func:`summary_lines`."""
    dropped = ", ".join(f"{k} {v:,}" for k, v in manifest["dropped"].items() if v) or "none"
    splits = manifest["splits"]
    return [f"{out_dir}: {manifest['counts']['n_texts_kept']:,} texts, train {splits['train']['n_tokens']:,} tokens, "
            f"validation {splits['validation']['n_tokens']:,} tokens; dropped: {dropped}", *summary_lines(manifest)]


def summary_lines(manifest: dict, max_files: int = 20, per_reason: int = 3) -> list[str]:
    """The CLI's summary lines: per file that lost anything (at most ``max_files``), its counts, note and
    first ``per_reason`` lines per reason."""
    by_file = manifest.get("by_file", {})
    where: dict[tuple[str, str], list[str]] = {}
    for p in manifest.get("problems", []):
        where.setdefault((p["path"], p["reason"]), []).append("file" if p["line"] is None else str(p["line"]))
    inputs = manifest.get("inputs") or {}
    out = []
    if inputs.get("by_content") or inputs.get("n_skipped"):
        out += input_lines(manifest.get("sources", []), inputs.get("skipped", []), max_lines=5)
        if inputs.get("n_skipped", 0) > len(inputs.get("skipped", [])):
            out.append(f"  ({inputs['n_skipped']:,} left out in all)")
    for path, f in list(by_file.items())[:max_files]:
        parts = []
        for reason, n in f["dropped"].items():
            lines = where.get((path, reason), [])[:per_reason]
            at = f" (line {', '.join(lines)}{', ...' if n > len(lines) else ''})" if lines and lines != ["file"] else ""
            parts.append(f"{reason} {n:,}{at}")
        out.append(f"  {path}: {f['n_lines']:,} lines; dropped {'; '.join(parts)}")
        if f.get("note"):
            out.append(f"    {f['note']}")
    if len(by_file) > max_files:
        out.append(f"  ... and {len(by_file) - max_files:,} more file(s) with drops: see by_file in manifest.json")
    return out
