"""The attention view's token view: the prompt as text, each token shaded by how much
the selected token attends to it (as BertViz's and CircuitsVis's text views do).

    html = attention_text_html(panel, head=3, query=7)   # spans, token text escaped

Shaded on the head's own scale with the first token set apart (`figures.head_scale`),
so a head that parks its weight on the first token still shows where the rest goes;
each token's weight is in its tooltip. Tokens after the query (which it cannot see) are
dimmed. Needs the exact pattern (up to `PATTERN_SIDE` tokens, not a zoom window).
"""

from __future__ import annotations

import html

import numpy as np

from ..session.panels import AttentionPanel
from .figures import head_scale
from .tokens import show_token

__all__ = ["HINT", "POOLED", "attention_text_html"]

#: What the view says before a token is selected.
HINT = "select a token (a tree chip or a heatmap row) to shade what it attends to"
#: What it says where the shown pattern is not every exact cell.
POOLED = "the token view needs every exact cell of the pattern: prompts of up to {side} tokens, not zoomed"
#: The shade, as the selection's colour (figures.HIGHLIGHT), with the weight as its alpha.
SHADE = "rgba(255, 45, 120, {alpha:.2f})"


def attention_text_html(panel: AttentionPanel, head: int, query: int, side: int = 512) -> str:
    """The prompt's tokens as spans shaded by ``query``'s weights in ``head`` (a hint
    where no token is selected, a note where the pattern is pooled or a window)."""
    if not (panel.exact and panel.whole):
        return f'<div class="nnw-att-text">{html.escape(POOLED.format(side=side))}</div>'
    count = len(panel.tokens)
    if not 0 <= query < count:
        return f'<div class="nnw-att-text">{html.escape(HINT)}</div>'
    row = np.asarray(panel.head(head), dtype=np.float32)[query]
    top = head_scale(row[None, : query + 1], True)
    spans = []
    for key, text in enumerate(panel.tokens.texts):
        weight = float(row[key]) if key <= query else 0.0
        alpha = min(1.0, weight / top) if key <= query else 0.0
        style = f"background:{SHADE.format(alpha=alpha)}"
        if key > query:
            style += ";opacity:0.35"
        if key == query:
            style += ";outline:1px solid currentColor"
        tip = f"key {key}: weight {weight:.3f}" if key <= query else f"key {key}: after the query"
        spans.append(
            f'<span class="nnw-att-token" style="{style}" title="{html.escape(tip)}">'
            f"{html.escape(show_token(text))}</span>"
        )
    caption = f"query {query} ({html.escape(show_token(panel.tokens.texts[query]))}), head {head}: "
    return f'<div class="nnw-att-text">{caption}{"".join(spans)}</div>'
