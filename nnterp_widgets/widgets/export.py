"""A static, self-contained HTML page of one prompt's view: tree, attention head, lens.

    html = export_html(result, tree, layer=0, head=0)        # a PromptResult + tree dicts
    explorer.to_html("view.html")                            # what an Explorer shows now
    html = export_patch_html(sweep, pair=pair)               # a PatchResult (+ PairLens)

The page runs the widget's own front end: ``js/module_tree.js`` and its style sheet,
inlined, render the ModuleTree's state saved in the page as JSON, through the read-only
model of ``js/static_model.js``. The figures are the widgets' own, written by plotly's
HTML writer with plotly.js inline (once). Nothing comes from the network.

Token text is data here too: the tree's JS puts text in the DOM with ``textContent``; the
JSON blocks (the model's and plotly's) write ``<``, ``>`` and ``&`` as ``\\u003c`` ... so
no text can close their script; every other string in the markup goes through
``html.escape``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..figures.attention import attention_figure
from ..figures.html import escape, generation_section, page, patch_section, plot_divs, script_json
from ..figures.lens import lens_figure
from ..interventions import PairLens, PatchResult
from ..requests import AttentionPattern, GenerationResult, LensGrid, PromptResult
from .assets import ATTENTION_TOKENS_ESM, JS_DIR, MODULE_TREE_CSS, MODULE_TREE_ESM, module_text
from .attention_text import TOKEN_VIEW_STYLE, AttentionText, text_view_state

__all__ = ["export_generation_html", "export_html", "export_patch_html"]

STATIC_MODEL_JS: Path = JS_DIR / "static_model.js"

# Text that would end or confuse a <script> element's content in the HTML parser.
_SCRIPT_ENDS = ("</script", "<!--")


def _module_script(entry: Path, holder: str) -> str:
    """A widget's module as the widget gets it, and the static model reading the state
    saved in the JSON block ``holder``: one module (so the model can call its ``render``)."""
    text = f"{module_text(entry)}\nconst STATIC_HOLDER = {json.dumps(holder)};\n" + STATIC_MODEL_JS.read_text(
        encoding="utf-8"
    )
    for end in _SCRIPT_ENDS:
        if end in text.lower():
            raise ValueError(f"the front end's source holds {end!r}, which would end its <script> in the page")
    return text


def export_html(
    result: PromptResult,
    tree: Sequence[dict],
    *,
    layer: int | None = None,
    head: int = 0,
    attention: AttentionPattern | None = None,
    attention_row: AttentionPattern | None = None,
    lens: LensGrid | None = None,
    selected_token: int = -1,
    selected: str = "",
    preview: dict | None = None,
    preview_data: bytes = b"",
    sections: Sequence[str] = (),
    path: str | Path | None = None,
    title: str = "nnterp-widgets",
) -> str:
    """The page for ``result``: its tree, head ``head`` of ``attention`` (a layer's pattern;
    the result's own by default, which ``layer`` must then name if given) with its token
    view (``attention_row``: the selected query's row where the pattern is pooled), ``lens``
    (the result's window by default), ``selected_token`` outlined, then ``sections``: each
    view's own part (`figures.html`: a tool's ``export_section()``), in order.

    ``selected``, ``preview`` and ``preview_data`` are the ModuleTree's (what its preview
    pane shows). Written to ``path`` (UTF-8) when given; the text is returned either way.
    """
    count = len(result.tokens)
    chosen = selected_token if 0 <= selected_token < count else -1
    attention = attention if attention is not None else result.attention
    if attention is not None and layer is not None and attention.layer != layer:
        raise IndexError(f"no attention pattern for layer {layer} here; the view holds layers[{attention.layer}]")
    lens = lens if lens is not None else result.lens
    figures = []
    if attention is not None:
        figures.append(("attention", attention_figure(attention, head, chosen)))
    figures.append(("lens", lens_figure(lens, chosen)))
    plots = plot_divs(figures)
    model = {
        "tree": list(tree),
        "selected": selected,
        "preview": dict(preview or {}),
        "preview_data": base64.b64encode(preview_data).decode("ascii"),
        "status": {"state": "idle", "message": ""},
        "prompt_tokens": list(result.tokens.texts),
        "selected_token": chosen,
        "theme": "light",
    }
    view = f"layers[{attention.layer}] head {head}" if attention is not None else "no attention pattern"
    body = [
        f'<p class="meta">prompt <code>{escape(result.prompt)}</code> · {count} tokens · {escape(view)}</p>',
        *([f'<p class="meta ablation">{escape(ablation_line(result))}</p>'] if result.ablate else []),
        '<div id="nnw-tree"></div>',
        '<script type="application/json" id="nnw-model" data-target="nnw-tree" data-bytes="preview_data">'
        f"{script_json(model)}</script>",
        "<h2>Attention and logit lens</h2>",
        f'<div class="figures">{plots[0]}{_token_view(attention, head, chosen, attention_row)}{"".join(plots[1:])}</div>',
        f'<script type="module">{_module_script(MODULE_TREE_ESM, "nnw-model")}</script>',
        *sections,
    ]
    head = [f"<style>{style}</style>" for style in (MODULE_TREE_CSS.read_text(encoding="utf-8"), TOKEN_VIEW_STYLE)]
    return page(title, result.prompt, head, body, path)


def _token_view(attention: AttentionPattern | None, head: int, selected: int, row: AttentionPattern | None) -> str:
    """The attention view's token view of ``head`` (the widget's own front end, hover
    shading in the page), or nothing where there is no pattern."""
    if attention is None:
        return ""
    state = text_view_state(attention, head, row)
    saved = {
        "tokens": list(state.tokens),
        "rows": list(state.rows),
        "weights": base64.b64encode(state.weights).decode("ascii"),
        "scales": base64.b64encode(state.scales).decode("ascii"),
        "shade": AttentionText.shade.default_value,
        "caption": state.caption,
        "selected": selected,
    }
    return (
        '<div id="nnw-att-text"></div>'
        '<script type="application/json" id="nnw-att-model" data-target="nnw-att-text" '
        f'data-bytes="weights,scales" data-local="selected">{script_json(saved)}</script>'
        f'<script type="module">{_module_script(ATTENTION_TOKENS_ESM, "nnw-att-model")}</script>'
    )


def ablation_line(result: PromptResult) -> str:
    """What the page says of ablated heads: which ones, and (where the request measured it)
    the clean top-1's probability without and with them. The lens and the attention
    view on the page are of the ablated run."""
    heads = ", ".join(f"L{layer}H{head}" for layer, head in result.ablate)
    line = f"heads ablated in the lens and attention shown: {heads}"
    delta = result.ablation
    if delta is not None:
        top = lens_token(result.lens, int(delta.ids[0]))
        line += f" · p({top}) {float(delta.clean[0]):.4f} clean → {float(delta.ablated[0]):.4f} ablated"
    return line


def lens_token(lens: LensGrid, token: int) -> str:
    """A token's text as the lens knows it (its top entries), else its id."""
    ids = np.asarray(lens.top_ids)
    found = np.argwhere(ids == token)
    if found.size:
        return repr(lens.top_texts[found[0][0]][found[0][1]][found[0][2]])
    return f"token {token}"


def export_generation_html(
    result: GenerationResult,
    *,
    step: int | None = None,
    path: str | Path | None = None,
    title: str = "nnterp-widgets",
) -> str:
    """A page of one generation (`generation_section`); written to ``path`` when given."""
    body = [f'<p class="meta">prompt <code>{escape(result.prompt)}</code></p>', generation_section(result, step)]
    return page(title, result.prompt, [], body, path)


def export_patch_html(
    result: PatchResult,
    *,
    pair: PairLens | None = None,
    selected: int = -1,
    path: str | Path | None = None,
    title: str = "nnterp-widgets: activation patching",
) -> str:
    """A page of one patching sweep (`patch_section`); written to ``path`` when given."""
    return page(title, "".join(result.clean.texts), [], [patch_section(result, pair, selected)], path)
