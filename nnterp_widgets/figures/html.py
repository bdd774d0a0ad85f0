"""The figures as HTML: each tool's section of a static page, and the page around them.

Pure data in, HTML text out, as the figures are plotly figures: a view's part of the
export (`export.export_html` assembles the page) is one of these sections::

    section = patch_section(sweep, pair, selected=4, plotlyjs=False)
    page("nnterp-widgets", prompt, head=[], body=[section], path="sweep.html")

Token text is data here too: every string in the markup goes through `escape`, and JSON
blocks write ``<``, ``>`` and ``&`` as ``\\u003c`` ... (`script_json`) so no text can close
their script.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path

import plotly.io as pio

from ..interventions import BranchResult, Occlusion, PairLens, PatchResult, SteerResult
from ..requests import THRESHOLD, Attribution, Contributions, GenerationResult
from .attribution import attribution_figure
from .causal import branch_html, continuations_html, occlusion_text
from .common import PLOTLY_CONFIG
from .contributions import contribution_figure, route_picture
from .dataset import DatasetTable, dataset_figure
from .generation import STEP_AXIS, generation_lens_figure, lens_mode_figure
from .patching import PAIR_NAMES, pair_figure, patch_figure
from .shaded import shaded_html
from .tokens import show_token


JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


FIGURE_CONFIG = {**PLOTLY_CONFIG, "responsive": True}


# The page around the widget: the system's colours (the widget has its own palette).
PAGE_CSS = """
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
.shaded { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; line-height: 1.7;
          max-height: 320px; overflow-y: auto; border: 1px solid GrayText; border-radius: 3px; padding: 4px 6px; }
.shaded-token { display: inline-block; white-space: pre; border-radius: 2px; }
"""


def escape(text) -> str:
    return html.escape(str(text), quote=True)


def script_json(value) -> str:
    """``value`` as JSON that is safe inside a ``<script>`` block (no ``<``, ``>``, ``&``)."""
    text = json.dumps(value, ensure_ascii=False)
    for char, escaped in JSON_ESCAPES.items():
        text = text.replace(char, escaped)
    return text


def plot_divs(figures: Sequence[tuple], plotlyjs: bool = True) -> list[str]:
    """``(key, figure)`` s as plotly's HTML (div ``nnw-{key}``); plotly.js inline with the first."""
    return [
        pio.to_html(
            fig,
            include_plotlyjs=plotlyjs and index == 0,
            full_html=False,
            div_id=f"nnw-{key}",
            config=FIGURE_CONFIG,
            validate=False,
        )
        for index, (key, fig) in enumerate(figures)
    ]


def page(title: str, prompt: str, head: Sequence[str], body: Sequence[str], path: str | Path | None) -> str:
    """The whole page around ``body`` (already escaped HTML); written to ``path`` if given."""
    page = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}: {escape(prompt)}</title>",
        f"<style>{PAGE_CSS}</style>",
        *head,
        "</head><body>",
        f"<h1>{escape(title)}</h1>",
        *body,
        "</body></html>",
    ]
    text = "\n".join(page) + "\n"
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


def chips(texts: Sequence[str], start: int = 0, selected: int = -1, kind: str = "") -> str:
    return "".join(
        f'<span class="chip{kind}{" selected" if i == selected else ""}" title="token {i}">{escape(show_token(text))}</span>'
        for i, text in enumerate(texts, start)
    )


def step_row(result: GenerationResult, index: int, shown: int) -> str:
    step = result.steps[index]
    prefill = result.steps[0].unavailable()
    # What this step cannot serve that the prefill can (the pattern, on a decode step).
    lost: dict[str, list[str]] = {}
    for name, reason in step.unavailable().items():
        if name not in prefill:
            lost.setdefault(reason, []).append(name)
    served = "; ".join(
        f'{escape(", ".join(names))}: <span class="off">{escape(reason)}</span>' for reason, names in lost.items()
    )
    top = ", ".join(
        f"{escape(show_token(text))} {float(p):.3f}" for text, p in zip(step.model_texts, step.model_probs, strict=True)
    )
    kind = "prefill" if step.is_prefill else "decode"
    return (
        f'<tr class="step{" selected" if index == shown else ""}" data-step="{index}">'
        f"<td>{index}</td><td>{kind}</td><td>{step.position}</td>"
        f'<td><span class="chip">{escape(show_token(step.text))}</span></td><td>{top}</td>'
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
    tokens = chips(result.tokens.texts[:start]) + chips(
        result.generated.texts, start, start + shown if shown >= 0 else -1, " generated"
    )
    rows = "".join(step_row(result, i, shown) for i in range(len(result.steps)))
    figures = [("generation-lens", generation_lens_figure(result, step))]
    for mode in result.modes.modes():
        if mode != "top-1":  # the generation lens is the top-1 mode
            figures.append((f"generation-{mode}", lens_mode_figure(result.modes, mode, shown, axis_title=STEP_AXIS)))
    settings = ", ".join(f"{key}={value!r}" for key, value in result.sampling.items())
    target = result.modes.target
    return "\n".join(
        [
            "<h2>Generation</h2>",
            f'<p class="meta">{start} prompt tokens · {len(result.steps)} generated · {escape(settings)}'
            + (f" · following {escape(show_token(target.text))}" if target is not None else "")
            + "</p>",
            f'<div class="tokens" aria-label="generated tokens">{tokens}</div>',
            '<table class="steps"><thead><tr><th>step</th><th>kind</th><th>position</th><th>wrote</th>'
            "<th>model top-k</th><th>unavailable on this step</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>",
            f'<div class="figures">{"".join(plot_divs(figures, plotlyjs))}</div>',
        ]
    )


def section(title: str, facts: str, figures: Sequence[tuple], plotlyjs: bool, between: Sequence[str] = ()) -> str:
    """A tool's section: its title, a line of facts (escaped HTML), what comes ``between``
    (token rows), and its figures (`plot_divs`)."""
    return "\n".join(
        [
            f"<h2>{escape(title)}</h2>",
            f'<p class="meta">{facts}</p>',
            *between,
            *([f'<div class="figures">{"".join(plot_divs(figures, plotlyjs))}</div>'] if figures else []),
        ]
    )


def occlusion_section(occlusion: Occlusion, measure: str = "logit") -> str:
    """The prompt shaded by each token's occlusion (`occlusion_text`), as the explorer shows it."""
    return f"<h2>Which tokens the answer needs (occlusion)</h2>\n{shaded_html(occlusion_text(occlusion, measure), ident='nnw-occlusion')}"


def steering_section(steering: SteerResult) -> str:
    """The steered and plain continuations, aligned by step, the differences marked."""
    facts = (
        f"prompt <code>{escape(steering.steered.prompt)}</code> · layers[{steering.layer}] + "
        f"{steering.coefficient:g} × vector (norm {steering.norm:.3g})"
    )
    return section("Steering", facts, [], False, [continuations_html(steering)])


def branch_section(branch: BranchResult) -> str:
    """A branch beside the original continuation."""
    facts = (
        f"step {branch.step}: <code>{escape(show_token(branch.forced_text))}</code> instead of "
        f"<code>{escape(show_token(branch.original_continuation[0]))}</code>"
    )
    return section("Branch", facts, [], False, [branch_html(branch)])


def attribution_section(
    attribution: Attribution, selected: tuple[int, int] | None = None, *, plotlyjs: bool = True
) -> str:
    """Direct logit attribution as HTML: the metric, the largest heads, and the map
    (`attribution_figure`) with ``selected`` outlined."""
    top = ", ".join(f"layers[{l}] head {h} {e:+.3f}" for (l, h), e in attribution.top_heads(3))
    facts = (
        f"prompt <code>{escape(attribution.prompt)}</code> · {escape(attribution.metric_label)} = "
        f"{attribution.metric:.4f} · parts sum to {attribution.total:.4f}"
        + (f" · largest heads: {escape(top)}" if top else f" · {escape(attribution.heads_reason or '')}")
    )
    return section(
        "Who wrote the answer", facts, [("attribution", attribution_figure(attribution, selected))], plotlyjs
    )


def contributions_section(
    contributions: Contributions, threshold: float | None = None, *, plotlyjs: bool = True
) -> str:
    """The contribution graph as HTML: the routes to the last token kept at ``threshold``
    (the paper's 0.04 by default), drawn by `contribution_figure`."""
    picture = route_picture(contributions, THRESHOLD if threshold is None else threshold)
    kept = sum(1 for edge in picture.edges if edge[5] == "attention")
    facts = (
        f"prompt <code>{escape(contributions.prompt)}</code> · {len(contributions.tokens)} tokens · "
        f"{kept} attention edges of share ≥ {picture.threshold:.0%} on the routes to the last token"
    )
    return section("Through which tokens", facts, [("contributions", contribution_figure(picture))], plotlyjs)


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
        f"site <code>{escape(result.site)}</code> · <code>{escape(result.metric_label(show_token))}</code> clean "
        f"{result.clean_metric:.4f}, corrupted {result.corrupted_metric:.4f} · {result.requests} engine requests"
    )
    clean = chips(result.clean.texts, selected=token_selected)
    corrupted = chips(result.corrupted.texts, selected=token_selected)
    tokens = [
        f'<div class="tokens" aria-label="clean prompt tokens">clean {clean}</div>',
        f'<div class="tokens" aria-label="corrupted prompt tokens">corrupted {corrupted}</div>',
    ]
    return section("Activation patching", facts, figures, plotlyjs, tokens)


def dataset_section(table: DatasetTable, selected: int = -1, *, plotlyjs: bool = False) -> str:
    """A batch as HTML: every prompt's row (its text, its answer, the metric; a failed
    prompt's error as its answer) and the metric over the set (`dataset_figure`)."""
    lines = []
    for index, prompt, answer, metric, error in table.rows():
        mark = ' class="selected"' if index == selected else ""
        number = "" if metric is None else f"{metric:.4f}"
        lines.append(
            f"<tr{mark}><td>{index}</td><td>{escape(prompt)}</td><td>{escape(error or answer)}</td><td>{number}</td></tr>"
        )
    answered = sum(error is None for error in table.errors)
    facts = f"{escape(table.kind)} over {len(table.prompts)} prompts · {answered} answered"
    listing = (
        '<table class="dataset"><thead><tr><th>#</th><th>prompt</th><th>answer</th>'
        f"<th>{escape(table.metric)}</th></tr></thead><tbody>{''.join(lines)}</tbody></table>"
    )
    return section("Over a dataset", facts, [("dataset", dataset_figure(table))], plotlyjs, [listing])
