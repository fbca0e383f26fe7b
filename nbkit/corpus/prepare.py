"""``prepare_corpus``: files, globs or folders of text -> a sharded, resumable token store (``nbkit-corpus/1``).

The stages (docs/corpus.md has the why and the measurements), under a lock on ``out_dir``
(:class:`nbkit.corpus.lock.StoreLock`: one writer per store; a second preparation waits for the first,
then reuses or continues its store):

1. resolve the inputs (:mod:`nbkit.corpus.sources`, :mod:`nbkit.corpus.readers`) and check the output folder: a complete store
   of the same input and settings is returned as is; one of other input or settings is named
   (ConfigError) unless ``overwrite=True``; a partial one of the same is continued;
2. the tokenizer (:mod:`nbkit.corpus.vocab`): given, or trained on a documented sample;
3. one pass over the input in chunks, cleaned, segmented and tokenized in ``num_workers`` processes
   (:mod:`nbkit.corpus.worker`), deduplicated and split by hash here, written part by part
   (:mod:`nbkit.corpus.shards`); a part closes after the chunk that brings its train shard to
   ``shard_tokens``, so part boundaries depend only on the input and the settings;
4. every shard's largest id checked against the tokenizer's ``vocab_size`` (recorded per part), then
   ``manifest.json`` last (atomic): its presence with ``"complete": true`` means the store is done.

Memory: the in-flight chunks (at most ``2 * num_workers`` of <= 4 MB each and their results), the
longest line, and the dedup hash set (:mod:`nbkit.corpus.dedup`: 8 bytes per kept text, the only part
growing with the corpus); the shards are written as they fill, never held whole.
"""
from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import jsonio
from nbkit.atomic import fsync_dir
from nbkit.corpus import manifest as mf
from nbkit.corpus import segment, shards
from nbkit.corpus.dedup import HashSet, exclusion_hashes, exclusion_identity
from nbkit.corpus.lock import StoreLock
from nbkit.corpus.pool import Workers
from nbkit.corpus.progress import CorpusProgress
from nbkit.corpus.readers import FileProblem, iter_chunks
from nbkit.corpus.report import RULE, DropLog, input_lines
from nbkit.corpus.sources import fingerprint, resolve_inputs, skipped_summary
from nbkit.corpus.vocab import ensure_tokenizer, heldout_cut, tokenizer_identity
from nbkit.errors import ConfigError, DataError, NbkitError

DROPPED = ("blank", "missing", "not_text", "markup_only", "excluded", "duplicate", "too_short", "non_cjk", "bad_utf8",
           "nul_byte", "bad_json", "no_text_field", "no_tokens", "empty_file", "binary_file", "not_utf8_file",
           "truncated_file", "unreadable_file")
REPAIRED = ("repaired_surrogates", "long_texts_cut", "long_text_pieces", "paragraph_lists_joined", "markup_stripped")
COUNTS = ("n_files", "n_items", "n_texts_read", "n_texts_kept", "n_chars", "n_tokens")
_OURS = ("manifest.json", "prepare.json", "tokenizer", "tokenizer_info.json", "shards", ".tokenizer.tmp", "tmp")


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
    """``(manifest to reuse or None, identity with fingerprints)``; with None, ``out`` is ready to (continue to)
    prepare. A reused store whose inputs were touched (same content, new time) gets their new times."""
    for name, complete in (("manifest.json", True), ("prepare.json", False)):
        path = out / name
        if not path.is_file():
            continue
        old = jsonio.loads_strict(path.read_text(encoding="utf-8"))
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
        if not overwrite:
            raise mf.changed_error(out, diffs or ["the manifest is not complete"], complete)
        _wipe(out)
        return None, mf.with_fingerprints(ident)
    if out.is_dir() and any(p.name not in (StoreLock.LOCK_NAME, StoreLock.HOLDER_NAME) for p in out.iterdir()) and not overwrite:
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
    import warnings

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


def _split_counts(tally: Counter) -> dict[str, Any]:
    return {"counts": {k: int(tally[k]) for k in COUNTS}, "dropped": {k: int(tally[k]) for k in DROPPED},
            "repaired": {k: int(tally[k]) for k in REPAIRED}}


class _Part:
    """The part being filled: its two shard files and the hashes it kept."""

    def __init__(self, shard_dir: Path, k: int):
        self.k = k
        self.files = {s: shards.ShardFile(shard_dir, f"{s}-{k:05d}") for s in shards.SPLITS}
        self.hashes: list[np.ndarray] = []


def prepare_corpus(inputs, out_dir, *, num_workers: int | None = None, overwrite: bool = False,
                   progress: bool = True, **settings) -> dict[str, Any]:
    """Prepare ``inputs`` into the token store ``out_dir`` and return its manifest (format ``nbkit-corpus/1``).

    A preparation of ``out_dir`` under way in another process is waited for (a line on stderr names its
    pid and host: :class:`nbkit.corpus.lock.StoreLock`); then its finished store is reused, or its
    stopped one continued.

    Args:
        inputs: a path, glob or folder, or a list of them (``.txt``, ``.jsonl``, ``.json``, ``.parquet``,
            each optionally ``.gz``/``.zst``; other files by content; folders recursively, links followed,
            hidden entries, stores and binaries left out and listed in the manifest's ``inputs``), or a
            ``datasets.Dataset`` / ``DatasetDict`` (its ``train`` split) / ``IterableDataset`` (streamed in
            row batches; it has no fingerprint, so its store cannot be resumed or reused).
        out_dir: the store's folder (created; a finished store there is reused, a partial one continued).
        num_workers: processes for the per-text work (default: the usable cores); never changes the output.
        overwrite: delete a store of other input or settings in ``out_dir`` instead of raising.
        progress: print MB/s, texts/s and an ETA (a bar on a terminal, plain lines otherwise).
        **settings: see :data:`nbkit.corpus.manifest.DEFAULTS` (``text_field``, ``tokenizer``,
            ``vocab_size``, ``min_chars``, ``min_cjk_share``, ``heldout_share``, ``errors``, ...).
            ``exclude_texts``: a list of texts never stored: a corpus text whose normalised hash equals
            one of theirs (same cut, validity rule and NFKC-form 64-bit hash as dedup) is dropped as
            ``excluded`` (before dedup; nor is it in the tokenizer's sample); the manifest records
            ``{"n_hashes", "sha256"}`` of their sorted hashes, so a changed list is a changed setting.

    Returns:
        The manifest dict (also in ``out_dir/manifest.json``).

    Raises:
        ConfigError: a bad setting, no input, an input of a type it cannot take (named), an input that is
            or lies in a corpus store (never read as text), or ``out_dir`` holding a store of other input or
            settings (every difference named; an input of equal size but a new modification time differs only
            if its SHA-256 does), or any store when the input is an ``IterableDataset`` (without ``overwrite``).
        DataError: with ``errors="raise"``, the first bad line or file (file and line named); nothing kept;
            or token ids at or above the tokenizer's ``vocab_size`` (the store is not marked complete).
        CheckpointError: the disk filled up (directory, free and needed space named); complete shards stay.
        WorkerDied: a worker process was killed (e.g. by the out-of-memory killer); complete parts stay.

    Warns:
        UserWarning: ``vocab_size``, ``sample_mb`` or ``model_max_length`` passed with ``tokenizer``
            (ignored; recorded as null: :data:`nbkit.corpus.manifest.TRAINED_ONLY`); a trained vocabulary
            under 90 % of ``vocab_size`` (the reason and the fix); an ``IterableDataset`` input (not resumable).
    """
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
    ident = mf.identity(s, [src.as_dict() for src in sources])
    out = Path(out_dir).expanduser()
    _check_stream(out, sources, overwrite)
    try:
        lock = StoreLock(out).acquire()
    except OSError:   # a read-only folder: only a finished store of this input and settings can be used there
        if overwrite or not (out / "manifest.json").is_file():
            raise
        return _check_out_dir(out, ident, overwrite=False)[0]
    try:
        return _write_store(out, ident, s, sources, skipped, excluded, n_workers, overwrite, progress, t_start)
    finally:
        lock.release()


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
    with Workers(n_workers) as pool:
        def cleaned():
            bar.begin(f"tokenizer sample (reads from the start until {s['sample_mb']:g} MB of text are kept)")
            for item, result in pool.map("clean", iter_chunks(sources, s["text_field"], tmp_dir=tmp_dir,
                                                              chunk_items=s["chunk_items"]), job, paths):
                if result is not None:
                    bar.update(item.raw_pos + sum(x.size_bytes for x in sources[:item.source]), len(result[0]))
                    yield result[0]
        tok, tok_seconds = ensure_tokenizer(out, s, cleaned, excluded)
        tok_file = out / "tokenizer" / "tokenizer.json"
        job.update(tokenizer_file=str(tok_file), tokenizer_json_sha256=fingerprint(tok_file), dtype=tok["dtype"],
                   sep_id=tok["sep_id"])   # the workers key their loaded tokenizer by its content
        markers, resumed, done = _encode(pool, sources, s, job, paths, shard_dir, tmp_dir, tok, bar, total,
                                         excluded)
    timing = {"seconds": round(time.perf_counter() - t_start, 3), "tokenizer_seconds": round(tok_seconds, 3),
              "num_workers": n_workers, "resumed_parts": resumed, "input_mb": round(total / 1e6, 3),
              "input_mb_this_run": round((total - done) / 1e6, 3)}   # a resumed run reads only the rest
    timing["mb_per_s"] = round((total - done) / 1e6 / max(timing["seconds"], 1e-9), 3)
    result = mf.build_manifest(ident, markers[-1], markers, tok, timing)
    log = DropLog.from_marker(DROPPED, markers[-1])
    result.update(problems_rule=RULE, by_file=log.by_file({x.path: x.compression for x in sources}),
                  inputs={"by_name": sum(x.detected == "name" for x in sources),
                          "by_content": sum(x.detected != "name" for x in sources), **skipped_summary(skipped)})
    if not result["splits"]["train"]["n_tokens"]:
        raise DataError(f"no text of {len(sources)} input file(s) was kept (dropped: "
                        f"{ {k: v for k, v in result['dropped'].items() if v} }); check text_field and the filters")
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
    log = DropLog.from_marker(DROPPED, last)
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
        nonlocal part, written
        try:
            entries = {sp: f.commit() for sp, f in part.files.items()}
            shards.check_ids(shard_dir, [{"shards": entries}], tok)   # before its marker: a bad part is never trusted
            fsync_dir(shard_dir)
            state = log.state()
            marker = {"part": part.k, "next": list(position), "next_bytes": int(bar.bytes), "final": final,
                      "shards": entries,
                      "problems": state["problems"], **_split_counts(tally), "drop_files": state["files"]}
            hashes = np.concatenate(part.hashes) if part.hashes else np.zeros(0, np.uint64)
            shards.write_marker(shard_dir, part.k, hashes, marker)
        except shards.DiskFull as exc:
            for f in part.files.values():
                f.abort()
            raise _disk_full(shard_dir, exc, written, bar.bytes, total) from None
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
    except shards.DiskFull as exc:
        for f in part.files.values():
            f.abort()
        raise _disk_full(shard_dir, exc, written, bar.bytes, total) from None
    except BaseException:
        for f in part.files.values():
            f.abort()
        raise
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


def _disk_full(shard_dir: Path, exc, written_tokens: int, bytes_done: int, total: int):
    done = max(bytes_done, 1)
    per_byte = written_tokens * 3 / done if written_tokens else 3.0  # ids (2 B) + wst (1 B) per token, about
    return shards.disk_full_error(shard_dir, str(exc), per_byte * max(total - bytes_done, 0) + (16 << 20))
