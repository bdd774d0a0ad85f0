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
import html
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import plotly.io as pio

from ..requests.attribution import Attribution
from ..requests.contributions import Contributions
from ..requests.branching import BranchResult
from ..requests.occlusion import Occlusion
from ..requests.steering import SteerResult
from ..requests.generation import GenerationResult
from ..requests.patching import PairLens, PatchResult
from ..requests.attention import AttentionPattern
from ..requests.lens import LensGrid
from ..requests.prompt import PromptResult
from .assets import ATTENTION_TOKENS_CSS, ATTENTION_TOKENS_ESM, JS_DIR, MODULE_TREE_CSS, MODULE_TREE_ESM, module_text
from .attention_text import AttentionText, text_view_state
from ..figures.attribution import attribution_figure
from ..figures.contributions import contribution_figure, route_picture
from ..figures.causal import branch_html, continuations_html, occlusion_figure
from ..figures.common import PLOTLY_CONFIG
from ..figures.attention import attention_figure
from ..figures.lens import lens_figure
from ..figures.generation import STEP_AXIS, generation_lens_figure, lens_mode_figure
from ..figures.patching import PAIR_NAMES, pair_figure, patch_figure
from ..figures.tokens import show_token

__all__ = [
    "export_generation_html",
    "export_html",
    "export_patch_html",
    "generation_section",
    "patch_section",
    "script_json",
]

STATIC_MODEL_JS: Path = JS_DIR / "static_model.js"

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
# Text that would end or confuse a <script> element's content in the HTML parser.
_SCRIPT_ENDS = ("</script", "<!--")
_FIGURE_CONFIG = {**PLOTLY_CONFIG, "responsive": True}

# The page around the widget: the system's colours (the widget has its own palette).
_PAGE_CSS = """
:root { color-scheme: light dark; }
body { margin: 0 auto; max-width: 1200px; padding: 16px; background: Canvas; color: CanvasText;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
h1 { font-size: 1.3em; margin: 0 0 4px; }
h2 { font-size: 1.1em; margin: 20px 0 6px; }
.meta { opacity: 0.8; margin: 0 0 10px; }
.figures { display: flex; flex-direction: column; gap: 12px; }
.tokens { display: flex; flex-wrap: wrap; gap: 3px; align-items: center; }
.chip { white-space: pre; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
        border: 1px solid GrayText; border-radius: 3px; padding: 0 4px; }
.chip.generated { border-style: dashed; }
.chip.selected { border-color: Highlight; box-shadow: inset 0 -2px 0 Highlight; }
table.steps { border-collapse: collapse; margin: 6px 0; font-size: 13px; }
table.steps th, table.steps td { border: 1px solid GrayText; padding: 2px 6px; text-align: left; vertical-align: top; }
table.steps tr.selected td { box-shadow: inset 3px 0 0 Highlight; }
table.steps .off { opacity: 0.75; font-style: italic; }
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def script_json(value) -> str:
    """``value`` as JSON that is safe inside a ``<script>`` block (no ``<``, ``>``, ``&``)."""
    text = json.dumps(value, ensure_ascii=False)
    for char, escaped in _JSON_ESCAPES.items():
        text = text.replace(char, escaped)
    return text


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
    path: str | Path | None = None,
    title: str = "nnterp-widgets",
    generation: GenerationResult | None = None,
    step: int | None = None,
    patch: PatchResult | None = None,
    pair: PairLens | None = None,
    attribution: Attribution | None = None,
    attribution_head: tuple[int, int] | None = None,
    contributions: Contributions | None = None,
    threshold: float | None = None,
    occlusion: Occlusion | None = None,
    steering: SteerResult | None = None,
    branch: BranchResult | None = None,
) -> str:
    """The page for ``result``: its tree, head ``head`` of ``attention`` (a layer's panel;
    the result's own by default, which ``layer`` must then name if given) with its token
    view (``attention_row``: the selected query's row where the pattern is pooled), ``lens`` (the
    result's window by default), `generation_section` of ``generation`` at ``step``
    when given, and `patch_section` of a patching sweep ``patch`` (and its ``pair``)
    when given, with ``selected_token`` outlined there too, and `attribution_section` of
    ``attribution`` (with ``attribution_head`` outlined) when given, `contributions_section`
    of ``contributions`` at ``threshold`` when given, and `causal_sections`
    of ``occlusion``, ``steering`` and ``branch`` for those given.

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
    plots = _plots(figures)
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
        f'<p class="meta">prompt <code>{_e(result.prompt)}</code> · {count} tokens · {_e(view)}</p>',
        *([f'<p class="meta ablation">{_e(ablation_line(result))}</p>'] if result.ablate else []),
        '<div id="nnw-tree"></div>',
        '<script type="application/json" id="nnw-model" data-target="nnw-tree" data-bytes="preview_data">'
        f"{script_json(model)}</script>",
        "<h2>Attention and logit lens</h2>",
        f'<div class="figures">{plots[0]}{_token_view(attention, head, chosen, attention_row)}{"".join(plots[1:])}</div>',
        f'<script type="module">{_module_script(MODULE_TREE_ESM, "nnw-model")}</script>',
    ]
    if generation is not None:
        body.append(generation_section(generation, step, plotlyjs=False))
    if patch is not None:  # the selection is a token: no column of a per-head map
        body.append(patch_section(patch, pair, -1 if patch.per_head else selected_token, plotlyjs=False))
    if attribution is not None:
        body.append(attribution_section(attribution, attribution_head, plotlyjs=False))
    if contributions is not None:
        body.append(contributions_section(contributions, threshold, plotlyjs=False))
    body.extend(causal_sections(occlusion, steering, branch))
    head = [f"<style>{css.read_text(encoding='utf-8')}</style>" for css in (MODULE_TREE_CSS, ATTENTION_TOKENS_CSS)]
    return _page(title, result.prompt, head, body, path)


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


def _plots(figures: Sequence[tuple], plotlyjs: bool = True) -> list[str]:
    """``(key, figure)`` s as plotly's HTML (div ``nnw-{key}``); plotly.js inline with the first."""
    return [
        pio.to_html(
            fig,
            include_plotlyjs=plotlyjs and index == 0,
            full_html=False,
            div_id=f"nnw-{key}",
            config=_FIGURE_CONFIG,
            validate=False,
        )
        for index, (key, fig) in enumerate(figures)
    ]


def _page(title: str, prompt: str, head: Sequence[str], body: Sequence[str], path: str | Path | None) -> str:
    """The whole page around ``body`` (already escaped HTML); written to ``path`` if given."""
    page = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}: {_e(prompt)}</title>",
        f"<style>{_PAGE_CSS}</style>",
        *head,
        "</head><body>",
        f"<h1>{_e(title)}</h1>",
        *body,
        "</body></html>",
    ]
    text = "\n".join(page) + "\n"
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


def _chips(texts: Sequence[str], start: int = 0, selected: int = -1, kind: str = "") -> str:
    return "".join(
        f'<span class="chip{kind}{" selected" if i == selected else ""}" title="token {i}">{_e(show_token(text))}</span>'
        for i, text in enumerate(texts, start)
    )


def _step_row(result: GenerationResult, index: int, shown: int) -> str:
    step = result.steps[index]
    prefill = result.steps[0].unavailable()
    # What this step cannot serve that the prefill can (the pattern, on a decode step).
    lost: dict[str, list[str]] = {}
    for name, reason in step.unavailable().items():
        if name not in prefill:
            lost.setdefault(reason, []).append(name)
    served = "; ".join(
        f'{_e(", ".join(names))}: <span class="off">{_e(reason)}</span>' for reason, names in lost.items()
    )
    top = ", ".join(
        f"{_e(show_token(text))} {float(p):.3f}" for text, p in zip(step.model_texts, step.model_probs, strict=True)
    )
    kind = "prefill" if step.is_prefill else "decode"
    return (
        f'<tr class="step{" selected" if index == shown else ""}" data-step="{index}">'
        f"<td>{index}</td><td>{kind}</td><td>{step.position}</td>"
        f'<td><span class="chip">{_e(show_token(step.text))}</span></td><td>{top}</td>'
        f"<td>{served or 'every value served on the prefill'}</td></tr>"
    )


def generation_section(result: GenerationResult, step: int | None = None, *, plotlyjs: bool = True) -> str:
    """A generation as HTML: its tokens (the generated ones dashed, ``step``'s selected),
    a table of the steps (what each wrote, the model's top-k, what it cannot serve that
    the prefill can, and why), the generation lens with ``step`` outlined, and the lens
    modes (entropy; a followed token's probability and rank). ``plotlyjs``: inline
    plotly.js with the first figure (not when the page has it already)."""
    shown = -1 if step is None else result.step(step).index
    start = result.prompt_length
    chips = _chips(result.tokens.texts[:start]) + _chips(
        result.generated.texts, start, start + shown if shown >= 0 else -1, " generated"
    )
    rows = "".join(_step_row(result, i, shown) for i in range(len(result.steps)))
    figures = [("generation-lens", generation_lens_figure(result, step))]
    for mode in result.modes.modes():
        if mode != "top-1":  # the generation lens is the top-1 mode
            figures.append((f"generation-{mode}", lens_mode_figure(result.modes, mode, shown, axis_title=STEP_AXIS)))
    settings = ", ".join(f"{key}={value!r}" for key, value in result.sampling.items())
    target = result.modes.target
    return "\n".join(
        [
            "<h2>Generation</h2>",
            f'<p class="meta">{start} prompt tokens · {len(result.steps)} generated · {_e(settings)}'
            + (f" · following {_e(show_token(target.text))}" if target is not None else "")
            + "</p>",
            f'<div class="tokens" aria-label="generated tokens">{chips}</div>',
            '<table class="steps"><thead><tr><th>step</th><th>kind</th><th>position</th><th>wrote</th>'
            "<th>model top-k</th><th>unavailable on this step</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>",
            f'<div class="figures">{"".join(_plots(figures, plotlyjs))}</div>',
        ]
    )


def export_generation_html(
    result: GenerationResult,
    *,
    step: int | None = None,
    path: str | Path | None = None,
    title: str = "nnterp-widgets",
) -> str:
    """A page of one generation (`generation_section`); written to ``path`` when given."""
    body = [f'<p class="meta">prompt <code>{_e(result.prompt)}</code></p>', generation_section(result, step)]
    return _page(title, result.prompt, [], body, path)


def causal_sections(
    occlusion: Occlusion | None = None, steering: SteerResult | None = None, branch: BranchResult | None = None
) -> list[str]:
    """The occlusion row (`occlusion_figure`), the steered and plain continuations and a
    branch (aligned token tables, differences marked), for those given."""
    found = []
    if occlusion is not None:
        found += [
            "<h2>Which tokens the answer needs (occlusion)</h2>",
            f'<div class="figures">{"".join(_plots([("occlusion", occlusion_figure(occlusion))], False))}</div>',
        ]
    if steering is not None:
        found += [
            "<h2>Steering</h2>",
            f'<p class="meta">prompt <code>{_e(steering.steered.prompt)}</code> · layers[{steering.layer}] + '
            f"{steering.coefficient:g} × vector (norm {steering.norm:.3g})</p>",
            continuations_html(steering),
        ]
    if branch is not None:
        found += [
            "<h2>Branch</h2>",
            f'<p class="meta">step {branch.step}: <code>{_e(show_token(branch.forced_text))}</code> instead of '
            f"<code>{_e(show_token(branch.original_continuation[0]))}</code></p>",
            branch_html(branch),
        ]
    return found


def attribution_section(
    attribution: Attribution, selected: tuple[int, int] | None = None, *, plotlyjs: bool = True
) -> str:
    """Direct logit attribution as HTML: the metric, the largest heads, and the map
    (`attribution_figure`) with ``selected`` outlined."""
    top = ", ".join(f"layers[{l}] head {h} {e:+.3f}" for (l, h), e in attribution.top_heads(3))
    facts = (
        f"prompt <code>{_e(attribution.text)}</code> · {_e(attribution.metric_label)} = "
        f"{attribution.metric:.4f} · parts sum to {attribution.total:.4f}"
        + (f" · largest heads: {_e(top)}" if top else f" · {_e(attribution.heads_reason or '')}")
    )
    figures = [("attribution", attribution_figure(attribution, selected))]
    return "\n".join(
        [
            "<h2>Who wrote the answer</h2>",
            f'<p class="meta">{facts}</p>',
            f'<div class="figures">{"".join(_plots(figures, plotlyjs))}</div>',
        ]
    )


def contributions_section(
    contributions: Contributions, threshold: float | None = None, *, plotlyjs: bool = True
) -> str:
    """The contribution graph as HTML: the routes to the last token kept at ``threshold``
    (the paper's 0.04 by default), drawn by `contribution_figure`."""
    from ..requests.contributions import THRESHOLD

    picture = route_picture(contributions, THRESHOLD if threshold is None else threshold)
    kept = sum(1 for edge in picture.edges if edge[5] == "attention")
    facts = (
        f"prompt <code>{_e(contributions.text)}</code> · {len(contributions.tokens)} tokens · "
        f"{kept} attention edges of share ≥ {picture.threshold:.0%} on the routes to the last token"
    )
    figures = [("contributions", contribution_figure(picture))]
    return "\n".join(
        [
            "<h2>Through which tokens</h2>",
            f'<p class="meta">{facts}</p>',
            f'<div class="figures">{"".join(_plots(figures, plotlyjs))}</div>',
        ]
    )


def patch_section(
    result: PatchResult, pair: PairLens | None = None, selected: int = -1, *, plotlyjs: bool = True
) -> str:
    """A patching sweep as HTML: its facts, both prompts' tokens, the effect map
    (`patch_figure`) and, given, the pair's lens difference (`pair_figure`). ``selected``
    is a column of the map, outlined (a position, marked in the tokens and the pair's map
    too; or a head of a per-head map). ``plotlyjs``: inline plotly.js with the first
    figure (not when the page has it already)."""
    columns = result.patched.shape[1]
    selected = selected if 0 <= selected < columns else -1
    token_selected = -1 if result.per_head else selected
    figures = [("patch", patch_figure(result, selected))]
    if pair is not None:
        figures.append(("pair", pair_figure(pair, token_selected, PAIR_NAMES)))
    facts = (
        f"site <code>{_e(result.site)}</code> · answer <code>{_e(show_token(result.answer_text))}</code> · "
        f"foil <code>{_e(show_token(result.foil_text))}</code> · logit difference clean "
        f"{result.clean_metric:.4f}, corrupted {result.corrupted_metric:.4f} · {result.requests} engine requests"
    )
    clean = _chips(result.clean.texts, selected=token_selected)
    corrupted = _chips(result.corrupted.texts, selected=token_selected)
    return "\n".join(
        [
            "<h2>Activation patching</h2>",
            f'<p class="meta">{facts}</p>',
            f'<div class="tokens" aria-label="clean prompt tokens">clean {clean}</div>',
            f'<div class="tokens" aria-label="corrupted prompt tokens">corrupted {corrupted}</div>',
            f'<div class="figures">{"".join(_plots(figures, plotlyjs))}</div>',
        ]
    )


def export_patch_html(
    result: PatchResult,
    *,
    pair: PairLens | None = None,
    selected: int = -1,
    path: str | Path | None = None,
    title: str = "nnterp-widgets: activation patching",
) -> str:
    """A page of one patching sweep (`patch_section`); written to ``path`` when given."""
    return _page(title, "".join(result.clean.texts), [], [patch_section(result, pair, selected)], path)
