"""nbkit.views.fonts: Chinese text renders in matplotlib when a CJK font is installed,
and without one the lookup falls back to English labels with the install command."""
from __future__ import annotations

import io
import warnings
from types import SimpleNamespace

import matplotlib
import pytest
from matplotlib import font_manager
from matplotlib.figure import Figure

from nbkit.views import fonts
from nbkit.views.plots import LivePlot, plot_confusion_matrix

GLYPH_MISSING = r"Glyph \d+ .* missing from font"
CHINESE = "正面 负面 混淆矩阵：真实类别 / 预测类别，准确率 −3.5%"  # with U+2212 minus, as matplotlib's ticks draw it


@pytest.fixture(autouse=True)
def fresh_lookup(monkeypatch):
    """Each test starts with no remembered lookup and restores matplotlib's rcParams."""
    monkeypatch.setattr(fonts, "_state", {"looked": False, "family": None, "warned": False})
    with matplotlib.rc_context():
        yield


def render_chinese() -> None:
    """Draw a Chinese title, tick labels and text to PNG with Agg (a bare Figure's
    ``canvas.draw()`` is a no-op, so this saves; Figure: no pyplot state)."""
    fig = Figure(figsize=(4, 3))
    ax = fig.subplots()
    plot_confusion_matrix([[3, 1], [2, 4]], ["负面", "正面"], ax=ax, title="微调后的 BERT")
    ax.text(0.5, 0.5, CHINESE)
    fig.savefig(io.BytesIO(), format="png")


def without_cjk_fonts():
    """matplotlib's font list without the files that hold a CJK family (as if never scanned)."""
    ttflist = font_manager.fontManager.ttflist
    cjk_files = {f.fname for f in ttflist if f.name in fonts.CJK_FAMILIES}
    return [f for f in ttflist if f.fname not in cjk_files]


def test_chinese_renders_with_no_missing_glyph_when_a_cjk_font_is_installed():
    family = fonts.find_cjk_font()
    if family is None:
        pytest.skip("no CJK font installed (sudo apt-get install fonts-noto-cjk; scripts/test.sh does as root)")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=GLYPH_MISSING)
        render_chinese()  # plot_confusion_matrix puts the CJK font first
    assert matplotlib.rcParams["font.sans-serif"][0] == family
    assert font_manager.fontManager.findfont(font_manager.FontProperties(family=["sans-serif"])) \
        == font_manager.fontManager.findfont(font_manager.FontProperties(family=[family]))


def test_the_glyph_check_catches_a_font_without_chinese():
    # Guards the test above: with DejaVu Sans alone the same drawing reports missing glyphs.
    fonts._state.update(looked=True, family=None, warned=True)  # lookup says: nothing installed
    matplotlib.rcParams["font.sans-serif"] = ["DejaVu Sans"]
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=GLYPH_MISSING)
        with pytest.raises(UserWarning, match=GLYPH_MISSING):
            render_chinese()


def test_no_cjk_font_falls_back_with_the_install_hint_once(monkeypatch):
    monkeypatch.setattr(font_manager.fontManager, "ttflist", without_cjk_fonts())
    monkeypatch.setattr(font_manager, "findSystemFonts", lambda *a, **k: [])  # nothing new on disk either
    before = list(matplotlib.rcParams["font.sans-serif"])
    with pytest.warns(fonts.CjkFontWarning, match=r"apt-get install fonts-noto-cjk"):
        assert fonts.use_cjk_font() is None
    assert matplotlib.rcParams["font.sans-serif"] == before
    with warnings.catch_warnings():
        warnings.simplefilter("error", fonts.CjkFontWarning)
        assert fonts.use_cjk_font() is None  # said once per process, not per plot
        plot_confusion_matrix([[1, 0], [0, 1]], ["negative", "positive"], ax=Figure().subplots())


def test_preference_order_and_sans_serif_keeps_its_fallbacks():
    fake = [SimpleNamespace(name=n) for n in ("DejaVu Sans", "WenQuanYi Zen Hei", "Noto Sans CJK SC")]
    assert fonts.find_cjk_font(fake) == "Noto Sans CJK SC"
    assert fonts.find_cjk_font(fake[:2]) == "WenQuanYi Zen Hei"
    assert fonts.find_cjk_font(fake[:1]) is None

    fonts._state.update(looked=True, family="Noto Sans CJK SC")
    rc = {"font.sans-serif": ["DejaVu Sans", "Noto Sans CJK SC", "Arial"]}
    assert fonts.use_cjk_font(rc) == "Noto Sans CJK SC"
    assert rc["font.sans-serif"] == ["Noto Sans CJK SC", "DejaVu Sans", "Arial"]
    assert fonts.use_cjk_font(rc) == "Noto Sans CJK SC"
    assert rc["font.sans-serif"] == ["Noto Sans CJK SC", "DejaVu Sans", "Arial"]  # idempotent


def test_a_font_installed_after_matplotlib_cached_its_list_is_found(monkeypatch):
    if fonts.find_cjk_font() is None:
        pytest.skip("no CJK font installed (sudo apt-get install fonts-noto-cjk)")
    # The cached list predates the font; the files are on disk (findSystemFonts sees them).
    monkeypatch.setattr(font_manager.fontManager, "ttflist", without_cjk_fonts())
    assert fonts.find_cjk_font(font_manager.fontManager.ttflist) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", fonts.CjkFontWarning)
        assert fonts.use_cjk_font() in fonts.CJK_FAMILIES
    assert fonts.find_cjk_font(font_manager.fontManager.ttflist) in fonts.CJK_FAMILIES  # registered


def test_liveplot_and_confusion_matrix_ask_for_the_font(monkeypatch):
    calls = []
    monkeypatch.setattr(fonts, "use_cjk_font", lambda: calls.append(1))
    LivePlot(mode="none").figure()
    plot_confusion_matrix([[1]], ["正面"], ax=Figure().subplots())
    assert len(calls) == 2


def test_image_installs_the_font_and_the_offline_test_base_already_has_it():
    # The real build installs fonts-noto-cjk from apt; the offline test build (no network)
    # must find it in its debootstrap base, or that layer's apt-get update would fail.
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    dockerfile = (repo / "docker" / "Dockerfile").read_text()
    assert "apt-get install -y --no-install-recommends fonts-noto-cjk" in dockerfile
    assert "if ! dpkg -s fonts-noto-cjk" in dockerfile  # skipped when the base has it
    include = next(line for line in (repo / "scripts" / "build_test_image.sh").read_text().splitlines()
                   if line.startswith("INCLUDE="))
    assert "fonts-noto-cjk" in include.split("=", 1)[1].split(",")
    assert "fonts-noto-cjk" in (repo / "scripts" / "browser_deps.sh").read_text()
