"""MediaWiki markup stripped from corpus texts by regexes (a Wikipedia dump as users have it).

:func:`strip_markup` keeps what a reader of the rendered page reads: templates, tables, ``<ref>``, file and
category links, comments and formatting go; links keep their label, a few templates their text, zhwiki's
``-{zh-hans:...;zh-hant:...}-`` its zh-hans form (the full list: docs/corpus.md, step 1). Unbalanced markup is
left as written. Regexes, not mwparserfromhell, which is far slower (docs/corpus.md).
"""
from __future__ import annotations

import html
import re

#: A text holding none of these characters holds no markup (a character class: the fastest search).
_HINT = re.compile(r"[\[{'<&_\n]")
#: A text matching none of these holds no markup: returned as is.
_ANY = re.compile(r"\[\[|\{\{|\{\||''|<[a-zA-Z!/]|-\{|__[A-Z]|&[a-zA-Z#]|\[(?:https?:)?//|^[=*#:;]", re.M)

_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_DROP_TAGS = ("ref", "math", "chem", "ce", "gallery", "timeline", "score", "graph", "mapframe", "imagemap",
              "syntaxhighlight", "source", "templatedata", "templatestyles", "hiero", "inputbox", "categorytree")
_DROPPED = re.compile(r"<(%s)\b[^>]*?(?:/>|>.*?</\1\s*>)" % "|".join(_DROP_TAGS), re.S | re.I)
_REFERENCES = re.compile(r"<references\b[^>]*?(?:/>|>.*?</references\s*>)", re.S | re.I)
_TEMPLATE = re.compile(r"\{\{([^{}]*)\}\}")
_TABLE = re.compile(r"\n[ \t]*\{\|(?:[^{]|\{(?!\|))*?\n[ \t]*\|\}[^\n]*")   # the patterns of lines start with
# "\n" (the text gets one in front) rather than a multiline "^": a literal first lets re skip ahead fast
_LINK = re.compile(r"\[\[([^\[\]|]*)(?:\|([^\[\]]*))?\]\]")
_EXTERNAL = re.compile(r"\[(?:https?:)?//[^\s\]]+(?:[ \t]+([^\]]*))?\]")
_CONVERT = re.compile(r"-\{(.*?)\}-", re.S)
_FLAGS = re.compile(r"^\s*([AHRDTN-]{1,4})\s*\|")
_VARIANT = re.compile(r"^\s*(zh(?:-[a-z]+)?)\s*:(.*)$", re.S)
_BR = re.compile(r"<br\s*/?>", re.I)
_TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9]*(?:\s[^<>]*)?/?>")
_HEADING = re.compile(r"\n(={1,6})[ \t]*([^\n]*?)[ \t]*\1[ \t]*(?=\n|\Z)")
_LIST = re.compile(r"\n[*#:;]+[ \t]*(?=\S)")
_MAGIC = re.compile(r"__[A-Z]{3,}__")
_REDIRECT = re.compile(r"^\s*#\s*(?:redirect|重定向)\b", re.I)
_TRAILING = re.compile(r"[ \t]+(?=\n|\Z)")
_BLANK_LINES = re.compile(r"\n{3,}")

#: Namespaces whose links are not text (file, category, media), in English and Chinese.
_HIDDEN_NS = {"file", "image", "media", "category", "文件", "檔案", "档案", "图像", "圖像", "媒体", "媒體",
              "分类", "分類", "模板", "template"}
_INTERWIKI = re.compile(r"^[a-z]{2,3}(?:-[a-z]+)*$")
_PREFERRED = ("zh-hans", "zh-cn", "zh")


def is_redirect(text: str) -> bool:
    """True for a redirect page (``#REDIRECT [[X]]``, ``#重定向 [[X]]``): markup only, no prose."""
    return bool(_REDIRECT.match(text))


def _template(m: re.Match) -> str:
    parts = m.group(1).split("|")
    name = parts[0].strip().lower()
    args = [p for p in parts[1:] if "=" not in p]
    if name == "lang" and len(args) >= 2:
        return args[1]
    if (name.startswith(("lang-", "link-")) or name in ("le", "nowrap", "nobr")) and args:
        return args[0]
    return ""


def _link(m: re.Match) -> str:
    target, label = m.group(1).strip(), m.group(2)
    prefix, colon, _ = target.partition(":")
    if colon and (prefix.strip().lower() in _HIDDEN_NS or _INTERWIKI.match(prefix.strip())):
        return ""   # a file, a category, an interwiki link; [[:en:X|Y]] (leading colon) is shown
    if label is None or not label.strip():   # [[a]], or the pipe trick [[a|]]
        return target.lstrip(":")
    return label


def _convert(m: re.Match) -> str:
    inner = m.group(1)
    flags = _FLAGS.match(inner)
    if flags:
        if set(flags.group(1)) & set("HT-"):   # a hidden rule, a title rule, a rule removal: nothing shown
            return ""
        inner = inner[flags.end():]
    variants: dict[str, str] = {}
    for part in inner.split(";"):
        v = _VARIANT.match(part)
        if v:
            variants.setdefault(v.group(1), v.group(2).strip())
    if not variants:
        return inner
    return next((variants[k] for k in _PREFERRED if k in variants), next(iter(variants.values())))


def _until_stable(pattern: re.Pattern, repl, text: str) -> str:
    while True:
        new = pattern.sub(repl, text)
        if new == text:
            return text
        text = new


def strip_markup(text: str) -> str:
    """``text`` with MediaWiki markup removed; a text without markup is returned as is.

    Runs of blank lines become one empty line; whitespace is stripped at the ends only when markup was found.
    """
    if not _HINT.search(text) and text[:1] not in "=*#:;" or not _ANY.search(text):
        return text
    s = _COMMENT.sub("", "\n" + text)
    s = _REFERENCES.sub("", _DROPPED.sub("", s))
    if "-{" in s:   # before templates: a conversion's braces inside an infobox would hide the template
        s = _CONVERT.sub(_convert, s)
    while True:  # innermost templates and tables first: a table inside an infobox, a template in a table
        new = _until_stable(_TEMPLATE, _template, s)
        new = _TABLE.sub("\n", new) if "{|" in new else new
        if new == s:
            break
        s = new
    s = _until_stable(_LINK, _link, s)   # a link in a file caption: the inner one first
    s = _EXTERNAL.sub(lambda m: m.group(1) or "", s)
    s = _TAG.sub("", _BR.sub("\n", s))
    if "''" in s:
        s = s.replace("'''''", "").replace("'''", "").replace("''", "")
    s = _HEADING.sub(r"\n\2", s)
    s = _LIST.sub("\n", s)
    s = _MAGIC.sub("", s)
    if "&" in s:
        s = html.unescape(s)
    return _BLANK_LINES.sub("\n\n", _TRAILING.sub("", s)).strip()
