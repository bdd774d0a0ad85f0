"""`plot(result)`: one line draws any result with the figure its view uses; the package's
public face lists what a notebook uses."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

import nnterp_widgets
from nnterp_widgets import plot
from nnterp_widgets.figures import attention_figure, attribution_figure, lens_figure, occlusion_figure, patch_figure
from test_asking import occlusion
from test_export import synthetic_result
from test_figures import _attribution
from test_patch_figures import pair, result


def _same(a: go.Figure, b: go.Figure) -> bool:
    return a.to_json() == b.to_json()


def test_plot_draws_each_result_as_its_view_does():
    prompt = synthetic_result()
    assert _same(plot(prompt), lens_figure(prompt.lens))
    assert _same(plot(prompt.lens, selected_token=1), lens_figure(prompt.lens, 1))
    assert _same(plot(prompt.attention, head=1), attention_figure(prompt.attention, 1))
    assert _same(plot(result()), patch_figure(result()))
    assert isinstance(plot(pair()), go.Figure)
    assert _same(plot(_attribution()), attribution_figure(_attribution()))
    saliency = occlusion("a b c")
    assert _same(plot(saliency, measure="probability"), occlusion_figure(saliency, "probability"))


def test_plot_refuses_what_is_not_a_result_and_says_what_is():
    with pytest.raises(TypeError, match="PromptResult.*got ndarray"):
        plot(np.zeros(3))


def test_the_public_face_resolves_every_name_it_lists():
    assert "plot" in nnterp_widgets.__all__ and "Session" in nnterp_widgets.__all__
    for name in nnterp_widgets.__all__:
        assert getattr(nnterp_widgets, name) is not None
    assert sorted(dir(nnterp_widgets)) == sorted(nnterp_widgets.__all__)
