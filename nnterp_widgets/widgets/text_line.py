"""`TextLine`: a line of plain text that wraps, for what a view says (a status, an error).

    line = TextLine()
    line.text = "⚠ MemoryRefused: this request would need about 13 GB more memory ..."
    line.text        # what was said, as given
    line.value       # the HTML drawn: the text escaped, wrapped at the pane's width

ipywidgets' Label keeps one line and cuts the rest with an ellipsis, so a long error (the
memory guard's, with what fits) was never seen whole. The text is escaped (a token's or a
prompt's text is data, never markup) and wraps anywhere when a word is wider than the pane.
"""

from __future__ import annotations

import html

import ipywidgets
import traitlets

__all__ = ["TextLine"]

#: How the line is drawn: wrapped at spaces and newlines, inside a long word if it must.
WRAPPED = '<div style="white-space: pre-wrap; overflow-wrap: anywhere; line-height: 1.4">{}</div>'


class TextLine(ipywidgets.HTML):
    """A line of ``text`` that wraps; ``value`` is the HTML drawn."""

    text = traitlets.Unicode("")

    def __init__(self, text: str = "", **kwargs) -> None:
        kwargs.setdefault("layout", ipywidgets.Layout(flex="1 1 0%", min_width="0"))
        super().__init__(**kwargs)
        self.text = text
        self._draw({"new": self.text})

    @traitlets.observe("text")
    def _draw(self, change) -> None:
        self.value = WRAPPED.format(html.escape(change["new"])) if change["new"] else ""
