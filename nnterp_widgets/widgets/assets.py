"""The widgets' front-end sources, served to anywidget as files.

``nnterp_widgets/js/`` holds the ES modules and style sheets exactly as written: no build
step and no generated copy. anywidget reads a ``pathlib.Path`` given as ``_esm`` / ``_css``
and, with ``ANYWIDGET_HMR=1``, reloads the widget in the page when the file changes.
Each widget's trait contract is the comment at the top of its ``js/*.js``.
"""

from __future__ import annotations

from pathlib import Path

JS_DIR: Path = Path(__file__).resolve().parent.parent / "js"

MODULE_TREE_ESM: Path = JS_DIR / "module_tree.js"
MODULE_TREE_CSS: Path = JS_DIR / "module_tree.css"
STEP_SLIDER_ESM: Path = JS_DIR / "step_slider.js"
STEP_SLIDER_CSS: Path = JS_DIR / "step_slider.css"
POSITION_WINDOW_ESM: Path = JS_DIR / "position_window.js"
POSITION_WINDOW_CSS: Path = JS_DIR / "position_window.css"

__all__ = [
    "JS_DIR",
    "MODULE_TREE_CSS",
    "MODULE_TREE_ESM",
    "POSITION_WINDOW_CSS",
    "POSITION_WINDOW_ESM",
    "STEP_SLIDER_CSS",
    "STEP_SLIDER_ESM",
]
