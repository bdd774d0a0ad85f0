"""Pictures of the causal tools: pure functions from their data to plotly figures or HTML.

    fig = occlusion_figure(occlusion)              # the saliency row over the prompt's tokens
    text = occlusion_text(occlusion)               # the same as shaded prompt text (any length)
    html = continuations_html(steer_result)        # steered and plain, aligned, differences marked
    html = branch_html(branch_result)              # the original and the branch from the forced step

Token text reaches HTML only through `show_token` then `html.escape`, and a figure only
through `escape_token` in data arrays: markup in a token is shown as text.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from ..interventions.branching import BranchResult
from ..interventions.occlusion import Occlusion
from ..interventions.steering import SteerResult
from .common import effect_heatmap, escape_token
from .shaded import ShadedText
from .tokens import show_token

__all__ = ["branch_html", "continuations_html", "occlusion_figure", "occlusion_text"]

#: The class of a token cell that differs from the other row's at the same step.
DIFFERS = "nnw-differs"
_STYLE = (
    "<style>.nnw-cont{border-collapse:collapse;font-family:var(--jp-code-font-family,monospace);font-size:12px}"
    ".nnw-cont td,.nnw-cont th{padding:1px 4px;border:1px solid var(--jp-border-color2,#ddd);white-space:pre}"
    ".nnw-cont th{text-align:left;font-weight:600}"
    f".nnw-cont .{DIFFERS}{{background:var(--jp-warn-color3,#fdd);font-weight:600}}</style>"
)


def _cell(text: str, differs: bool) -> str:
    marked = f' class="{DIFFERS}"' if differs else ""
    return f"<td{marked}>{html.escape(show_token(text))}</td>"


def _rows(rows: list[tuple[str, tuple[str, ...]]], caption: str) -> str:
    width = max(len(tokens) for _, tokens in rows)
    body = []
    for index, (name, tokens) in enumerate(rows):
        other = rows[1 - index][1] if len(rows) == 2 else tokens
        cells = "".join(
            _cell(tokens[i], i >= len(other) or tokens[i] != other[i]) if i < len(tokens) else "<td></td>"
            for i in range(width)
        )
        body.append(f"<tr><th>{html.escape(name)}</th>{cells}</tr>")
    head = "".join(f"<th>{i}</th>" for i in range(width))
    return f'{_STYLE}<table class="nnw-cont" aria-label="{html.escape(caption)}"><tr><th>step</th>{head}</tr>{"".join(body)}</table>'


def continuations_html(result: SteerResult) -> str:
    """The steered and the plain continuation, one token a cell, aligned by step; a cell
    that differs from the other row's is marked (`DIFFERS`)."""
    caption = f"steered at layers[{result.layer}] × {result.coefficient:g} against plain"
    return _rows(
        [(f"steered ×{result.coefficient:g}", result.steered.generated.texts), ("plain", result.plain.generated.texts)],
        caption,
    )


def branch_html(result: BranchResult) -> str:
    """The original continuation and the branch, from the forced step on, aligned."""
    caption = f"branch at step {result.step}"
    return _rows(
        [("original", tuple(result.original_continuation)), (f"branch at step {result.step}", result.continuation)],
        caption,
    )


def _occluded_how(occlusion: Occlusion) -> str:
    return "replaced by " + show_token(occlusion.neutral_text) if occlusion.mode == "replace" else "dropped"


def occlusion_text(occlusion: Occlusion, measure: str = "logit") -> ShadedText:
    """The prompt as text, each token shaded by the change in the answer's logit
    (``measure="logit"``) or probability when it is occluded: blue, the answer needed it.
    A token not occluded alone (a partial answer's coarse block) says so in its tooltip."""
    delta = occlusion.delta_logit if measure == "logit" else occlusion.delta_prob
    notes = []
    for i, (text, exact) in enumerate(zip(occlusion.tokens.texts, occlusion.exact, strict=True)):
        logit, prob = float(occlusion.delta_logit[i]), float(occlusion.delta_prob[i])
        said = "not occluded yet" if not np.isfinite(logit) else f"Δ logit {logit:+.3f} · Δ probability {prob:+.4f}"
        notes.append(f"{i}: {show_token(text)} · {said}" + ("" if exact else " (its block)"))
    answer = show_token(occlusion.answer_text)
    caption = (
        f"each token {_occluded_how(occlusion)}: the change in {answer}'s {measure} "
        f"(logit {occlusion.clean_logit:.2f}, probability {occlusion.clean_prob:.3f}); blue: {answer} needed it"
    )
    unit = "Δ " + measure
    return ShadedText.of(occlusion.tokens.texts, delta, caption=caption, unit=unit, notes=notes)


def occlusion_figure(occlusion: Occlusion, measure: str = "logit") -> go.Figure:
    """The saliency row: one cell per input token, its colour the change in the answer's
    logit (``measure="logit"``) or probability (``"probability"``) when that token is
    occluded; negative (blue): the answer needed it. Hover: the token, both changes."""
    delta = occlusion.delta_logit if measure == "logit" else occlusion.delta_prob
    z = np.asarray(delta, dtype=np.float64)[None, :]
    count = z.shape[1]
    finite = np.abs(z[np.isfinite(z)])  # a partial answer has NaN where nothing is occluded yet
    half = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    # A token not occluded alone shows its block's value, and says so on hover.
    labels = [
        escape_token(t) + ("" if exact else " (its block)")
        for t, exact in zip(occlusion.tokens.texts, occlusion.exact, strict=True)
    ]
    custom = np.empty((1, count, 3), dtype=object)
    custom[0, :, 0] = labels
    custom[0, :, 1] = occlusion.delta_logit
    custom[0, :, 2] = occlusion.delta_prob
    how = "replaced by " + escape_token(occlusion.neutral_text) if occlusion.mode == "replace" else "dropped"
    fig = go.Figure(
        effect_heatmap(
            z,
            half,
            "Δ " + measure,
            customdata=custom,
            xgap=1,
            hovertemplate="%{customdata[0]}<br>Δ logit %{customdata[1]:+.3f}<br>Δ probability %{customdata[2]:+.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=dict(
            text=f"occlusion: each token {how}; answer {escape_token(occlusion.answer_text)} "
            f"(logit {occlusion.clean_logit:.2f}, probability {occlusion.clean_prob:.3f})",
            font=dict(size=13),
        ),
        height=190,
        width=min(1000, 160 + 40 * count),
        margin=dict(l=40, r=20, t=50, b=70),
        xaxis=dict(tickmode="array", tickvals=list(range(count)), ticktext=labels, tickangle=-45),
        yaxis=dict(visible=False),
        uirevision="occlusion",
    )
    return fig
