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
