"""``prepare_corpus``: inputs -> the resumable token store ``nbkit-corpus/1`` (docs/corpus.md), in the main
process: the store's lock, the folder checked, the tokenizer, chunks through the workers, exact dedup and the
held-out split by hash, parts written, ``manifest.json`` last. Memory: ``2 * num_workers + 1`` chunks of
<= 4 MB in flight and the dedup set (8 bytes per kept text, the only state growing with the corpus).
"""
from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import shutil
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from filelock import Timeout

from nbkit import jsonio
from nbkit.atomic import fsync_dir
from nbkit.corpus import manifest as mf
from nbkit.corpus import segment, shards
from nbkit.corpus.pool import Workers
from nbkit.corpus.readers import FileProblem, iter_chunks
from nbkit.corpus.report import RULE, DropLog, input_lines, nothing_kept, report_lines
from nbkit.corpus.sources import MAX_SKIPPED, fingerprint, resolve_inputs
from nbkit.corpus.vocab import ensure_tokenizer, heldout_cut, tokenizer_identity
from nbkit.corpus.worker import doc_key
from nbkit.data.textrule import check_text, split_long
from nbkit.errors import ConfigError, DataError, NbkitError
from nbkit.folder_lock import FolderLock
from nbkit.units import fmt_duration

DROPPED = ("blank", "missing", "not_text", "markup_only", "excluded", "duplicate", "too_short", "non_cjk", "bad_utf8",
           "nul_byte", "bad_json", "no_text_field", "no_tokens", "empty_file", "binary_file", "not_utf8_file",
           "truncated_file", "unreadable_file")
REPAIRED = ("repaired_surrogates", "long_texts_cut", "long_text_pieces", "paragraph_lists_joined", "markup_stripped")
COUNTS = ("n_files", "n_items", "n_texts_read", "n_texts_kept", "n_chars", "n_tokens")
_OURS = ("manifest.json", "prepare.json", "tokenizer", "tokenizer_info.json", "shards", ".tokenizer.tmp", "tmp")

REPORT_EVERY_S = 300.0   # a waiting preparation says it still waits this often


class StoreLock(FolderLock):
    """The store folder's waiting lock (``.nbkit-prepare.lock``): a second preparation names the holder on stderr
    (again every 5 min), waits, then reuses or continues the store; two writers would delete each other's parts.

    Raises (``acquire``):
        ConfigError: the holder is this process (it would wait for itself).
    """

    LOCK_NAME, HOLDER_NAME = ".nbkit-prepare.lock", ".nbkit-prepare.json"   # beside the store's files, never wiped

    def busy(self, lock) -> None:
        if self.holder_is_me():
            raise ConfigError(f"{self.folder} is being prepared by this process already ({self.holder()}); one "
                              "preparation per store at a time: wait for that call to finish, or pass another out_dir")
        t0 = time.monotonic()
        print(f"[prepare-corpus] {self.folder} is being prepared by another process: {self.holder()}; waiting for "
              "that preparation to finish (its lock is released when it exits, even if killed), then this one "
              "reuses the finished store, or continues it", file=sys.stderr, flush=True)
        while True:
            try:
                lock.acquire(timeout=REPORT_EVERY_S)
                return
            except Timeout:
                print(f"[prepare-corpus] still waiting for the preparation of {self.folder} by {self.holder()} "
                      f"({(time.monotonic() - t0) / 60:.0f} min)", file=sys.stderr, flush=True)


class HashSet:
    """The uint64 text hashes seen: a sorted array (8 bytes each) plus a set of the newest, merged every
    ``merge_every`` additions. Two texts share a hash with probability about n²/2⁶⁵ (under 1e-6 for 7 M)."""

    def __init__(self, initial: np.ndarray | None = None, merge_every: int = 1 << 18):
        self.sorted = np.unique(initial.astype(np.uint64)) if initial is not None else np.zeros(0, np.uint64)
        self.recent: set[int] = set()
        self.merge_every = merge_every

    def __len__(self) -> int:
        return len(self.sorted) + len(self.recent)

    def filter_new(self, hashes: np.ndarray) -> np.ndarray:
        """Boolean mask (n,) of the hashes not seen before, in order (a repeat within ``hashes`` too)."""
        if len(self.sorted):
            idx = np.minimum(np.searchsorted(self.sorted, hashes), len(self.sorted) - 1)
            seen = self.sorted[idx] == hashes
        else:
            seen = np.zeros(len(hashes), bool)
        keep = np.zeros(len(hashes), bool)
        for i, h in enumerate(hashes.tolist()):
            if not seen[i] and h not in self.recent:
                self.recent.add(h)
                keep[i] = True
        if len(self.recent) >= self.merge_every:
            self.merge()
        return keep

    def merge(self) -> None:
        """Fold the recent hashes into the sorted array."""
        if self.recent:
            new = np.fromiter(self.recent, dtype=np.uint64, count=len(self.recent))
            self.sorted = np.union1d(self.sorted, new)
            self.recent.clear()


def exclusion_hashes(texts, max_chars: int) -> np.ndarray:
    """Sorted unique uint64 hashes of ``texts`` (the ``exclude_texts`` setting), cut, checked and keyed
    (:func:`~nbkit.corpus.worker.doc_key`) as corpus texts are, so an equal corpus text is dropped.

    Raises:
        ConfigError: ``texts`` is one string (pass a list).
    """
    if isinstance(texts, (str, bytes)):
        raise ConfigError("exclude_texts is one string; pass a list of texts (e.g. [text]), one per item")
    out = []
    for value in texts:
        pieces = split_long(value, max_chars) if isinstance(value, str) and len(value) > max_chars else [value]
        for piece in pieces:
            text = check_text(piece)
            if text is not None:
                out.append(doc_key(text))
    return np.unique(np.asarray(out, dtype=np.uint64))


def exclusion_identity(hashes: np.ndarray) -> dict | None:
    """``{"n_hashes", "sha256"}`` of the sorted hashes (little-endian uint64) for the manifest; None for none."""
    if not len(hashes):
        return None
    digest = hashlib.sha256(np.asarray(hashes, dtype="<u8").tobytes()).hexdigest()
    return {"n_hashes": int(len(hashes)), "sha256": digest}


class CorpusProgress:
    """Progress in MB of input with MB/s, texts/s and an ETA: a tqdm bar on a terminal (``tty``, default
    ``stream.isatty()``), else a plain line every ``every_s`` seconds and one at the end (logs, notebooks: no
    carriage return). Once per stage, as soon as ``estimate_after_s`` seconds and ``estimate_after_mb`` MB of
    input are measured (the workers started, the first chunks done), one line estimates the whole stage before
    the long part. ``total_bytes``: input bytes in all (compressed files: their compressed bytes).
    """

    def __init__(self, total_bytes: int, stream: TextIO | None = None, tty: bool | None = None,
                 every_s: float = 10.0, enabled: bool = True, estimate_after_s: float = 5.0,
                 estimate_after_mb: float = 4.0):
        self.total = max(1, total_bytes)
        self.stream = stream or sys.stdout
        self.enabled = enabled
        self.tty = self.stream.isatty() if tty is None else tty
        self.every_s = every_s
        self._bar = None
        self.estimate_after_s, self.estimate_after_mb = estimate_after_s, estimate_after_mb

    def begin(self, stage: str, start_bytes: int = 0, estimate: bool = True) -> None:
        """Restart the clock for ``stage``; ``start_bytes`` were done before (a resume); ``estimate=False``: no
        estimate line (a stage that stops before the end of the input, as the tokenizer's sample)."""
        self.stage, self.start_bytes = stage, start_bytes
        self.bytes, self.texts = start_bytes, 0
        self.t0 = self.t_last = time.monotonic()
        self.estimated: str | None = None if estimate else ""   # the stage's estimate line, once printed
        if not self.enabled:
            return
        if self.tty:
            from tqdm.std import tqdm

            self.close()
            self._bar = tqdm(total=self.total / 1e6, initial=start_bytes / 1e6, desc=stage, unit="MB",
                             file=self.stream, leave=False, dynamic_ncols=True, mininterval=0.5,
                             bar_format="{desc} |{bar:20}| {n:.1f}/{total:.1f} MB {elapsed}<{remaining}{postfix}")
        else:
            self._line(f"{stage}: {self.total / 1e6:,.1f} MB of input in all" +
                       (f", {start_bytes / 1e6:,.1f} MB already done" if start_bytes else ""))

    def rates(self) -> tuple[float, float, float | None]:
        """``(MB/s, texts/s, ETA in s or None)`` since :meth:`begin`."""
        dt = max(1e-9, time.monotonic() - self.t0)
        mbps = (self.bytes - self.start_bytes) / 1e6 / dt
        eta = (self.total - self.bytes) / 1e6 / mbps if mbps > 0 else None
        return mbps, self.texts / dt, eta

    def estimate(self) -> str | None:
        """The stage's estimate (time left, MB/s, the input, what was measured), or None while less than
        ``estimate_after_s`` s and ``estimate_after_mb`` MB have been measured, or once the input is done."""
        measured = (self.bytes - self.start_bytes) / 1e6
        if (time.monotonic() - self.t0 < self.estimate_after_s or measured < self.estimate_after_mb
                or self.bytes >= self.total):
            return None
        mbps, _, eta = self.rates()
        left = self.total - self.bytes
        of = f" ({left / 1e6:,.1f} MB left)" if self.start_bytes else ""
        return (f"about {fmt_duration(eta)} at {mbps:.2f} MB/s for {self.total / 1e6:,.1f} MB of input{of} "
                f"(measured on the first {measured:,.1f} MB)")

    def update(self, bytes_done: int, texts: int) -> None:
        """``bytes_done``: the absolute input position in bytes; ``texts``: kept since the last call."""
        self.texts += texts
        delta, self.bytes = bytes_done - self.bytes, max(self.bytes, bytes_done)
        if not self.enabled:
            return
        if self.estimated is None and (line := self.estimate()) is not None:
            self.estimated = line
            if self._bar is not None:
                self._bar.write(f"[prepare-corpus] {self.stage}: {line}", file=self.stream)
            else:
                self._line(f"{self.stage}: {line}")
        if self._bar is not None:
            mbps, tps, _ = self.rates()
            self._bar.set_postfix_str(f"{mbps:.2f} MB/s, {tps:,.0f} texts/s", refresh=False)
            self._bar.update(max(0, delta) / 1e6)
        elif time.monotonic() - self.t_last >= self.every_s:
            self.t_last = time.monotonic()
            mbps, tps, eta = self.rates()
            left = f", ETA {fmt_duration(eta)}" if eta is not None else ""
            self._line(f"{self.stage}: {100 * self.bytes / self.total:.1f}% ({self.bytes / 1e6:,.1f} MB), "
                       f"{mbps:.2f} MB/s, {tps:,.0f} texts/s{left}")

    def finish(self, what: str) -> None:
        """The closing line: ``what``, the mean rates and the wall time."""
        self.close()
        if self.enabled:
            mbps, tps, _ = self.rates()
            wall = fmt_duration(time.monotonic() - self.t0)
            self._line(f"{self.stage} done in {wall}: {what} ({mbps:.2f} MB/s, {tps:,.0f} texts/s)")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _line(self, text: str) -> None:
        print(f"[prepare-corpus] {text}", file=self.stream, flush=True)


def default_workers() -> int:
    """The usable cores (``len(os.sched_getaffinity(0))``; ``os.cpu_count()`` where that is missing)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def _wipe(out: Path) -> None:
    for name in _OURS:
        p = out / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def _check_out_dir(out: Path, ident: dict, overwrite: bool) -> tuple[dict | None, dict]:
    """``(manifest, identity with fingerprints)``: the manifest to reuse, or None when ``out`` is ready to
    prepare; a reused store's touched inputs (same content, new time) get their new times. With ``overwrite``, a
    store of other input or settings, or a damaged one, is deleted and prepared again, said in a warning.

    Raises:
        ConfigError: ``out`` holds a store of other input or settings (each difference named), or other files.
        DataError: its ``manifest.json`` or ``prepare.json`` is not a JSON object (damaged; the fix named).
    """
    for name, complete in (("manifest.json", True), ("prepare.json", False)):
        path = out / name
        if not path.is_file():
            continue
        try:
            old = mf.read_store_json(path, out)
        except mf.DamagedStore as err:
            if not overwrite:
                raise
            warnings.warn(f"{err.why}; overwriting it: nbkit's files there are deleted and it is prepared again",
                          UserWarning, stacklevel=4)
            break
        diffs = mf.differences(old, ident)
        if not diffs and (not complete or old.get("complete")):
            ident = mf.with_fingerprints(ident, old)   # the recorded ones (computed only where missing)
            if not complete:
                return None, ident
            if old.get("sources") != ident["sources"]:
                old = {**old, "sources": ident["sources"]}
                try:   # record the new times (and fingerprints an older nbkit did not write)
                    jsonio.write_json(path, old)
                except NbkitError:  # a read-only store stays usable; the content is compared again next time
                    pass
            return old, ident
        diffs = diffs or ["the manifest is not complete"]
        if not overwrite:
            raise mf.changed_error(out, diffs, complete)
        warnings.warn(f"{out} held {'a complete' if complete else 'a partly prepared'} store of other input or "
                      f"settings ({'; '.join(diffs[:3])}{'; ...' if len(diffs) > 3 else ''}); overwriting it: "
                      "nbkit's files there are deleted and it is prepared again", UserWarning, stacklevel=4)
        break   # overwrite: wiped below
    if not overwrite and out.is_dir() and any(p.name not in (StoreLock.LOCK_NAME, StoreLock.HOLDER_NAME)
                                              for p in out.iterdir()):
        raise ConfigError(f"{out} is not empty and holds no corpus store; pass a new or empty out_dir "
                          "(overwrite=True deletes only nbkit's own files there)")
    _wipe(out)
    return None, mf.with_fingerprints(ident)


def _check_stream(out: Path, sources, overwrite: bool) -> None:
    """An input without identity (an ``IterableDataset``) cannot match a store: refuse one in ``out`` (or wipe it
    with ``overwrite``) and warn that this preparation cannot be resumed or reused."""
    streams = [src for src in sources if not src.reusable]
    if not streams:
        return
    why = (f"{streams[0].path}: a datasets.IterableDataset has no fingerprint, so a store cannot tell it from "
           "another stream")
    if any((out / n).is_file() for n in ("manifest.json", "prepare.json")):
        if not overwrite:
            raise ConfigError(f"{out} holds a corpus store, and {why}: it cannot be resumed or reused from it. Pass "
                              "overwrite=True to prepare it again, a new out_dir, or a datasets.Dataset (e.g. "
                              "load_dataset(..., streaming=False)), whose fingerprint makes the store resumable")
        _wipe(out)
    warnings.warn(f"{why}: this preparation cannot be resumed after a stop, nor its store reused by a later call "
                  "(a datasets.Dataset can)", UserWarning, stacklevel=3)


class _Part:
    """The part being filled: its two shard files and the hashes it kept."""

    def __init__(self, shard_dir: Path, k: int):
        self.k = k
        self.files = {s: shards.ShardFile(shard_dir, f"{s}-{k:05d}") for s in shards.SPLITS}
        self.hashes: list[np.ndarray] = []


def prepare_corpus(inputs, out_dir, *, num_workers: int | None = None, overwrite: bool = False,
                   progress: bool = True, **settings) -> dict[str, Any]:
    """Prepare ``inputs`` into the token store ``out_dir`` (after another process preparing it, :class:`StoreLock`);
    returns its manifest (also ``out_dir/manifest.json``).

    Args:
        inputs: a path, glob or folder, or a list of them (``.txt``, ``.jsonl``, ``.json``, ``.parquet``,
            optionally ``.gz``/``.zst``; other files by content), or a ``datasets.Dataset`` / ``DatasetDict``
            / ``IterableDataset`` (the last cannot be resumed or reused).
        out_dir: the store's folder; a finished store of the same input and settings is reused, a stopped one
            continued.
        num_workers: processes for the per-text work (default: the usable cores); never changes the output.
        overwrite: delete a store of other input or settings in ``out_dir`` instead of raising.
        progress: print MB/s, texts/s and an ETA, and at the end the report of what was kept and dropped per
            file with each file's fix (:func:`nbkit.corpus.report.report_lines`; a reused store's too).
        **settings: :data:`nbkit.corpus.manifest.DEFAULTS`; ``exclude_texts``: texts never stored (keyed as
            dedup keys them; the manifest keeps only ``{"n_hashes", "sha256"}``).

    Raises:
        ConfigError: called from a script's top level without ``if __name__ == "__main__":`` (in the worker that
            re-runs the script, which would otherwise wait forever); a bad setting; no input, or one of a type it
            cannot take or inside a store; ``out_dir`` holding a store of other input or settings (each difference
            named), or any store for an ``IterableDataset`` (without ``overwrite``).
        DataError: with ``errors="raise"``, the first bad line or file (named); token ids at or above the
            tokenizer's ``vocab_size`` (the store is not marked complete).
        CheckpointError: the disk filled up (free and needed space named); complete parts stay.
        WorkerDied: a worker process was killed; complete parts stay.

    Warns:
        UserWarning: a :data:`~nbkit.corpus.manifest.TRAINED_ONLY` setting passed with ``tokenizer``
            (ignored); a trained vocabulary under 90 % of ``vocab_size``; an ``IterableDataset`` input.
    """
    if getattr(mp.current_process(), "_inheriting", False):   # Python's own test (multiprocessing.spawn)
        raise ConfigError("prepare_corpus was called while a corpus worker process was starting: a spawned worker "
                          "re-runs the main script, and this script calls prepare_corpus at its top level (the "
                          "worker would wait for the parent's store lock forever). Put the call under "
                          "`if __name__ == \"__main__\":`")
    t_start = time.perf_counter()
    n_workers = default_workers() if num_workers is None else int(num_workers)
    if n_workers < 1:
        raise ConfigError(f"num_workers={num_workers} must be >= 1 (default: the usable cores)")
    settings = dict(settings)
    exclude = settings.pop("exclude_texts", None)
    s = mf.check_settings(settings)
    excluded = exclusion_hashes(exclude or [], s["max_chars"])
    s["exclude_texts"] = exclusion_identity(excluded)
    s["segmenter"] = segment.resolve(s["segmenter"])
    s["segmenter_version"] = segment.version(s["segmenter"])
    s.update(tokenizer_identity(s["tokenizer"]))  # its normalisation (applied to the text) and fingerprint
    skipped: list[dict] = []
    sources = resolve_inputs(inputs, s["text_field"], skipped)
    ident = {"format": mf.FORMAT, "settings": s, "sources": [src.as_dict() for src in sources]}   # prepare.json
    out = Path(out_dir).expanduser()
    _check_stream(out, sources, overwrite)
    try:
        lock = StoreLock(out).acquire()
    except OSError:   # a read-only folder: only a finished store of this input and settings can be used there
        if overwrite or not (out / "manifest.json").is_file():
            raise
        result = _check_out_dir(out, ident, overwrite=False)[0]
    else:
        try:
            result = _write_store(out, ident, s, sources, skipped, excluded, n_workers, overwrite, progress, t_start)
        finally:
            lock.release()
    if progress:   # the per-file report, printed alike by the CLI, the jobs, the recipes and the notebooks
        for line in report_lines(result, out_dir):
            print(f"[prepare-corpus] {line}", flush=True)
    return result


def _write_store(out: Path, ident: dict, s: dict, sources, skipped: list, excluded: np.ndarray, n_workers: int,
                 overwrite: bool, progress: bool, t_start: float) -> dict[str, Any]:
    """Stages 1-4 in ``out``, under its lock; the manifest."""
    reuse, ident = _check_out_dir(out, ident, overwrite)
    if reuse is not None:
        return reuse
    if progress:
        for line in input_lines(ident["sources"], skipped):
            print(f"[prepare-corpus] {line}", flush=True)
    jsonio.write_json(out / "prepare.json", ident)
    shard_dir, tmp_dir = out / "shards", out / "tmp"
    shard_dir.mkdir(exist_ok=True)
    tmp_dir.mkdir(exist_ok=True)
    paths = [src.path for src in sources]
    total = sum(src.size_bytes for src in sources)
    bar = CorpusProgress(total, enabled=progress)
    job = {k: s[k] for k in ("errors", "text_field", "max_chars", "min_chars", "min_cjk_share", "segmenter",
                             "unicode_normalization", "strip_markup")}
    job["cjk_share_by_source"] = {i: mf.WIKI_CJK_SHARE for i, x in enumerate(sources) if x.wikipedia}
    compression = {x.path: x.compression for x in sources}
    sample_log = DropLog(DROPPED)   # what the tokenizer's sample pass dropped: named if it kept nothing

    def nothing(fix: str) -> str:
        counts = Counter()
        for f in sample_log.files.values():
            counts.update(f["dropped"])
        return nothing_kept(len(sources), dict(counts), sample_log.by_file(compression), fix)

    with Workers(n_workers) as pool:
        def cleaned():
            bar.begin(f"tokenizer sample (reads from the start until {s['sample_mb']:g} MB of text are kept)",
                      estimate=False)
            for item, result in pool.map("clean", iter_chunks(sources, s["text_field"], tmp_dir=tmp_dir,
                                                              chunk_items=s["chunk_items"]), job, paths):
                if isinstance(item, FileProblem):
                    _file_problem(item, Counter(), sample_log, s["errors"])
                elif result is not None:
                    sample_log.add_chunk(paths[item.source], result[1], result[2], result[4])
                    bar.update(item.raw_pos + sum(x.size_bytes for x in sources[:item.source]), len(result[0]))
                    yield result[0]
        tok, tok_seconds = ensure_tokenizer(out, s, cleaned, excluded, nothing)
        tok_file = out / "tokenizer" / "tokenizer.json"
        job.update(tokenizer_file=str(tok_file), tokenizer_json_sha256=fingerprint(tok_file), dtype=tok["dtype"],
                   sep_id=tok["sep_id"])   # the workers key their loaded tokenizer by its content
        markers, resumed, done = _encode(pool, sources, s, job, paths, shard_dir, tmp_dir, tok, bar, total, excluded)
    timing = {"seconds": round(time.perf_counter() - t_start, 3), "tokenizer_seconds": round(tok_seconds, 3),
              "num_workers": n_workers, "resumed_parts": resumed, "input_mb": round(total / 1e6, 3),
              "input_mb_this_run": round((total - done) / 1e6, 3)}   # a resumed run reads only the rest
    timing["mb_per_s"] = round((total - done) / 1e6 / max(timing["seconds"], 1e-9), 3)
    result = mf.build_manifest(ident, markers[-1], markers, tok, timing)
    log = DropLog(DROPPED, markers[-1])
    result.update(problems_rule=RULE, by_file=log.by_file(compression),
                  inputs={"by_name": sum(x.detected == "name" for x in sources),
                          "by_content": sum(x.detected != "name" for x in sources), "n_skipped": len(skipped),
                          "skipped": skipped[:MAX_SKIPPED]})
    if not result["splits"]["train"]["n_tokens"]:
        raise DataError(nothing_kept(len(sources), result["dropped"], result["by_file"],
                                     "else check text_field and the filters (min_chars, min_cjk_share)"))
    shards.check_ids(shard_dir, markers, tok)
    shutil.rmtree(tmp_dir, ignore_errors=True)
    jsonio.write_json(out / "manifest.json", result)
    return result


def _encode(pool: Workers, sources, s, job, paths, shard_dir: Path, tmp_dir: Path, tok, bar, total,
            excluded: np.ndarray):
    """The main pass (stage 3), from the last complete part on; returns ``(markers, parts reused, input
    bytes those parts covered)`` (each marker records ``next_bytes``; older ones: the whole sources before it)."""
    itemsize = np.dtype(tok["dtype"]).itemsize
    markers = shards.completed_parts(shard_dir, itemsize)
    resumed = len(markers)
    if markers and markers[-1].get("final"):
        return markers, resumed, total
    last = markers[-1] if markers else None
    tally = Counter()
    log = DropLog(DROPPED, last)
    if last:
        for group in ("counts", "dropped", "repaired"):
            tally.update(last[group])
    else:
        tally["n_files"] = len(sources)
    seen = HashSet(np.concatenate([np.fromfile(shard_dir / f"{shards.part_name(m['part'])}.hashes", "<u8")
                                   for m in markers]) if markers else None)
    start = tuple(last["next"]) if last else (0, 0)
    done = int(last.get("next_bytes", sum(x.size_bytes for x in sources[:start[0]]))) if last else 0
    bar.begin("tokenize", done)
    part = _Part(shard_dir, len(markers))
    written = sum(m["shards"][sp]["n_tokens"] for m in markers for sp in shards.SPLITS if m["shards"].get(sp))
    cut = heldout_cut(s["heldout_share"])

    def close(position, final: bool):
        nonlocal part, written   # a DiskFull here is handled below, as one while encoding
        entries = {sp: f.commit() for sp, f in part.files.items()}
        shards.check_ids(shard_dir, [{"shards": entries}], tok)   # before its marker: a bad part is never trusted
        fsync_dir(shard_dir)
        state = log.state()
        marker = {"part": part.k, "next": list(position), "next_bytes": int(bar.bytes), "final": final,
                  "shards": entries, "problems": state["problems"],
                  **{group: {k: int(tally[k]) for k in keys}
                     for group, keys in (("counts", COUNTS), ("dropped", DROPPED), ("repaired", REPAIRED))},
                  "drop_files": state["drop_files"]}   # the key order of markers written before
        hashes = np.concatenate(part.hashes) if part.hashes else np.zeros(0, np.uint64)
        shards.write_marker(shard_dir, part.k, hashes, marker)
        markers.append(marker)
        written += sum(e["n_tokens"] for e in entries.values() if e)
        seen.merge()
        part = _Part(shard_dir, part.k + 1)

    chunks = iter_chunks(sources, s["text_field"], start, chunk_items=s["chunk_items"], tmp_dir=tmp_dir)
    try:
        for item, res in pool.map("encode", chunks, job, paths):
            if isinstance(item, FileProblem):
                _file_problem(item, tally, log, s["errors"])
                continue
            _add(res, seen, cut, part, tally, log, excluded, paths[item.source])
            bar.update(item.raw_pos + sum(x.size_bytes for x in sources[:item.source]), int(len(res["lens"])))
            if part.files["train"].n_tokens >= s["shard_tokens"]:
                close((item.source, item.next_line), final=False)
        close((len(sources), 0), final=True)
    except BaseException as exc:
        for f in part.files.values():
            f.abort()
        if not isinstance(exc, shards.DiskFull):
            raise
        per_byte = written * 3 / max(bar.bytes, 1) if written else 3.0   # ids (2 B) + wst (1 B) per token, about
        raise shards.disk_full_error(shard_dir, str(exc), per_byte * max(total - bar.bytes, 0) + (16 << 20)) from None
    bar.finish(f"{tally['n_texts_kept']:,} texts kept, {tally['n_tokens']:,} tokens")
    return markers, resumed, done


def _add(res, seen: HashSet, cut: int, part: _Part, tally: Counter, log: DropLog, excluded: np.ndarray,
         path: str) -> None:
    """One chunk's result of ``path``: exclusion, dedup, split by hash, append to the part's shards, count, locate."""
    tally.update(res["counts"])
    log.add_chunk(path, res["counts"], res["problems"], res["scan"])
    out = np.isin(res["hashes"], excluded) if len(excluded) else np.zeros(len(res["hashes"]), bool)
    tally["excluded"] += int(out.sum())
    keep = np.zeros(len(out), bool)
    keep[~out] = seen.filter_new(res["hashes"][~out])
    tally["duplicate"] += int((~keep).sum() - out.sum())
    log.locate(path, "excluded", res["lines"], out, "equal to an exclude_texts text")
    log.locate(path, "duplicate", res["lines"], ~keep & ~out, "a text seen before (NFKC form)")
    heldout = res["hashes"] < np.uint64(cut)
    tok_keep = np.repeat(keep, res["lens"])
    tok_val = np.repeat(heldout, res["lens"])
    for split, docs, toks in (("train", keep & ~heldout, tok_keep & ~tok_val), ("validation", keep & heldout,
                                                                                 tok_keep & tok_val)):
        if docs.any():
            part.files[split].append(res["ids"][toks], res["wst"][toks], int(docs.sum()))
    part.hashes.append(res["hashes"][keep])
    tally["n_texts_kept"] += int(keep.sum())
    tally["n_chars"] += int(res["chars"][keep].sum())
    tally["n_tokens"] += int(res["lens"][keep].sum())


def _file_problem(p: FileProblem, tally: Counter, log: DropLog, errors: str) -> None:
    tally[p.reason] += 1
    if errors == "raise":
        where = f", line {p.line}" if p.line else ""
        raise DataError(f"{p.path}{where}: {p.reason} ({p.detail}); fix or remove the file, or pass "
                        "errors='skip' to count it in the manifest and go on")
    log.add(p.path, p.line, p.reason, p.detail)
