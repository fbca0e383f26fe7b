"""Served vs scored NER quality (issue 52, items 6 and 20): what the exported folder's ``pipeline`` gives on plain
text against the characters-as-words call the job used to score, and windows against sentence splitting for
sentences longer than the model's block.

Takes a trained token classifier folder (``--model``, e.g. ``runs/cpu/ner/model`` from
``python -m nbkit.jobs.finetune --task ner --export``) and People's Daily 1998 sentences the run never trained
on (lines after ``--train-lines``, the run's ``corpus_lines``), plus the run's own test split:

- tokenizers: ``stock`` is the BERT tokenizer as exported before (BERT's pre-tokenizer: a Latin word or a digit
  run is one word cut into ``##`` pieces), ``char`` the one nbkit trains with and now exports
  (:func:`nbkit.text.token_classification.char_tokenizer`); ``words`` is the characters given as words
  (``is_split_into_words=True``), the call the job scored before;
- ``latin``: held-out sentences of one window whose plain-text ids differ between ``stock`` and ``words``;
- ``long``: held-out sentences longer than one window, tagged with no stride (the bare call: cut), in windows
  (stride 8, a quarter, a half of the window), and split at 。！？； or also at ，、：, each piece windowed.

Entity-level micro F1 (seqeval) with a 95 % bootstrap interval over sentences. Writes ``--out`` (strict JSON).

    python bench/ner_serving.py --model /tmp/runs/ner/model --train-lines 8000
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def stock_of(tok):
    """The exported tokenizer with nbkit's per-character split taken out (what the export saved before)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from nbkit import jsonio
    from nbkit.text.token_classification import CHAR_SPLIT

    spec = jsonio.loads_strict(tok.backend_tokenizer.to_str())
    pre = spec["pre_tokenizer"]
    if pre.get("type") == "Sequence" and pre["pretokenizers"][:1] == [CHAR_SPLIT]:
        rest = pre["pretokenizers"][1:]
        spec["pre_tokenizer"] = rest[0] if len(rest) == 1 else {"type": "Sequence", "pretokenizers": rest}
    special = {k: v for k, v in tok.special_tokens_map.items() if k != "additional_special_tokens"}
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(jsonio.dumps(spec)),
                                   model_max_length=tok.model_max_length, **special)


def tags_from_spans(text_len: int, spans) -> list[str]:
    """One BIO tag per character from the pipeline's entity spans."""
    tags = ["O"] * text_len
    for s in spans:
        for k in range(int(s["start"]), int(s["end"])):
            tags[k] = ("B-" if k == int(s["start"]) else "I-") + s["entity_group"]
    return tags


def pack(pieces, tok, body: int) -> list[tuple[int, str]]:
    """Neighbouring pieces joined while they fit in ``body`` tokens."""
    out = []
    for o, p in pieces:
        if out and len(tok(out[-1][1] + p, add_special_tokens=False)["input_ids"]) <= body:
            out[-1] = (out[-1][0], out[-1][1] + p)
        else:
            out.append((o, p))
    return out


def tag_split(pipe, texts, marks: str, stride: int, body: int | None = None) -> list:
    """Tags per character: each text, short ones too, cut into pieces at ``marks`` (``body``: neighbours packed up
    to ``body`` tokens), each piece tagged (windowed if still long): the variants nbkit's ``tag_text`` is not."""
    from nbkit.evaluate.inference import clause_pieces

    rows = []
    tok = pipe.tokenizer
    for text in texts:
        pieces = clause_pieces(text, marks)
        if body is not None:
            pieces = pack(pieces, tok, body)
        outs = pipe([p for _, p in pieces], stride=stride)
        spans = [{**s, "start": s["start"] + o, "end": s["end"] + o} for (o, _), sp in zip(pieces, outs) for s in sp]
        rows.append(tags_from_spans(len(text), spans))
    return rows


def score(gold, pred, n_boot: int) -> dict:
    from nbkit.evaluate import ner

    r = ner.entity_scores(gold, pred)
    iv = ner.entity_f1_interval(gold, pred, n_boot=n_boot, seed=0) if n_boot else None
    return {"f1": r["f1"] and round(r["f1"], 4), "precision": r["precision"] and round(r["precision"], 4),
            "recall": r["recall"] and round(r["recall"], 4),
            "f1_interval": iv and [round(iv[0], 4), round(iv[1], 4)], "n_sentences": len(gold),
            "n_entities": sum(t.startswith("B-") for g in gold for t in g)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--train-lines", type=int, default=8000, help="the run's corpus_lines: later lines are held out")
    ap.add_argument("--max-latin", type=int, default=300)
    ap.add_argument("--max-long", type=int, default=150)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer, pipeline

    from nbkit import jsonio
    from nbkit.data.ner import load_peoples_daily_ner
    from nbkit.evaluate.inference import CLAUSE_MARKS, tag_text
    from nbkit.text.token_classification import AGGREGATION, char_tokenizer

    torch.set_num_threads(1)
    t0 = time.time()
    model = AutoModelForTokenClassification.from_pretrained(args.model).eval()
    exported = AutoTokenizer.from_pretrained(args.model)
    max_length = int(exported.model_max_length)
    body = max_length - 2
    toks = {"char": char_tokenizer(exported), "stock": stock_of(exported)}
    pipes = {k: pipeline("token-classification", model=model, tokenizer=t, aggregation_strategy=AGGREGATION,
                         device="cpu") for k, t in toks.items()}
    data = load_peoples_daily_ner(seed=0)
    pool = [it for split in data.splits.values() for it in split
            if int(str(it["id"]).split("-")[1]) > args.train_lines]
    pool.sort(key=lambda it: str(it["id"]))
    words_of = lambda t: toks["stock"](list(t), is_split_into_words=True, add_special_tokens=False)["input_ids"]  # noqa: E731
    latin, long = [], []
    for it in pool:
        text = "".join(it["tokens"])
        n = len(words_of(text))
        if n > body:
            if len(long) < args.max_long:
                long.append(it)
        elif len(latin) < args.max_latin and toks["stock"](text, add_special_tokens=False)["input_ids"] != words_of(text):
            latin.append(it)
    out = {"model": args.model, "max_length": max_length, "train_lines": args.train_lines,
           "pool_sentences": len(pool), "date": time.strftime("%Y-%m-%d"),
           "machine": "shared 2-core CPU container (other jobs running), torch threads 1"}

    # 1. Latin letters and digits: one window each, so only the tokenization differs
    texts = ["".join(it["tokens"]) for it in latin]
    gold = [list(it["tags"]) for it in latin]
    words = [tags_from_spans(len(t), s) for t, s in
             zip(texts, pipes["stock"]([list(t) for t in texts], is_split_into_words=True, delimiter=""))]
    arms = {"words (characters as words, the job's call before)": words}
    for k, label in (("stock", "plain text, exported tokenizer before"), ("char", "plain text, exported tokenizer now")):
        arms[label] = [tags_from_spans(len(t), s) for t, s in zip(texts, pipes[k](texts))]
    out["latin"] = {name: {**score(gold, pred, args.n_boot), "n_tagged_differently_from_words":
                           sum(p != w for p, w in zip(pred, words))} for name, pred in arms.items()}
    print("latin", jsonio.dumps(out["latin"]), flush=True)

    # 2. long sentences: the bare call cuts; windows; sentence splitting
    texts = ["".join(it["tokens"]) for it in long]
    gold = [list(it["tags"]) for it in long]
    lens = sorted(len(t) for t in texts)
    arms = {"cut (no stride: the bare call)": [tags_from_spans(len(t), s) for t, s in zip(texts, pipes["char"](texts))]}
    for stride in (8, max_length // 4, max_length // 2):
        arms[f"windows, stride {stride}"] = [tags_from_spans(len(t), s)
                                             for t, s in zip(texts, pipes["char"](texts, stride=stride))]
    arms["split at 。！？；, pieces windowed (stride %d)" % (max_length // 4)] = tag_split(
        pipes["char"], texts, "。！？；!?;", max_length // 4)
    arms["split at 。！？；，、：, pieces windowed (stride %d): tag_text" % (max_length // 4)] = [
        tags_from_spans(len(t), s) for t, s in zip(texts, tag_text(pipes["char"], texts, stride=max_length // 4))]
    arms["split at 。！？；，、：, packed up to the window (stride %d)" % (max_length // 4)] = tag_split(
        pipes["char"], texts, CLAUSE_MARKS, max_length // 4, body=body)
    arms["split at 。！？；，、：, packed up to half the window (stride %d)" % (max_length // 4)] = tag_split(
        pipes["char"], texts, CLAUSE_MARKS, max_length // 4, body=body // 2)
    out["long"] = {"n_sentences": len(texts), "characters_median": lens[len(lens) // 2], "characters_max": lens[-1],
                   "arms": {name: score(gold, pred, args.n_boot) for name, pred in arms.items()}}
    out["long"]["longest"] = [{"characters": len(texts[i]), "entities": sum(t.startswith("B-") for t in gold[i]),
                               **{name: score([gold[i]], [pred[i]], 0)["f1"] for name, pred in arms.items()}}
                              for i in sorted(range(len(texts)), key=lambda i: -len(texts[i]))[:3]]
    print("long", jsonio.dumps(out["long"]), flush=True)
    # 3. the run's own test split (item 20): the three calls, long sentences windowed as the job does
    test = load_peoples_daily_ner(lines=args.train_lines, seed=0).splits["test"]
    texts = ["".join(it["tokens"]) for it in test]
    gold = [list(it["tags"]) for it in test]
    stride = max_length // 4
    arms = {"words (characters as words, the job's call before)": [tags_from_spans(len(t), s) for t, s in zip(
        texts, pipes["stock"]([list(t) for t in texts], is_split_into_words=True, delimiter="", stride=stride))]}
    for k, label in (("stock", "plain text, exported tokenizer before"), ("char", "plain text, exported tokenizer now")):
        arms[label] = [tags_from_spans(len(t), s) for t, s in zip(texts, pipes[k](texts, stride=stride))]
    arms["now, long sentences split at 。！？；，、：: tag_text"] = [
        tags_from_spans(len(t), s) for t, s in zip(texts, tag_text(pipes["char"], texts, stride=stride))]
    arms["now, every sentence split at 。！？；，、："] = tag_split(pipes["char"], texts, CLAUSE_MARKS, stride)
    words = arms["words (characters as words, the job's call before)"]
    out["test_split"] = {name: {**score(gold, pred, args.n_boot), "n_tagged_differently_from_words":
                                sum(p != w for p, w in zip(pred, words))} for name, pred in arms.items()}
    print("test", jsonio.dumps(out["test_split"]), flush=True)
    out["seconds"] = round(time.time() - t0, 1)
    path = Path(args.out or ROOT / "bench" / "results" / f"ner_serving_cpu_{out['date']}.json")
    jsonio.write_json(path, out)
    print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
