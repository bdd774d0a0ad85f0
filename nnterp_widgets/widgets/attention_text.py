"""The attention view's token view: the prompt as text. Hover a token and the tokens it
attends to are shaded by its weights in the shown head (as BertViz's and CircuitsVis's
text views do); a click selects it, and the selection is shaded while nothing is hovered.

    state = text_view_state(panel, head=3)   # plain data: tokens, one byte a weight, scales
    view = AttentionText()
    view.show(state)                          # the browser shades on hover, asking nothing
    view.selected = 7                         # the explorer's selected token

The shading happens in the browser (``js/attention_tokens.js``), so a hover costs no
request. Each query's row is shaded on the head's own scale with the first token set
apart (`figures.head_scale`, computed here per query and shipped with the weights), so a
head that parks its weight on the first token still shows where the rest goes; each
token's weight is its tooltip, and keys after the query (which it cannot see) are dimmed.
It needs the exact pattern: a prompt of up to the session's pattern side, not a zoom
window (`POOLED` says so otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass

import anywidget
import numpy as np
import traitlets

from ..session.panels import PATTERN_SIDE, AttentionPanel
from .assets import ATTENTION_TOKENS_CSS, ATTENTION_TOKENS_ESM
from .figures import HIGHLIGHT, head_scale
from .tokens import show_token

__all__ = ["POOLED", "AttentionText", "TextViewState", "text_view_state"]

#: What the view says where the shown pattern is not every exact cell.
POOLED = "the token view needs every exact cell of the pattern: prompts of up to {side} tokens, not zoomed"


def _rgb(colour: str) -> str:
    """``#rrggbb`` as ``"r, g, b"`` (the JS shades with it at each weight's alpha)."""
    value = colour.lstrip("#")
    return ", ".join(str(int(value[i : i + 2], 16)) for i in (0, 2, 4))


@dataclass(frozen=True)
class TextViewState:
    """What the token view shows: ``tokens`` as displayed; ``weights``, the head's exact
    pattern one byte a cell (``uint8 [n, n]``, row-major, weight x 255); ``scales``, each
    query's colour-scale top (``float32 [n]``); ``caption``; ``note``, said instead of
    the tokens where there is no exact pattern (then the rest is empty)."""

    tokens: tuple[str, ...] = ()
    weights: bytes = b""
    scales: bytes = b""
    caption: str = ""
    note: str = ""

    def row(self, query: int) -> np.ndarray:
        """Query ``query``'s weights, float32 ``[n]`` (as the browser decodes them)."""
        n = len(self.tokens)
        return np.frombuffer(self.weights, np.uint8).reshape(n, n)[query].astype(np.float32) / 255

    def scale(self, query: int) -> float:
        """Query ``query``'s colour-scale top."""
        return float(np.frombuffer(self.scales, "<f4")[query])


def text_view_state(panel: AttentionPanel, head: int, side: int = PATTERN_SIDE) -> TextViewState:
    """The token view of head ``head`` of ``panel`` (a `POOLED` note where the panel is
    not the whole exact pattern)."""
    if not (panel.exact and panel.whole):
        return TextViewState(note=POOLED.format(side=side))
    if not 0 <= head < panel.num_heads:
        raise IndexError(f"head {head} is out of range: layer {panel.layer} has heads 0..{panel.num_heads - 1}")
    cells = np.ascontiguousarray(panel.quantized[head], dtype=np.uint8)
    decoded = panel.head(head)
    scales = np.array([head_scale(decoded[query : query + 1, : query + 1], True) for query in range(len(cells))])
    return TextViewState(
        tokens=tuple(show_token(text) for text in panel.tokens.texts),
        weights=cells.tobytes(),
        scales=scales.astype("<f4").tobytes(),
        caption=f"layers[{panel.layer}] head {head}",
    )


class AttentionText(anywidget.AnyWidget):
    """The token view's widget: shows a `TextViewState`; ``selected`` is the selected
    query (``-1`` for none), written by a click in the browser or by the explorer."""

    _esm = ATTENTION_TOKENS_ESM
    _css = ATTENTION_TOKENS_CSS
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    weights = traitlets.Bytes(b"").tag(sync=True)
    scales = traitlets.Bytes(b"").tag(sync=True)
    shade = traitlets.Unicode(_rgb(HIGHLIGHT)).tag(sync=True)
    caption = traitlets.Unicode("").tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)

    def show(self, state: TextViewState) -> None:
        """Show ``state`` (one message to the browser)."""
        with self.hold_sync():
            self.tokens = list(state.tokens)
            self.weights = state.weights
            self.scales = state.scales
            self.caption = state.caption
            self.note = state.note

    @property
    def state(self) -> TextViewState:
        """What the view shows now."""
        return TextViewState(tuple(self.tokens), self.weights, self.scales, self.caption, self.note)
