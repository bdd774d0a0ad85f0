"""`PositionWindow`: a window of positions over a prompt, moved by mouse or keyboard
(anywidget; front end and its trait contract in ../js/position_window.js).

ipywidgets' range slider moves one edge per arrow key (so the keyboard resized the
window instead of moving it) and its handles carry no accessible name; this control's
thumb is one labelled ARIA slider over the window's first position, with ◀ / ▶ buttons.
"""

from __future__ import annotations

import anywidget
import traitlets

from .assets import POSITION_WINDOW_CSS, POSITION_WINDOW_ESM

__all__ = ["PositionWindow"]


class PositionWindow(anywidget.AnyWidget):
    """``value``: ``(start, stop)``, positions ``start .. stop - 1`` of ``count``; the
    front end moves it keeping its width (set from Python, any width is shown)."""

    _esm = POSITION_WINDOW_ESM
    _css = POSITION_WINDOW_CSS
    value = traitlets.Tuple(traitlets.Int(), traitlets.Int(), default_value=(0, 1)).tag(sync=True)
    count = traitlets.Int(1).tag(sync=True)
    label = traitlets.Unicode("lens positions").tag(sync=True)
