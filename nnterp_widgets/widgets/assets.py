"""Built front-end assets of the widgets (ES modules for anywidget).

The files live in ``nnterp_widgets/static/`` and are generated from ``js/`` by
``python tools/bundle_js.py`` (committed, so installing the wheel needs no node).

ModuleTree contract (see the docstring at the top of ``js/module_tree.js`` for details).
The Python class is an ``anywidget.AnyWidget`` with ``_esm = MODULE_TREE_ESM`` and these
synced traits (all ``.tag(sync=True)``)::

    tree           = traitlets.List()             # [Node]; JS reads
    selected       = traitlets.Unicode("")        # Value id or ""; JS writes on click
    preview        = traitlets.Dict()             # {} or {id, shape, dtype, stats, rows, cols[, row_tokens]}
    preview_data   = traitlets.Bytes(b"")         # float32 little-endian, len(rows)*cols, row-major
    status         = traitlets.Dict({"state": "idle", "message": ""})  # idle | busy | error
    prompt_tokens  = traitlets.List(traitlets.Unicode())
    selected_token = traitlets.Int(-1)            # JS writes on chip / preview-row click
    theme          = traitlets.Unicode("light")   # JS writes the page's theme: "light" | "dark"

    Node  = {"id": str, "name": str, "native": str, "type": str, "standard": bool,
             "repeat": None | {"group": str, "index": int, "count": int},
             "values": [Value], "children": [Node]}
    Value = {"id": str, "name": str, "available": bool, "reason": str | None,
             "shape": list[int] | None, "dtype": str | None, "writable": bool}
    stats = {"min": float, "max": float, "mean": float, "norm": float}  # None if not finite

``preview_data`` is sent as a binary buffer (ipywidgets does that for ``bytes``), e.g.
``np.ascontiguousarray(slice_, dtype="<f4").tobytes()``; ``preview["rows"][i]`` labels row i
(token i of the prompt unless ``preview["row_tokens"][i]`` says otherwise). The JS writes only
``selected``, ``selected_token`` and ``theme``, never for an unavailable value, and sends no custom
messages. Set ``selected`` from Python to highlight and reveal a value.
"""

from __future__ import annotations

import re
from pathlib import Path

STATIC_DIR: Path = Path(__file__).resolve().parent.parent / "static"

MODULE_TREE_ESM: Path = STATIC_DIR / "module_tree.js"

_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def esm_path(name: str) -> Path:
    """Path of the bundled ES module ``name`` ("module_tree" or "module_tree.js")."""
    stem = name[:-3] if name.endswith(".js") else name
    if not _NAME.match(stem):
        raise ValueError(f"not an asset name: {name!r}")
    return STATIC_DIR / f"{stem}.js"


def esm_text(name: str) -> str:
    """Text of the bundled ES module ``name`` from ``nnterp_widgets/static/``."""
    path = esm_path(name)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path} is missing; build it with `python tools/bundle_js.py`"
        ) from None


__all__ = ["MODULE_TREE_ESM", "STATIC_DIR", "esm_path", "esm_text"]
