"""A static, self-contained HTML page of one prompt's view: tree, attention head, lens.

    html = export_html(result, tree, layer=0, head=0)        # a PromptResult + tree dicts
    explorer.to_html("view.html")                            # what an Explorer shows now

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
import html
import json
from collections.abc import Sequence
from pathlib import Path

import plotly.io as pio

from ..session.panels import AttentionPanel, LensPanel, PromptResult
from .assets import JS_DIR, MODULE_TREE_CSS, MODULE_TREE_ESM
from .figures import attention_figure, lens_figure

__all__ = ["export_html", "script_json"]

STATIC_MODEL_JS: Path = JS_DIR / "static_model.js"

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
# Text that would end or confuse a <script> element's content in the HTML parser.
_SCRIPT_ENDS = ("</script", "<!--")
_FIGURE_CONFIG = {"displaylogo": False, "responsive": True}

# The page around the widget: the system's colours (the widget has its own palette).
_PAGE_CSS = """
:root { color-scheme: light dark; }
body { margin: 0 auto; max-width: 1200px; padding: 16px; background: Canvas; color: CanvasText;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
h1 { font-size: 1.3em; margin: 0 0 4px; }
h2 { font-size: 1.1em; margin: 20px 0 6px; }
.meta { opacity: 0.8; margin: 0 0 10px; }
.figures { display: flex; flex-direction: column; gap: 12px; }
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def script_json(value) -> str:
    """``value`` as JSON that is safe inside a ``<script>`` block (no ``<``, ``>``, ``&``)."""
    text = json.dumps(value, ensure_ascii=False)
    for char, escaped in _JSON_ESCAPES.items():
        text = text.replace(char, escaped)
    return text


def _module_script() -> str:
    """module_tree.js and the static model, one module (so the model can call its ``render``)."""
    text = MODULE_TREE_ESM.read_text(encoding="utf-8") + "\n" + STATIC_MODEL_JS.read_text(encoding="utf-8")
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
    attention: AttentionPanel | None = None,
    lens: LensPanel | None = None,
    selected_token: int = -1,
    selected: str = "",
    preview: dict | None = None,
    preview_data: bytes = b"",
    path: str | Path | None = None,
    title: str = "nnterp-widgets",
) -> str:
    """The page for ``result``: its tree, head ``head`` of ``attention`` (a layer's panel;
    the result's own by default, which ``layer`` must then name if given) and ``lens``
    (the result's window by default).

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
    plots = [
        pio.to_html(fig, include_plotlyjs=index == 0, full_html=False, div_id=f"nnw-{key}",
                    config=_FIGURE_CONFIG, validate=False)
        for index, (key, fig) in enumerate(figures)
    ]
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
    page = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}: {_e(result.prompt)}</title>",
        f"<style>{_PAGE_CSS}</style>",
        f"<style>{MODULE_TREE_CSS.read_text(encoding='utf-8')}</style>",
        "</head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">prompt <code>{_e(result.prompt)}</code> · {count} tokens · {_e(view)}</p>',
        '<div id="nnw-tree"></div>',
        f'<script type="application/json" id="nnw-model" data-target="nnw-tree">{script_json(model)}</script>',
        "<h2>Attention and logit lens</h2>",
        f'<div class="figures">{"".join(plots)}</div>',
        f'<script type="module">{_module_script()}</script>',
        "</body></html>",
    ]
    text = "\n".join(page) + "\n"
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
