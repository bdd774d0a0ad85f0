"""A batch's answers as a table and a picture: `DatasetTable`, `dataset_table`, `dataset_figure`.

    table = dataset_table(session.each(prompts).prompt(window=1).result())
    table.rows()          # [(index, prompt, answer, metric, error)], what the dataset view lists
    dataset_figure(table) # the metric per layer where there is one (the lens's agreement
                          # with the model), else the metric's histogram over the prompts

Each kind of batch says what its rows show: the model's answer and its probability (a
prompt or lens batch), the attribution's metric, a generation's text and its length, a
steering's two continuations and where they part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from ..requests import Results

#: A failed prompt's row: its answer column says why.
FAILED = "failed: {error}"


@dataclass(frozen=True)
class DatasetTable:
    """What the dataset view lists and draws for one batch.

    ``prompts`` / ``answers``: each prompt's text and what it answered, as text (a row
    holds text, never markup); ``metrics``: float64 ``[prompts]``, the row's number
    (NaN where the prompt failed or is not answered yet), named ``metric``; ``errors``:
    each failed prompt's message, else None. ``curve``: ``(name, [layers] float64)``, the
    metric's per-layer mean where the batch has one, else None.
    """

    kind: str
    prompts: tuple[str, ...]
    answers: tuple[str, ...]
    metric: str
    metrics: np.ndarray
    errors: tuple[str | None, ...]
    curve: tuple[str, np.ndarray] | None = None

    def rows(self) -> list[tuple[int, str, str, float | None, str | None]]:
        """``(index, prompt, answer, metric, error)`` per prompt (metric None where NaN)."""
        return [
            (i, p, a, None if math.isnan(m) else float(m), e)
            for i, (p, a, m, e) in enumerate(zip(self.prompts, self.answers, self.metrics, self.errors, strict=True))
        ]


def _text(prompt, tokens=None) -> str:
    if isinstance(prompt, str):
        return prompt
    return "".join(tokens.texts) if tokens is not None else " ".join(str(i) for i in prompt)


def dataset_table(results: Results, tokenizer=None) -> DatasetTable:
    """The rows of ``results`` (see `DatasetTable`); ``tokenizer`` decodes the model's
    top-1 token where a result does not carry its text."""
    kind = results.kind
    answers, metrics, errors, prompts = [], [], [], []
    metric = {
        "prompt": "p(answer)",
        "lens": "p(answer)",
        "attribute": "metric",
        "generate": "tokens written",
        "steer": "first step that differs",
    }.get(kind)
    if metric is None:
        raise TypeError(f"the dataset view lists prompt, lens, attribute, generate and steer batches; got {kind}")
    for prompt, item in zip(results.prompts, results.items, strict=True):
        tokens = getattr(item, "tokens", None)
        prompts.append(_text(prompt, tokens if not isinstance(item, BaseException) else None))
        if item is None or isinstance(item, BaseException):
            answers.append(FAILED.format(error=item) if item is not None else "")
            metrics.append(math.nan)
            errors.append(str(item) if item is not None else None)
            continue
        errors.append(None)
        if kind in ("prompt", "lens"):
            grid = getattr(item, "lens", item)
            said = int(grid.model_top_ids[0])
            answers.append(tokenizer.decode([said]) if tokenizer is not None else str(said))
            metrics.append(float(grid.model_top_probs[0]))
        elif kind == "attribute":
            answers.append(item.answer_text)
            metrics.append(float(item.metric))
        elif kind == "generate":
            answers.append(item.text)
            metrics.append(float(len(item.generated)))
        else:
            answers.append(f"{item.steered.text} | {item.plain.text}")
            metrics.append(math.nan if item.divergence is None else float(item.divergence))
    curve = None
    if kind in ("prompt", "lens") and results.answered:
        curve = ("lens top-1 = the model's answer", results.mean()["agrees_with_model"].to_numpy(np.float64))
    elif kind == "attribute" and results.answered:
        frame = results.mean()
        per_layer = frame[frame["layer"] >= 0].groupby("layer")["effect"].sum()
        curve = ("mean direct effect per layer (heads, biases and MLP)", per_layer.to_numpy(np.float64))
    return DatasetTable(
        kind, tuple(prompts), tuple(answers), metric, np.asarray(metrics, np.float64), tuple(errors), curve
    )


def dataset_figure(table: DatasetTable) -> go.Figure:
    """The per-layer curve where the table has one, else the metric's histogram."""
    figure = go.Figure()
    if table.curve is not None:
        name, values = table.curve
        figure.add_scatter(
            x=list(range(len(values))),
            y=values,
            mode="lines+markers",
            name=name,
            hovertemplate="layers[%{x}]: %{y:.3f}<extra></extra>",
        )
        figure.update_layout(xaxis_title="layer", yaxis_title=name)
    else:
        answered = table.metrics[~np.isnan(table.metrics)]
        figure.add_histogram(x=answered, name=table.metric, hovertemplate="%{x}: %{y} prompts<extra></extra>")
        figure.update_layout(xaxis_title=table.metric, yaxis_title="prompts")
    answered = int((~np.isnan(table.metrics)).sum())
    figure.update_layout(
        title=f"{table.kind} over {len(table.prompts)} prompts ({answered} answered)",
        height=300,
        margin=dict(l=60, r=20, t=50, b=50),
    )
    return figure
