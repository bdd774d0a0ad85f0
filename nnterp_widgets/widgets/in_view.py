"""`InView`: brings a part of the explorer into view (a head clicked in attribution shows
the attention view; a tool's tab opened shows the tool), and keeps the tools' tab strip
on screen (anywidget; front end and its trait contract in ../js/in_view.js).

ipywidgets has no way to scroll the page; this widget draws nothing and scrolls its
explorer's part named by a class when asked::

    keeper = InView()
    keeper.show("nnw-attention")
"""

from __future__ import annotations

import anywidget
import traitlets

from .assets import IN_VIEW_CSS, IN_VIEW_ESM

__all__ = ["InView"]


class InView(anywidget.AnyWidget):
    """``show(name)``: scroll the element of class ``name`` in the same explorer into view."""

    _esm = IN_VIEW_ESM
    _css = IN_VIEW_CSS
    target = traitlets.Unicode("").tag(sync=True)
    asked = traitlets.Int(0).tag(sync=True)

    def show(self, name: str) -> None:
        """Scroll the explorer's part with class ``name`` into view (as little as it takes)."""
        with self.hold_sync():
            self.target = name
            self.asked += 1
