"""How long ``prepare_corpus`` will take, before it starts: the inputs sized, the per-text work (cleaning,
segmenter, tokenizer: :func:`nbkit.corpus.worker.encode_chunk`, the workers' code) timed on the first few MB
with the run's tokenizer, in this process.
"""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from nbkit.units import fmt_duration

#: Share of ``num_workers`` x one core's rate that a preparation reaches on as many cores: the main process
#: reads, deduplicates and writes beside the workers. Measured 2026-12-03 on the quiet 2-core machine, 20 MB of
#: ``bench/corpus_scale.py``'s text, bert-base-chinese vocabulary, rjieba words: one process's ``encode_chunk``
#: 3.9 MB/s, ``prepare_corpus``'s main pass with 2 workers 5.35 MB/s (0.69 of 2 x 3.9).
PARALLEL_SHARE = 0.7


@dataclass(frozen=True)
class PrepEstimate:
    """A preparation's expected duration: ``input_mb`` (MB of input in all, as on disk), ``measured_mb`` (MB of
    it timed), ``mb_per_s`` (expected input MB/s of the whole preparation), ``seconds`` (expected wall time of
    its main pass; a tokenizer trained first adds its own time, ``trains_tokenizer``), ``num_workers``."""

    input_mb: float
    measured_mb: float
    mb_per_s: float
    seconds: float
    num_workers: int
    trains_tokenizer: bool

    def __repr__(self) -> str:   # rounded: a notebook shows it; the figures vary with the machine anyway
        return (f"PrepEstimate(input_mb={self.input_mb:.1f}, mb_per_s={self.mb_per_s:.2f}, "
                f"seconds={self.seconds:.0f}, measured_mb={self.measured_mb:.1f}, num_workers={self.num_workers})")

    def text(self) -> str:
        """One line: ``preparing 1,000.0 MB of input: about 3 min 5 s at 5.40 MB/s with 2 workers (...)``."""
        extra = ", plus training the store's tokenizer on its sample first (sample_mb)" if self.trains_tokenizer else ""
        return (f"preparing {self.input_mb:,.1f} MB of input: about {fmt_duration(self.seconds)} at "
                f"{self.mb_per_s:.2f} MB/s with {self.num_workers} worker(s){extra} (timed on the first "
                f"{self.measured_mb:,.1f} MB in this process; a busy machine is slower)")


def estimate_preparation(inputs, tokenizer=None, *, segmenter: str = "auto", num_workers: int | None = None,
                         sample_mb: float = 2.0, text_field: str = "text", **settings) -> PrepEstimate:
    """Size ``inputs`` and time ``prepare_corpus``'s per-text work on their first ``sample_mb`` MB.

    Args:
        inputs: what ``prepare_corpus`` takes (paths, globs, folders, ``datasets`` objects).
        tokenizer: the run's tokenizer directory; None (the store trains one): timed with a 21,128-token
            bert-base-chinese vocabulary (:mod:`nbkit.text.chinese_vocab`), which prepares at the speed of
            nbkit's own tokenizer (both take the code-point table, ``bench/prepare_tokenizers.py``).
        segmenter, text_field, **settings: as ``prepare_corpus`` (the filters, ``strip_markup``, ...).
        num_workers: as ``prepare_corpus`` (default: the usable cores); the rate is one core's times
            ``min(num_workers, cores)`` times :data:`PARALLEL_SHARE` (1 for one worker).
        sample_mb: MB of input read and timed (whole chunks of up to 1,000 lines / 4 MB: a little more).

    Cost: reads only the first ``sample_mb`` MB (plus the end of the chunk that crosses it) and encodes them
    once on one core: about 1 s per 2 MB plus loading the tokenizer and segmenter (1-2 s); writes nothing but a
    temporary copy of the tokenizer's pipeline.

    Raises:
        ConfigError: no input, or one that matches nothing (``resolve_inputs``'s message names it), or a bad
            setting or tokenizer (as ``prepare_corpus``).
    """
    from nbkit.corpus import manifest as mf
    from nbkit.corpus import segment, worker
    from nbkit.corpus.prepare import default_workers
    from nbkit.corpus.readers import iter_chunks
    from nbkit.corpus.sources import fingerprint, resolve_inputs
    from nbkit.corpus.vocab import _load_given, tokenizer_identity

    s = mf.check_settings({**settings, "tokenizer": tokenizer, "segmenter": segmenter, "text_field": text_field})
    s["segmenter"] = segment.resolve(s["segmenter"])
    s.update(tokenizer_identity(s["tokenizer"]))
    sources = resolve_inputs(inputs, text_field)
    total = sum(src.size_bytes for src in sources)
    cores = default_workers()
    n = cores if num_workers is None else max(1, int(num_workers))
    job = {k: s[k] for k in ("errors", "text_field", "max_chars", "min_chars", "min_cjk_share", "segmenter",
                             "unicode_normalization", "strip_markup")}
    job["errors"] = "skip"   # a bad line is the preparation's to report, not the estimate's
    job["cjk_share_by_source"] = {i: mf.WIKI_CJK_SHARE for i, x in enumerate(sources) if x.wikipedia}
    with tempfile.TemporaryDirectory(prefix="nbkit-estimate-") as tmp:
        tok_file = Path(tmp) / "tokenizer.json"
        if tokenizer is None:
            from nbkit.text.chinese_vocab import bert_chinese_tokenizer, chinese_vocab

            bert_chinese_tokenizer(chinese_vocab()).save(str(tok_file))
        else:
            tok_file.write_text(_load_given(tokenizer).backend_tokenizer.to_str(), encoding="utf-8")
        job.update(tokenizer_file=str(tok_file), tokenizer_json_sha256=fingerprint(tok_file), dtype="uint32",
                   sep_id=0)
        worker._tools(job)   # loaded before the clock starts: the workers load it once
        limit, done, seconds = int(sample_mb * 1e6), 0, 0.0
        offsets = [sum(x.size_bytes for x in sources[:i]) for i in range(len(sources))]
        for chunk in iter_chunks(sources, text_field, chunk_items=s["chunk_items"], tmp_dir=tmp):
            if not hasattr(chunk, "items"):   # a file-level fault: the preparation reports it
                continue
            t0 = time.perf_counter()
            worker.encode_chunk(chunk, job, sources[chunk.source].path)
            seconds += time.perf_counter() - t0
            src = sources[chunk.source]
            if src.compression is None and chunk.items and isinstance(chunk.items[0], bytes):
                done += sum(map(len, chunk.items)) + len(chunk.items)   # the lines and their line ends
            else:   # compressed (bytes on disk read, as the total counts them), parquet, datasets
                done = max(done, offsets[chunk.source] + chunk.raw_pos)
            if done >= limit:
                break
    measured = done / 1e6
    per_core = measured / max(seconds, 1e-9)
    rate = per_core * (1.0 if min(n, cores) == 1 else min(n, cores) * PARALLEL_SHARE)
    return PrepEstimate(input_mb=round(total / 1e6, 3), measured_mb=round(measured, 3), mb_per_s=round(rate, 3),
                        seconds=round(total / 1e6 / rate, 1) if rate > 0 else float("inf"), num_workers=n,
                        trains_tokenizer=tokenizer is None)


def print_estimate(corpus, tokenizer=None, **kwargs) -> PrepEstimate | None:
    """Print :func:`estimate_preparation`'s line for raw input ``corpus``, or that a prepared store ``corpus``
    (or ``store``, a finished store it would be prepared into) needs nothing; None then, or for no corpus."""
    from nbkit.corpus.store import given_store, is_prepared

    store = kwargs.pop("store", None)
    if corpus is None:
        print("no corpus: the bundled text, nothing to prepare")
        return None
    ready = given_store(corpus) or (store if store is not None and is_prepared(store) else None)
    if ready is not None:
        print(f"{ready} is a prepared store: nothing to prepare")
        return None
    est = estimate_preparation(corpus, tokenizer, **kwargs)
    print(est.text())
    return est


__all__ = ["PrepEstimate", "estimate_preparation", "print_estimate", "PARALLEL_SHARE"]
