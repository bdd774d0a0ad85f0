"""A static, self-contained HTML page of one prompt's view: tree, attention head, lens.

    html = export_html(result, tree, layer=0, head=0)        # a PromptResult + tree dicts
    explorer.to_html("view.html")                            # what an Explorer shows now

The page needs nothing from the network: plotly.js is embedded from the installed
plotly package (``plotly.offline.get_plotlyjs()``), the figures' JSON sits in
``<script type="application/json">`` blocks that one small inline script hands to
``Plotly.newPlot``, and the module tree is plain HTML (``<details>`` to fold), no script.

Token text is data here too: every string that reaches the markup goes through
``html.escape``; the figures' JSON is the same as the widgets' (labels already escaped by
:func:`~.figures.escape_token`), with ``<``, ``>`` and ``&`` written as ``\\u003c`` ...
so no text can close the script block.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

from ..session.panels import PromptResult
from .figures import attention_figure, lens_figure

__all__ = ["export_html", "figure_json", "tree_html"]

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}

_CSS = """
:root { color-scheme: light dark; --bg: #ffffff; --fg: #1a1a1a; --muted: #5f5f5f; --off: #6b6b6b;
        --border: #d0d0d0; --chip: #eeeeee; --accent: #1565c0; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #111111; --fg: #ececec; --muted: #b0b0b0; --off: #9a9a9a; --border: #444444;
          --chip: #2e2e2e; --accent: #64b5f6; }
}
body { margin: 0 auto; max-width: 1200px; padding: 16px; background: var(--bg); color: var(--fg);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
h1 { font-size: 1.3em; margin: 0 0 4px; }
h2 { font-size: 1.1em; margin: 20px 0 6px; }
.meta { color: var(--muted); margin: 0 0 10px; }
code, .chip, .tree { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; }
.tokens { display: flex; flex-wrap: wrap; gap: 3px; align-items: center; }
.chip { white-space: pre; background: var(--chip); border: 1px solid var(--border); border-radius: 3px;
        padding: 0 4px; }
.chip.selected { border-color: var(--accent); box-shadow: inset 0 -2px 0 var(--accent); }
.tree { border: 1px solid var(--border); border-radius: 4px; padding: 6px 8px; font-size: 13px; }
.tree details, .tree .leaf { margin-left: 14px; }
.tree > details { margin-left: 0; }
.tree .leaf { padding-left: 1.1em; }
.tree summary { cursor: pointer; }
.tree .name { font-weight: 600; }
.tree .type, .tree .shape, .tree .dtype { color: var(--muted); }
.tree ul { list-style: none; margin: 0 0 0 14px; padding: 0; }
.tree li.off { color: var(--off); cursor: help; }
.tree li.off .vname { text-decoration: line-through; }
.tree .reason { font-style: italic; }
.figures { display: flex; flex-direction: column; gap: 12px; }
.figure { min-width: 0; }
"""

_BOOT = """
document.querySelectorAll('script[type="application/json"][data-figure]').forEach(function (block) {
  var spec = JSON.parse(block.textContent);
  var target = document.getElementById(block.getAttribute('data-figure'));
  Plotly.newPlot(target, spec.data, spec.layout, {responsive: true, displaylogo: false});
});
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def figure_json(fig: go.Figure) -> str:
    """``fig`` as JSON that is safe inside a ``<script>`` block (no ``<``, ``>``, ``&``)."""
    text = pio.to_json(fig, validate=False)
    for char, escaped in _JSON_ESCAPES.items():
        text = text.replace(char, escaped)
    return text


def _shape(value: dict) -> str:
    shape = value.get("shape")
    return "[" + ", ".join(str(int(n)) for n in shape) + "]" if isinstance(shape, (list, tuple)) else ""


def _value_html(value: dict) -> str:
    name = _e(value.get("name", value.get("id", "")))
    if value.get("available"):
        parts = [f'<li class="value" title="{_e(value.get("id", ""))}"><span class="vname">{name}</span>']
        if value.get("shape") is not None:
            parts.append(f' <span class="shape">{_e(_shape(value))}</span>')
        if value.get("dtype"):
            parts.append(f' <span class="dtype">{_e(value["dtype"])}</span>')
        return "".join(parts) + "</li>"
    reason = value.get("reason") or "not available"
    return (f'<li class="value off" title="{_e(reason)}"><span class="vname">{name}</span>'
            f' <span class="reason">unavailable: {_e(reason)}</span></li>')


def _node_html(node: dict) -> str:
    kids = sorted(node.get("children") or [], key=lambda child: not child.get("standard"))  # stable
    repeat = node.get("repeat") or {}
    opened = " open" if not repeat or int(repeat.get("index", 0)) == 0 else ""
    head = (f'<summary><span class="name">{_e(node.get("name") or node.get("native") or node.get("id"))}</span>'
            f' <span class="type">{_e(node.get("type", ""))}</span></summary>')
    values = node.get("values") or []
    if not values and not kids:  # a leaf module: nothing to unfold
        return f'<div class="leaf" data-id="{_e(node.get("id", ""))}">{head[len("<summary>"):-len("</summary>")]}</div>'
    body = "<ul>" + "".join(_value_html(v) for v in values) + "</ul>" if values else ""
    return f'<details{opened} data-id="{_e(node.get("id", ""))}">{head}{body}{"".join(_node_html(k) for k in kids)}</details>'


def tree_html(tree: Sequence[dict]) -> str:
    """The module tree (``Session.tree`` dicts) as static, text-only HTML."""
    if not tree:
        return '<div class="tree"><p class="meta">no modules</p></div>'
    return '<div class="tree">' + "".join(_node_html(node) for node in tree) + "</div>"


def _show_token(text: str) -> str:
    """A chip's text, as the ModuleTree shows it (js/module_tree.js ``showToken``)."""
    if text == "":
        return "\u2205"
    shown = text.replace("\r", "\u240d").replace("\n", "\u21b5").replace("\t", "\u21e5")
    return shown.replace(" ", "\u2423") if shown.strip(" ") == "" else shown


def export_html(
    result: PromptResult,
    tree: Sequence[dict],
    *,
    layer: int = 0,
    head: int = 0,
    selected_token: int = -1,
    path: str | Path | None = None,
    title: str = "nnterp-widgets",
) -> str:
    """The page for ``result`` (its tree, ``layers[layer]`` head ``head``, its lens).

    Written to ``path`` (UTF-8) when given; the text is returned either way.
    """
    count = len(result.tokens)
    selected = selected_token if 0 <= selected_token < count else -1
    figures = []
    if result.patterns:
        if layer not in result.patterns:
            raise IndexError(f"no attention pattern for layer {layer}; this prompt has layers {sorted(result.patterns)}")
        figures.append(("attention", "attention", attention_figure(result.attention(layer), head, selected)))
    figures.append(("lens", "logit lens", lens_figure(result.lens, selected)))
    chips = "".join(
        f'<span class="chip{" selected" if i == selected else ""}" title="token {i}">{_e(_show_token(text))}</span>'
        for i, text in enumerate(result.tokens.texts)
    )
    blocks = []
    for key, label, fig in figures:
        div = f"nnw-{key}"
        blocks.append(
            f'<section class="figure" aria-label="{_e(label)}"><div id="{div}" class="nnw-figure"></div>'
            f'<script type="application/json" data-figure="{div}">{figure_json(fig)}</script></section>'
        )
    view = f"layers[{layer}] head {head}" if result.patterns else "no attention pattern"
    page = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}: {_e(result.prompt)}</title>",
        f"<style>{_CSS}</style>",
        # plotly.js from the installed package, inline: the page works offline.
        f'<script type="text/javascript">{_plotly_js()}</script>',
        "</head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">prompt <code>{_e(result.prompt)}</code> · {count} tokens · {_e(view)}</p>',
        f'<div class="tokens" aria-label="prompt tokens">{chips}</div>',
        "<h2>Modules and values</h2>",
        tree_html(tree),
        "<h2>Attention and logit lens</h2>",
        f'<div class="figures">{"".join(blocks)}</div>',
        f"<script>{_BOOT}</script>",
        "</body></html>",
    ]
    text = "\n".join(page) + "\n"
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


_PLOTLY_JS: str | None = None


def _plotly_js() -> str:
    global _PLOTLY_JS
    if _PLOTLY_JS is None:
        from plotly.offline import get_plotlyjs

        _PLOTLY_JS = get_plotlyjs().replace("</script", "<\\/script")
    return _PLOTLY_JS
