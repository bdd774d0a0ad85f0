"""The pictures: pure functions from results to plotly figures (and HTML sections), with no
engine and no widget state; `plot` draws any result with its view's figure.

    from nnterp_widgets.figures import plot, lens_figure
    plot(grid)                       # the same as lens_figure(grid)

In a widget the figures travel in column form (`transport`); in the HTML export as
plotly's own HTML (`html`). Token text is data: every token string goes through
`common.escape_token` (the display rule of `tokens.show_token`).
"""

from .attention import attention_figure, head_grid_figure
from .attribution import attribution_figure
from .causal import branch_html, continuations_html, occlusion_figure, occlusion_text
from .common import PLOTLY_CONFIG, escape_token
from .contributions import contribution_figure, route_picture
from .dataset import DatasetTable, dataset_figure, dataset_table
from .generation import generation_lens_figure, lens_mode_figure
from .lens import lens_figure, lens_table_html
from .patching import pair_figure, patch_figure
from .plot import plot
from .shaded import ShadedText
from .tokens import show_token

__all__ = [
    "DatasetTable",
    "ShadedText",
    "dataset_figure",
    "dataset_table",
    "PLOTLY_CONFIG",
    "attention_figure",
    "attribution_figure",
    "branch_html",
    "contribution_figure",
    "continuations_html",
    "escape_token",
    "generation_lens_figure",
    "head_grid_figure",
    "lens_figure",
    "lens_table_html",
    "lens_mode_figure",
    "occlusion_figure",
    "occlusion_text",
    "pair_figure",
    "patch_figure",
    "plot",
    "route_picture",
    "show_token",
]
