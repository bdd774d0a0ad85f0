"""What the plotly panels share: status and message lines, a linked ``selected_token``,
and showing a figure in a `FigureWidget` (heatmaps in column form, so that their
numbers travel as binary buffers)."""

from __future__ import annotations

import contextlib
from typing import Any

import ipywidgets
import plotly.graph_objects as go
import plotly.io as pio
import traitlets

from ..session import IDLE, State, Status
from ..requests.prompt import PromptResult
from ..figures.transport import for_widget
from ..figures.common import PLOTLY_CONFIG
from .job_bar import JobBar
from .lifecycle import OneAtATime, close_all, one_at_a_time

#: The plotly template for each page theme (the module tree reports the page's).
TEMPLATES = {"light": "plotly", "dark": "plotly_dark"}


def apply_theme(widget: go.FigureWidget, theme: str) -> None:
    """Give ``widget`` the plotly template of the page's ``theme`` ("light" or "dark")."""
    widget.layout.template = pio.templates[TEMPLATES.get(theme, TEMPLATES["light"])]


class FigureSlot:
    """A widget's `FigureWidget`, made the first time it is used (``figure = FigureSlot()``
    on the class).

    Plotly's widget class imports nbformat, and with it jsonschema's format grammars:
    1.5 s in a new kernel on 2 cores, which an explorer that made its figures when built
    would add to the time before its tree is drawn. Made on first use, they cost that when
    the first picture lands instead.
    """

    def __init__(self, tools: bool = True) -> None:
        #: ``tools=False``: no tool bar (a picker such as the head grid has nothing to zoom).
        self.config = dict(PLOTLY_CONFIG) if tools else {**PLOTLY_CONFIG, "displayModeBar": False}

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, holder: Any, owner: type | None = None) -> Any:
        if holder is None:
            return self
        made = holder.__dict__.get(self.name)
        if made is None:
            made = holder.__dict__[self.name] = go.FigureWidget()
            # plotly.js reads the config when the figure is first drawn; FigureWidget takes
            # it only through this trait (no public argument).
            made._config = dict(self.config)  # noqa: SLF001
        return made

    def made(self, holder: Any) -> go.FigureWidget | None:
        """The figure if it has been made, without making it."""
        return holder.__dict__.get(self.name)


def row(children=(), align: str = "center", **layout) -> ipywidgets.Box:
    """Widgets on one line where the page is wide enough, wrapping where not (``layout``:
    more of the box's `ipywidgets.Layout`, e.g. ``grid_gap``)."""
    return ipywidgets.Box(list(children), layout=ipywidgets.Layout(flex_flow="row wrap", align_items=align, **layout))


def show_figure(widget: go.FigureWidget, fig: go.Figure) -> bool:
    """Make ``widget`` show ``fig``; returns True when its traces had to be replaced.

    The widget gets :func:`~.figure_transport.for_widget` ``(fig)``: heatmaps in column form, so
    their numbers travel to the browser as binary buffers, not JSON (figure_transport.py).
    When the traces are the same kinds as before they are updated in place (so click
    callbacks stay registered and the browser keeps its zoom, helped by ``uirevision``);
    properties the new figure lacks are unset. Otherwise the traces are replaced and the
    caller registers its callbacks again.
    """
    fig = for_widget(fig)
    replaced = [t.type for t in widget.data] != [t.type for t in fig.data]
    with widget.batch_update():
        if replaced:
            widget.data = ()
            widget.add_traces(list(fig.data))
            widget.layout = fig.layout
        else:
            for old, new in zip(widget.data, fig.data, strict=True):
                props = new.to_plotly_json()
                props.pop("type", None)
                for key in old.to_plotly_json():
                    if key not in props and key not in ("type", "uid"):
                        props[key] = None
                old.update(props)
            layout = fig.layout.to_plotly_json()
            layout.pop("template", None)  # the same default template every time
            for key in widget.layout.to_plotly_json():
                if key not in layout and key != "template":
                    layout[key] = None
            widget.layout.update(layout)
    return replaced


def clicked(points, axis: str) -> int | None:
    """The clicked cell's position on ``axis`` ("x" or "y"), or None if no point of this trace."""
    inds = list(getattr(points, "point_inds", None) or [])
    if not inds:
        return None
    values = list(getattr(points, "xs" if axis == "x" else "ys", None) or [])
    if values and values[0] is not None:
        return int(round(float(values[0])))
    first = inds[0]  # a 2-D heatmap reports [row, column]; one in column form, the cell's index
    if isinstance(first, (list, tuple)):
        return int(first[1] if axis == "x" else first[0])
    return None


class PlotPanel(OneAtATime, ipywidgets.VBox):
    """A panel: ``controls``, a message line, a status line, then its figures (the names of
    its `FigureSlot` attributes, in page order), each of which joins the page with its
    first picture (no bare axes while nothing is known; ``join=False``: the subclass
    places them).

    ``selected_token`` (``-1`` for none) is validated against the prompt on screen: an
    out-of-range value is refused (the trait keeps its value) and the message says why.
    ``status`` is a `Status` in its JSON form, ``{"state": "idle" | "busy" | "error", "message": str}``.
    """

    selected_token = traitlets.Int(-1)
    status = traitlets.Dict(IDLE.to_json())
    #: "light" or "dark": the page's theme, which the figures follow.
    theme = traitlets.Unicode("light")

    def __init__(
        self, controls: list, figures: tuple[str, ...], *, join: bool = True, beside: bool = False, **kwargs
    ) -> None:
        self._result: PromptResult | None = None
        self._holding = False
        self._figure_names = tuple(figures)
        self._join = join
        #: ``beside``: the figures side by side where the page is wide enough (a wrapping row).
        self._row = row(align="flex-start") if beside else None
        self._joined: list = []
        self._themed: dict[int, str] = {}
        self.message = ipywidgets.Label("")
        self.status_label = ipywidgets.Label("")
        # One line for both (a panel's message and its request's status): an empty label
        # still takes a line's height.
        self._lines = row([self.message, self.status_label], grid_gap="12px", display="none")
        for label in (self.message, self.status_label):
            label.observe(one_at_a_time(self._on_line), "value")
        #: The running request's progress and stop button (`JobBar`: shown past a second).
        self.job_bar = JobBar()
        super().__init__(children=[*controls, self.job_bar, self._lines], **kwargs)
        self.observe(self._on_selected, "selected_token")
        self.observe(self._on_status, "status")
        self.observe(lambda change: [self._apply_theme(w) for w in self._figures()], "theme")

    @property
    def result(self) -> PromptResult | None:
        return self._result

    def make_figures(self) -> None:
        """Make the panel's figures now (they are made on first use, `FigureSlot`): the
        explorer does it while the engine starts, so that its first answer does not wait."""
        for name in self._figure_names:
            getattr(self, name)

    def _figures(self) -> list[go.FigureWidget]:
        """The figures made so far, in page order."""
        made = (getattr(type(self), name).made(self) for name in self._figure_names)
        return [figure for figure in made if figure is not None]

    def set_status(self, state: State | str, message: str = "") -> None:
        """Show a `Status`: ``"busy"`` (a request is running), ``"error"`` or ``"idle"``."""
        self.status = Status(state, message).to_json()

    def close(self) -> None:
        """Close the panel and the widgets it holds (a panel subscribes to nothing), its
        figures too, shown or not yet."""
        close_all(self.children)
        close_all(self._figures())
        if self._row is not None:
            self._row.close()
        super().close()

    def _show(self, widget: go.FigureWidget, fig: go.Figure) -> bool:
        """`show_figure`, then the page theme's template (a replaced layout drops it)."""
        replaced = show_figure(widget, fig)
        self._apply_theme(widget, force=replaced)
        figures = self._figures()
        if self._join and widget in figures and widget not in self._joined:
            self._joined.append(widget)
            joined = [figure for figure in figures if figure in self._joined]
            if self._row is None:
                self.children = (*[c for c in self.children if c not in figures], *joined)
            else:
                self._row.children = self._beside(joined)
                if self._row not in self.children:
                    self.children = (*self.children, self._row)
        return replaced

    def _beside(self, joined: list) -> tuple:
        """The side-by-side row's children for the figures joined so far, in page order
        (a panel may group a figure with a widget of its own)."""
        return tuple(joined)

    def _apply_theme(self, widget: go.FigureWidget, force: bool = False) -> None:
        theme = self.theme if self.theme in TEMPLATES else "light"
        if force or self._themed.get(id(widget)) != theme:
            apply_theme(widget, theme)
            self._themed[id(widget)] = theme

    @contextlib.contextmanager
    def _hold(self):
        """Set traits without validation or re-rendering (``update`` has checked them)."""
        held, self._holding = self._holding, True
        try:
            yield
        finally:
            self._holding = held

    @traitlets.validate("selected_token")
    def _valid_selected(self, proposal):
        value = proposal["value"]
        if self._holding or self._result is None:
            return value
        count = len(self._result.tokens)
        if not -1 <= value < count:
            self.message.value = f"token {value} is out of range: positions 0..{count - 1}, or -1 for none"
            return self.selected_token
        return value

    def _on_selected(self, change) -> None:  # pragma: no cover - each panel draws its own
        pass

    def _on_line(self, change) -> None:
        """The message line takes room only while it says something."""
        said = bool(self.message.value or self.status_label.value)
        self._lines.layout.display = None if said else "none"

    def _on_status(self, change) -> None:
        self.status_label.value = Status(**change["new"]).text
