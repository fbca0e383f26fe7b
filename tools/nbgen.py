"""Tiny notebook builder used by tools/make_nb0*.py: cells as ("md" | "code" | "params", source).

Cell ids are the cell's position (``cell-00``, ``cell-01``, ...), so regenerating an
unchanged notebook gives an identical file and diffs show only real edits.
"""
import nbformat


def build(path, cells):
    """Write ``cells`` to ``path`` as a notebook without outputs; ``params`` cells get the papermill tag."""
    nb = nbformat.v4.new_notebook()
    out = []
    for i, (kind, src) in enumerate(cells):
        src = src.strip("\n")
        c = nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src)
        if kind == "params":
            c.metadata["tags"] = ["parameters"]
        c.id = f"cell-{i:02d}"
        out.append(c)
    nb.cells = out
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.validate(nb)
    nbformat.write(nb, path)
