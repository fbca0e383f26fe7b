"""Views: the live loss plot (a loop callback; ``nbkit.LivePlot``), the confusion matrix, a CJK font for matplotlib."""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.views.fonts import use_cjk_font
    from nbkit.views.plots import plot_confusion_matrix

__getattr__, __dir__ = lazy_exports(__name__, __file__)
