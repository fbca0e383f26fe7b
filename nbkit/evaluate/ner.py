"""Entity-level NER scores by seqeval's definition with bootstrap intervals over sentences, and a CRF baseline.

Scores use ``seqeval`` in its default mode, the conlleval definition most published Chinese NER numbers use: an
entity is a maximal ``B-X I-X ...`` run, correct only when type, start and end all match; an ``I-X`` that follows
``O`` or another type opens an entity, so a system's ill-formed predictions are scored rather than hidden.
"""
from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from nbkit.errors import ConfigError, DataError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

Tags = Sequence[Sequence[str]]


def _check(gold: Tags, pred: Tags, name: str = "pred") -> None:
    if len(gold) != len(pred) or not gold:
        raise DataError(f"{name} has {len(pred)} sentences but gold {len(gold)}; pass one tag sequence per test "
                        "sentence, in the same order.")
    for i, (g, p) in enumerate(zip(gold, pred)):
        if len(g) != len(p):
            raise DataError(f"sentence {i}: {name} has {len(p)} tags but gold {len(g)}; predict one tag per "
                            "character (merge the windows of a long sentence before scoring).")


def entity_scores(gold: Tags, pred: Tags) -> dict:
    """Entity-level micro precision/recall/F1 and per-type scores of tag sequences (``seqeval``, default mode).

    ``gold``, ``pred``: ``N`` sentences of BIO tags each (``pred[i]`` as long as ``gold[i]``).

    Returns:
        ``precision``, ``recall``, ``f1`` (0-1, micro over entities), ``n_gold``, ``n_pred``, ``n_correct``
        (entities), ``n_sentences``, ``mode`` (``"default"``), ``per_type``: type -> ``precision``, ``recall``,
        ``f1``, ``support`` for every type in gold or pred. ``undefined``: None, or for gold without a single
        entity :func:`no_entities`' sentence; ``recall`` and ``f1`` are then None (0.0 would read as a model that
        found none of many), ``precision`` too unless something was predicted (then 0.0).

    Raises:
        DataError: sentence counts or lengths differ, or no sentence.
    """
    from seqeval.metrics import classification_report, f1_score, precision_score, recall_score

    gold, pred = [list(s) for s in gold], [list(s) for s in pred]
    counts = _counts(gold, pred)
    per = classification_report(gold, pred, output_dict=True, zero_division=0)
    per_type = {t: {"precision": float(v["precision"]), "recall": float(v["recall"]), "f1": float(v["f1-score"]),
                    "support": int(v["support"])}
                for t, v in sorted(per.items()) if not t.endswith(" avg")}
    n_gold, n_pred = int(counts[:, 2].sum()), int(counts[:, 1].sum())
    undefined = no_entities(len(gold)) if n_gold == 0 else None
    return {"precision": float(precision_score(gold, pred, zero_division=0)) if n_gold or n_pred else None,
            "recall": float(recall_score(gold, pred, zero_division=0)) if n_gold else None,
            "f1": float(f1_score(gold, pred, zero_division=0)) if n_gold else None,
            "n_gold": n_gold, "n_pred": n_pred, "n_correct": int(counts[:, 0].sum()),
            "n_sentences": len(gold), "mode": "default", "per_type": per_type, "undefined": undefined}


def no_entities(n_sentences: int) -> str:
    """The sentence for a gold split without a single entity: why its F1 is not a number, and what to do."""
    return (f"the {n_sentences} gold sentences hold no entity, so entity recall and F1 are undefined (0 of 0 found), "
            "not 0.0: score on sentences that have entities (a larger test split, another split seed, or check that "
            "the test file's tags are BIO with entity types, e.g. B-PER / I-PER)")


def _counts(gold: Tags, pred: Tags) -> "np.ndarray":
    """(N, 3) int array: per sentence the correct, predicted and gold entities (:func:`nbkit.data.ner.entity_spans`,
    seqeval's reading); DataError as :func:`_check`."""
    import numpy as np

    from nbkit.data.ner import entity_spans

    _check(gold, pred)
    out = np.zeros((len(gold), 3), dtype=np.int64)
    for i, (g, p) in enumerate(zip(gold, pred)):
        g_set, p_set = set(entity_spans(g)), set(entity_spans(p))
        out[i] = (len(g_set & p_set), len(p_set), len(g_set))
    return out


def _run_counts(gold: Tags, pred, n_boot: int) -> list["np.ndarray"]:
    """:func:`_counts` of each run of one system: ``pred`` is ``list[list[str]]`` (one run) or
    ``list[list[list[str]]]`` (several, e.g. seeds). ConfigError: ``n_boot`` below 1."""
    if n_boot < 1:
        raise ConfigError(f"n_boot={n_boot}: use at least 1 (1000 for a 95 % interval).")
    first = next((sentence for sentence in pred if len(sentence)), None)
    runs = list(pred) if first is not None and not isinstance(first[0], str) else [pred]
    return [_counts(gold, run) for run in runs]


def _f1(counts: "np.ndarray", idx=None) -> float:
    """Micro F1 = 2 correct / (predicted + gold) of the (N, 3) counts at sentences ``idx`` (0 when both are 0)."""
    c = counts if idx is None else counts[idx]
    total = c[:, 1].sum() + c[:, 2].sum()
    return float(2 * c[:, 0].sum() / total) if total else 0.0


def entity_f1_interval(gold: Tags, pred, n_boot: int = 1000, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap interval ``(low, high)`` of entity micro-F1 (0-1) over ``n_boot`` resamples of the
    test sentences (whole sentences: their entities are not independent), ``level`` coverage. ``pred``: ``N`` tag
    sequences, or a list of such runs (seeds), averaged in each resample. None when gold holds no entity.

    Raises:
        DataError: sentence counts or lengths differ, or no sentence. ConfigError: ``n_boot`` below 1.
    """
    from nbkit.evaluate.stats import percentile_interval, resample_indices

    runs = _run_counts(gold, pred, n_boot)
    if not runs[0][:, 2].any():
        return None
    samples = [sum(_f1(c, idx) for c in runs) / len(runs) for idx in resample_indices(len(gold), n_boot, seed)]
    return percentile_interval(samples, level)


def entity_f1_diff(gold: Tags, pred_a, pred_b, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> dict:
    """Paired bootstrap interval of ``F1(A) - F1(B)`` (entity micro-F1, 0-1) on the same test sentences, as
    :func:`nbkit.evaluate.stats.bootstrap_diff` does for accuracy: both systems scored on each resample.

    ``pred_a``, ``pred_b``: one run or a list of runs (seeds) each, averaged per resample. Returns
    ``{"value", "low", "high", "level", "n_boot"}``; ``value`` on the full test set. Gold without an entity:
    ``value``, ``low``, ``high`` None and ``undefined`` the reason (:func:`no_entities`).

    Raises:
        DataError: sentence counts or lengths differ, or no sentence. ConfigError: ``n_boot`` below 1.
    """
    from nbkit.evaluate.stats import percentile_interval, resample_indices

    a, b = _run_counts(gold, pred_a, n_boot), _run_counts(gold, pred_b, n_boot)
    if not a[0][:, 2].any():
        return {"value": None, "low": None, "high": None, "level": level, "n_boot": n_boot,
                "undefined": no_entities(len(gold))}

    def diff(idx) -> float:
        return sum(_f1(c, idx) for c in a) / len(a) - sum(_f1(c, idx) for c in b) / len(b)

    low, high = percentile_interval([diff(idx) for idx in resample_indices(len(gold), n_boot, seed)], level)
    return {"value": diff(None), "low": low, "high": high, "level": level, "n_boot": n_boot}


# ----- CRF baseline -----------------------------------------------------------------------------------------

def _char_class(ch: str) -> str:
    """``D`` digit (ASCII, full-width, Chinese numerals), ``P`` punctuation, ``L`` Latin letter, ``H`` other."""
    if ch.isdigit() or ch in "零〇一二三四五六七八九十百千万亿两":
        return "D"
    cat = unicodedata.category(ch)
    if cat[0] in "PS":
        return "P"
    if "LATIN" in unicodedata.name(ch, ""):
        return "L"
    return "H"


#: The version of :func:`char_features`' template, recorded with a saved CRF (:class:`CrfTagger`): a model's
#: weights name these feature strings, so another template would tag with features the model never saw.
FEATURES_VERSION = "sighan2006-char-window/1"


def char_features(tokens: Sequence[str]) -> list[list[str]]:
    """CRFsuite features (binary, as strings) of each character: the character window ``C-2 .. C2``, the bigrams
    ``C-2C-1, C-1C0, C0C1, C1C2`` and ``C-1C1``, and the classes (digit / punctuation / Latin / other) of
    ``C-1, C0, C1`` and their triple; ``BOS``/``EOS`` past the ends (``"c0c1=中|国"``).

    The character n-gram template of the CRF systems of the SIGHAN 2006 Chinese NER bakeoff (e.g. Chen, Zhang &
    Isahara 2006, SIGHAN-5), plus the usual orthographic character classes."""
    pad = ["BOS2", "BOS1", *tokens, "EOS1", "EOS2"]
    cls = ["B", "B", *(_char_class(c) for c in tokens), "E", "E"]
    out = []
    for i in range(2, len(pad) - 2):
        c = pad
        out.append(["bias", f"c-2={c[i - 2]}", f"c-1={c[i - 1]}", f"c0={c[i]}", f"c1={c[i + 1]}", f"c2={c[i + 2]}",
                    f"c-2c-1={c[i - 2]}|{c[i - 1]}", f"c-1c0={c[i - 1]}|{c[i]}", f"c0c1={c[i]}|{c[i + 1]}",
                    f"c1c2={c[i + 1]}|{c[i + 2]}", f"c-1c1={c[i - 1]}|{c[i + 1]}",
                    f"t-1={cls[i - 1]}", f"t0={cls[i]}", f"t1={cls[i + 1]}", f"t-1t0t1={cls[i - 1]}{cls[i]}{cls[i + 1]}"])
    return out


def fit_crf(train_items: Sequence[dict], *, c1: float = 0.05, c2: float = 0.05, max_iter: int = 100):
    """A fitted ``sklearn_crfsuite.CRF`` (L-BFGS, L1 ``c1`` + L2 ``c2``, every label transition allowed) over
    :func:`char_features` of ``train_items`` (``{"tokens", "tags"}``), streamed one sentence at a time (Python
    memory flat in the corpus size). Each iteration costs O(T·L²) for T characters and L labels.

    Raises:
        DataError: no training sentence, or tags and tokens of different lengths.
    """
    import sklearn_crfsuite

    items = [item for item in train_items if len(item["tokens"])]
    if not items:
        raise DataError("The CRF baseline got no training sentences; pass NerData.splits['train'].")
    bad = next((item.get("id", i) for i, item in enumerate(items) if len(item["tags"]) != len(item["tokens"])), None)
    if bad is not None:
        raise DataError(f"sentence {bad}: tags and tokens differ in length; give one tag per character.")
    crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2, max_iterations=max_iter,
                               all_possible_transitions=True)
    crf.fit((char_features(item["tokens"]) for item in items), (list(item["tags"]) for item in items))
    return crf


class CrfTagger:
    """A fitted CRF (:func:`fit_crf`) that tags plain text, saved and loaded as a folder: ``model.crfsuite``
    (CRFsuite's own model file, what ``sklearn_crfsuite`` and ``pycrfsuite.Tagger().open`` read) and ``crf.json``
    (the feature template's version :data:`FEATURES_VERSION`, the labels, the training settings).

    Text is read as training read it: every character one token (spaces too), so the CRF serves the user's call
    with the features it was scored with (docs/ner.md shows the call).
    """

    MODEL_FILE, META_FILE = "model.crfsuite", "crf.json"

    def __init__(self, model: bytes, meta: dict):
        import pycrfsuite

        self.model, self.meta = model, meta
        self._tagger = pycrfsuite.Tagger()
        self._tagger.open_inmemory(model)

    @classmethod
    def fit(cls, train_items: Sequence[dict], *, c1: float = 0.05, c2: float = 0.05, max_iter: int = 100
            ) -> "CrfTagger":
        """:func:`fit_crf` on ``train_items`` (``{"tokens", "tags"}``), kept with its settings. Raises as it."""
        from importlib.metadata import version

        crf = fit_crf(train_items, c1=c1, c2=c2, max_iter=max_iter)
        model = Path(crf.modelfile.name).read_bytes()
        return cls(model, {"features": FEATURES_VERSION, "labels": sorted(crf.classes_), "c1": c1, "c2": c2,
                           "max_iter": max_iter, "n_train_sentences": sum(1 for it in train_items if len(it["tokens"])),
                           "sklearn_crfsuite": version("sklearn-crfsuite")})

    def save(self, folder) -> Path:
        """Write ``folder/model.crfsuite`` and ``folder/crf.json`` (atomically, replacing an older CRF there);
        returns the folder.

        Raises:
            WriteError: the file system refused a write (:func:`nbkit.atomic.atomic_dir`).
        """
        from nbkit import jsonio
        from nbkit.atomic import atomic_dir

        with atomic_dir(Path(folder), what="CRF model") as tmp:
            (tmp / self.MODEL_FILE).write_bytes(self.model)
            jsonio.write_json(tmp / self.META_FILE, self.meta)
        return Path(folder)

    @classmethod
    def load(cls, folder) -> "CrfTagger":
        """The CRF :meth:`save` wrote in ``folder``.

        Raises:
            DataError: ``folder`` lacks either file. ConfigError: it was saved with another feature template
                (retrain it: the NER job or notebook 07 saves one beside its run).
        """
        from nbkit import jsonio

        folder = Path(folder)
        missing = [f for f in (cls.MODEL_FILE, cls.META_FILE) if not (folder / f).is_file()]
        if missing:
            raise DataError(f"{folder} holds no saved CRF ({', '.join(missing)} missing); pass the crf/ folder of an "
                            "NER run (python -m nbkit.jobs.finetune --task ner, or notebook 07, writes <run>/crf).")
        meta = jsonio.loads_strict((folder / cls.META_FILE).read_text(encoding="utf-8"))
        if meta.get("features") != FEATURES_VERSION:
            raise ConfigError(f"{folder}: the CRF was trained on feature template {meta.get('features')!r}, this nbkit "
                              f"computes {FEATURES_VERSION!r}: its weights would read other features. Retrain it "
                              "(rerun the NER job or notebook 07), or load it with the nbkit version that saved it.")
        return cls((folder / cls.MODEL_FILE).read_bytes(), meta)

    def tags(self, tokens: Sequence[str]) -> list[str]:
        """BIO tags of one sentence given as its characters (``[]`` for none): Viterbi decoding, O(T·L²)."""
        return list(self._tagger.tag(char_features(list(tokens)))) if len(tokens) else []

    def predict(self, text: str | Sequence[str]) -> list[dict] | list[list[dict]]:
        """Entities of plain text, as ``pipeline("token-classification", aggregation_strategy="simple")`` gives
        them for the BERT export: ``{"entity_group", "start", "end", "word", "score"}`` per entity (character
        offsets into the text, ``end`` exclusive; ``score``: the mean marginal probability of its tags). A string
        gives one list, a list of strings one list each.

        Raises:
            DataError: ``text`` is neither a string nor a list of strings.
        """
        if isinstance(text, str):
            return self._entities(text)
        if not all(isinstance(t, str) for t in text):
            raise DataError("CrfTagger.predict takes a string or a list of strings (plain text, one sentence each).")
        return [self._entities(t) for t in text]

    def _entities(self, text: str) -> list[dict]:
        from nbkit.data.ner import entity_spans

        tags = self.tags(list(text))
        out = []
        for kind, start, end in entity_spans(tags):
            score = sum(self._tagger.marginal(tags[i], i) for i in range(start, end)) / (end - start)
            out.append({"entity_group": kind, "start": start, "end": end, "word": text[start:end], "score": score})
        return out


def crf_baseline(train_items: Sequence[dict], test_items: Sequence[dict], *, c1: float = 0.05, c2: float = 0.05,
                 max_iter: int = 100, seed: int = 0, save_to=None) -> list[list[str]]:
    """BIO tags predicted for ``test_items`` (``{"tokens", ...}``) by :func:`fit_crf` trained on ``train_items``:
    a linear-chain CRF over character-window features (Lafferty, McCallum & Pereira 2001; CRFsuite through
    ``sklearn-crfsuite``).

    ``seed`` is accepted for a uniform signature: L-BFGS on the CRF's convex objective starts from zero weights,
    so a fit is deterministic (cost and scores measured: docs/ner.md). ``save_to``: a folder the fitted CRF is
    saved in (:meth:`CrfTagger.save`), so the baseline can be shipped and tag plain text.

    Raises:
        DataError: as :func:`fit_crf`. WriteError: ``save_to`` could not be written.
    """
    del seed
    crf = CrfTagger.fit(train_items, c1=c1, c2=c2, max_iter=max_iter)
    if save_to is not None:
        crf.save(save_to)
    return [crf.tags(item["tokens"]) for item in test_items]
