"""README.zh-CN.md stays in step with README.md: both name the same commands.

Compared: every command line of the fenced ``bash`` blocks (trailing ``# comments``
dropped, since those are translated), every ``scripts/*.sh`` named anywhere, and every
``nbkit <subcommand>`` in code; the Chinese README's Python lines must occur in the English
one (which tests/test_readme.py runs). Each README links to the other at its top.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EN, ZH = REPO / "README.md", REPO / "README.zh-CN.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def code_lines(text: str, lang: str) -> list[str]:
    """Lines of the fenced blocks of one language, without trailing comments."""
    return [re.sub(r"\s+#.*$", "", line).strip() for block_lang, body in FENCE.findall(text)
            if block_lang == lang for line in body.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def scripts(text: str) -> set[str]:
    return set(re.findall(r"\bscripts/[\w-]+\.sh\b", text))


def nbkit_subcommands(text: str) -> set[str]:
    """``nbkit doctor``, ``nbkit run-notebooks``... in code blocks (comments dropped) and inline code."""
    code = " ".join(re.sub(r"(^|\s)#[^\n]*", " ", body) for _, body in FENCE.findall(text)) + " " + " ".join(re.findall(r"`([^`\n]+)`", FENCE.sub("", text)))
    return {f"nbkit {sub}" for sub in re.findall(r"(?:^|[\s/])nbkit (?!import\b)([a-z][\w-]*)", code, re.M)}


def missing(a: set[str] | list[str], b: set[str] | list[str]) -> list[str]:
    return sorted(set(a) - set(b))


@pytest.fixture(scope="module")
def texts() -> tuple[str, str]:
    return EN.read_text(encoding="utf-8"), ZH.read_text(encoding="utf-8")


def test_bash_blocks_hold_the_same_commands(texts):
    en, zh = (code_lines(t, "bash") for t in texts)
    assert en, "README.md has no bash blocks?"
    assert not missing(en, zh), f"README.zh-CN.md lacks these README.md commands: {missing(en, zh)}"
    assert not missing(zh, en), f"README.md lacks these README.zh-CN.md commands: {missing(zh, en)}"


def test_both_name_the_same_scripts_and_nbkit_subcommands(texts):
    en, zh = texts
    for found in (scripts, nbkit_subcommands):
        assert found(en), found.__name__
        assert found(en) == found(zh), (f"only in README.md: {missing(found(en), found(zh))}; "
                                        f"only in README.zh-CN.md: {missing(found(zh), found(en))}")


def test_python_in_the_chinese_readme_is_the_tested_english_code(texts):
    en, zh = (code_lines(t, "python") for t in texts)
    assert zh and not missing(zh, en), missing(zh, en)


def test_each_links_to_the_other_at_the_top(texts):
    en, zh = texts
    assert "(README.zh-CN.md)" in "\n".join(en.splitlines()[:5])
    assert "(README.md)" in "\n".join(zh.splitlines()[:5])


def test_the_comparison_sees_a_command_missing(texts):
    # Guards the tests above against extractors that find nothing or everything.
    en, zh = texts
    dropped = zh.replace("NBKIT_SCALE=cpu scripts/run_notebooks.sh", "")
    assert missing(code_lines(en, "bash"), code_lines(dropped, "bash")) == ["NBKIT_SCALE=cpu scripts/run_notebooks.sh"]
    assert nbkit_subcommands("`nbkit doctor` and\n```bash\n.venv/bin/nbkit run-notebooks --only 01  # nbkit and more\n```\n"
                             "`from nbkit import data`, nbkit/pipeline/") == {"nbkit doctor", "nbkit run-notebooks"}
    assert scripts("run `scripts/test.sh -m gpu`") == {"scripts/test.sh"}


# --- D15: the Chinese README says what the English one says, section by section.
# Each Chinese heading is followed by a line `<!-- en: <the English heading> -->` naming its
# English counterpart, so the map is explicit and a new English section shows up by name.
HEADING = re.compile(r"^(#{2,3}) (.+)$", re.M)
EN_MARK = re.compile(r"^(#{2,3}) .+\n<!-- en: (.+?) -->$", re.M)
GENERATED = re.compile(r"<!-- ([\w-]+):start.*?<!-- \1:end -->", re.S)
NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w,])|(?<![\w.,])\d+\.\d+(?![\w.])")


def sections(text: str, english: bool) -> dict[str, str]:
    """English heading ("## Quickstart") -> that section's text, up to the next heading of any level."""
    found = list((HEADING if english else EN_MARK).finditer(text))
    out = {}
    for i, m in enumerate(found):
        key = f"{m.group(1)} {m.group(2).strip()}"
        out[key] = text[m.end(): found[i + 1].start() if i + 1 < len(found) else len(text)]
    return out


def prose_numbers(section: str) -> set[str]:
    """Numbers such as 19,484 / 1.84 / 0.958 outside code blocks, inline code and generated tables."""
    text = GENERATED.sub("", FENCE.sub("", section))
    return set(NUMBER.findall(re.sub(r"`[^`\n]*`", "", re.sub(r"\]\([^)]*\)", "]", text))))


def test_every_english_section_has_its_chinese_counterpart_in_order(texts):
    en, zh = (sections(t, english) for t, english in zip(texts, (True, False)))
    lacking = [h for h in en if h not in zh]
    assert not lacking, ("README.zh-CN.md has no counterpart for these README.md sections (add a translated "
                         f"heading of the same level followed by a line `<!-- en: <English heading> -->`): {lacking}")
    stale = [h for h in zh if h not in en]
    assert not stale, f"README.zh-CN.md maps headings that README.md no longer has: {stale}"
    assert list(zh) == list(en), "the Chinese sections come in the English order"
    plain = [m.group(0) for m in HEADING.finditer(texts[1]) if m.start() not in {x.start() for x in EN_MARK.finditer(texts[1])}]
    assert not plain, f"README.zh-CN.md headings without an `<!-- en: ... -->` line: {plain}"


def test_both_list_the_same_notebooks(texts):
    en, zh = (re.findall(r"^\| `(\d\d_\w+)` \|", t, re.M) for t in texts)
    assert en and en == zh, (en, zh)
    assert [p.stem for p in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))] == en


def test_each_section_gives_the_same_numbers(texts):
    en, zh = (sections(t, english) for t, english in zip(texts, (True, False)))
    gaps = {h: sorted(prose_numbers(en[h]) - prose_numbers(zh.get(h, ""))) for h in en}
    gaps = {h: v for h, v in gaps.items() if v}
    assert not gaps, f"numbers of README.md missing from the matching README.zh-CN.md section: {gaps}"


def test_both_link_the_same_documents(texts):
    def links(t):
        return {x for x in re.findall(r"\]\(([^)#]+)", t) if not x.startswith("http")} - {"README.md", "README.zh-CN.md"}
    en, zh = (links(t) for t in texts)
    assert en <= zh, f"README.zh-CN.md lacks links to {sorted(en - zh)}"


def test_the_section_map_names_a_missing_section():
    en = "# t\n## A\ntext 1,234\n### B\nx\n## C\n"
    zh = "# t\n## 甲\n<!-- en: A -->\n文 1,234\n## 丙\n<!-- en: C -->\n"
    e, z = sections(en, True), sections(zh, False)
    assert [h for h in e if h not in z] == ["### B"]
    assert prose_numbers(e["## A"]) == {"1,234"} == prose_numbers(z["## A"])
    assert prose_numbers("a `0.5` b [x](docs/1.2.md) 3.14 v2.9 <!-- g:start -->9.99<!-- g:end -->") == {"3.14"}
