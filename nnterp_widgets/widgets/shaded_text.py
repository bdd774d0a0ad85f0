"""`ShadedTextView`: a `figures.ShadedText` drawn in the browser: the prompt as text,
each token shaded by its value, the strongest listed under it; a click selects a token.

    view = ShadedTextView()
    view.show(occlusion_text(occlusion))   # one message to the browser
    view.selected                          # the token a click selected (-1: none)
"""

from __future__ import annotations

import anywidget
import numpy as np
import traitlets

from ..figures.shaded import FULL_SHADE, NEGATIVE, POSITIVE, ShadedText
from .assets import SHADED_TEXT_CSS, SHADED_TEXT_ESM, TOKEN_CHIPS_CSS, module_text, style_text

__all__ = ["SHADED_TEXT_STYLE", "ShadedTextView"]


#: The view's style sheet: the shared token chips, then its own rules.
SHADED_TEXT_STYLE = style_text(TOKEN_CHIPS_CSS, SHADED_TEXT_CSS)


class ShadedTextView(anywidget.AnyWidget):
    """Shows a `ShadedText` (`show`); ``selected`` is the token a click selected."""

    _esm = module_text(SHADED_TEXT_ESM)  # with the DOM helper it imports inlined
    _css = SHADED_TEXT_STYLE
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    values = traitlets.Bytes(b"").tag(sync=True)
    half = traitlets.Float(1.0).tag(sync=True)
    notes = traitlets.List(traitlets.Unicode()).tag(sync=True)
    strongest = traitlets.List(traitlets.Int()).tag(sync=True)
    unit = traitlets.Unicode("").tag(sync=True)
    caption = traitlets.Unicode("").tag(sync=True)
    negative = traitlets.Unicode(NEGATIVE).tag(sync=True)
    positive = traitlets.Unicode(POSITIVE).tag(sync=True)
    full = traitlets.Float(FULL_SHADE).tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)

    def show(self, shaded: ShadedText, strongest: int = 5) -> None:
        """Show ``shaded``, listing its ``strongest`` tokens under it."""
        with self.hold_sync():
            self.tokens = list(shaded.tokens)
            self.values = np.ascontiguousarray(shaded.values, dtype="<f4").tobytes()
            self.half = shaded.half
            self.notes = list(shaded.notes)
            self.strongest = [position for position, _, _ in shaded.strongest(strongest)]
            self.unit = shaded.unit
            self.caption = shaded.caption

    @property
    def shown_values(self) -> np.ndarray:
        """The values shown, float32 ``[n]`` (as the browser decodes them)."""
        return np.frombuffer(self.values, "<f4")
