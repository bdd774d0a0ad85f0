"""The attention view's token view: the prompt as text. Hover a token and the tokens it
attends to are shaded by its weights in the shown head (as BertViz's and CircuitsVis's
text views do); a click selects it, and the selection is shaded while nothing is hovered.

    state = text_view_state(panel, head=3)   # plain data: tokens, one byte a weight, scales
    view = AttentionText()
    view.show(state)                          # the browser shades on hover, asking nothing
    view.selected = 7                         # the explorer's selected token

The shading happens in the browser (``js/attention_tokens.js``), so a hover costs no
request. Each query's row is shaded on the head's own scale with the first token set
apart (`figures.attention.head_scale`, computed here per query and shipped with the weights), so a
head that parks its weight on the first token still shows where the rest goes; each
token's weight is its tooltip, and keys after the query (which it cannot see) are dimmed.
A prompt of up to the pattern side ships every exact row with its pattern. Past it (the
pattern pooled) or in a zoom window, the view ships the rows it has: the selected query's
exact row, one request (`Session.attention_row`), so there a click shows what a token
attends to.
"""

from __future__ import annotations

from dataclasses import dataclass

import anywidget
import numpy as np
import traitlets

from ..requests.attention import AttentionPattern
from .assets import ATTENTION_TOKENS_CSS, ATTENTION_TOKENS_ESM, TOKEN_CHIPS_CSS, module_text, style_text
from ..figures.common import HIGHLIGHT
from ..figures.attention import head_scale
from ..figures.tokens import show_token

__all__ = ["TOKEN_VIEW_STYLE", "AttentionText", "TextViewState", "text_view_state"]


def _rgb(colour: str) -> str:
    """``#rrggbb`` as ``"r, g, b"`` (the JS shades with it at each weight's alpha)."""
    value = colour.lstrip("#")
    return ", ".join(str(int(value[i : i + 2], 16)) for i in (0, 2, 4))


@dataclass(frozen=True)
class TextViewState:
    """What the token view shows: ``tokens`` as displayed; ``rows``, the queries whose
    weights it holds (every one, or the selected one, or none); ``weights``, those rows of
    the head's exact pattern one byte a cell (``uint8 [len(rows), n]``, row-major, weight x
    255); ``scales``, each row's colour-scale top (``float32 [len(rows)]``); ``caption``."""

    tokens: tuple[str, ...] = ()
    rows: tuple[int, ...] = ()
    weights: bytes = b""
    scales: bytes = b""
    caption: str = ""

    def row(self, query: int) -> np.ndarray:
        """Query ``query``'s weights, float32 ``[n]`` (as the browser decodes them)."""
        n = len(self.tokens)
        cells = np.frombuffer(self.weights, np.uint8).reshape(len(self.rows), n)
        return cells[self.rows.index(query)].astype(np.float32) / 255

    def scale(self, query: int) -> float:
        """Query ``query``'s colour-scale top."""
        return float(np.frombuffer(self.scales, "<f4")[self.rows.index(query)])


def _is_row(panel: AttentionPattern | None) -> bool:
    """Whether ``panel`` is one query's exact weights over every key (`Session.attention_row`)."""
    return (
        panel is not None
        and panel.exact
        and panel.key_start == 0
        and panel.quantized.shape[1:] == (1, len(panel.tokens))
    )


def text_view_state(panel: AttentionPattern, head: int, row: AttentionPattern | None = None) -> TextViewState:
    """The token view of head ``head`` of ``panel``: every query's row where ``panel`` is
    the whole exact pattern; else ``row``'s (one query over every key of the same prompt
    and layer), or the tokens alone."""
    if not 0 <= head < panel.num_heads:
        raise IndexError(f"head {head} is out of range: layer {panel.layer} has heads 0..{panel.num_heads - 1}")
    count = len(panel.tokens)
    if panel.exact and panel.whole:
        source, rows = panel, tuple(range(count))
    elif _is_row(row) and row.layer == panel.layer and row.tokens == panel.tokens:
        source, rows = row, (row.query_start,)
    else:
        source, rows = None, ()
    cells = b""
    scales = np.zeros(0, "<f4")
    if source is not None:
        cells = np.ascontiguousarray(source.quantized[head], dtype=np.uint8).tobytes()
        decoded = source.head(head)
        scales = np.array(
            [head_scale(decoded[index : index + 1, : query + 1], True) for index, query in enumerate(rows)]
        )
    return TextViewState(
        tokens=tuple(show_token(text) for text in panel.tokens.texts),
        rows=rows,
        weights=cells,
        scales=scales.astype("<f4").tobytes(),
        caption=f"layers[{panel.layer}] head {head}",
    )


#: The token view's style sheet: the shared token chips, then its own rules.
TOKEN_VIEW_STYLE = style_text(TOKEN_CHIPS_CSS, ATTENTION_TOKENS_CSS)


class AttentionText(anywidget.AnyWidget):
    """The token view's widget: shows a `TextViewState`; ``selected`` is the selected
    query (``-1`` for none), written by a click in the browser or by the explorer."""

    _esm = module_text(ATTENTION_TOKENS_ESM)  # with the DOM helper it imports inlined
    _css = TOKEN_VIEW_STYLE
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    rows = traitlets.List(traitlets.Int()).tag(sync=True)
    weights = traitlets.Bytes(b"").tag(sync=True)
    scales = traitlets.Bytes(b"").tag(sync=True)
    shade = traitlets.Unicode(_rgb(HIGHLIGHT)).tag(sync=True)
    caption = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)

    def show(self, state: TextViewState) -> None:
        """Show ``state`` (one message to the browser)."""
        with self.hold_sync():
            self.tokens = list(state.tokens)
            self.rows = list(state.rows)
            self.weights = state.weights
            self.scales = state.scales
            self.caption = state.caption

    @property
    def state(self) -> TextViewState:
        """What the view shows now."""
        return TextViewState(tuple(self.tokens), tuple(self.rows), self.weights, self.scales, self.caption)
