"""LogitLens: the logit-lens heatmap (layers × a window of positions) of one prompt.

State and rendering, like :class:`~nnterp_widgets.widgets.attention.AttentionView`:
``update(result)`` draws ``result.lens`` with :func:`.figures.lens_figure`. On a prompt
longer than the window, the window (the last positions by default) is moved with a
`PositionWindow`: by mouse (drag its thumb, click its track, its ◀ / ▶ buttons) or by
keyboard (arrow keys, PageUp/PageDown, Home/End on its slider; Enter on a button). Each
move asks the ``session`` for that window (one request, cached by the session).
Traits for the explorer to link: ``selected_token``
(position, ``-1`` for none; a click on a cell selects its position) and ``status``
(``{"state": "idle" | "busy" | "error", "message": str}``).

A text mode: ``view_picker`` ("heatmap" or "table") shows the same window as a logit-lens
table (`lens_table_html`: a row a layer, each cell its top-1 token's whole text, shaded
by its probability), to read where the heatmap's cells are too narrow for their words.

Lens modes: ``show_modes(modes, mode)`` draws the prompt's `LensModes` (from
``session.follow``) in one of its modes instead of the top-1 window; ``show_modes(None)``
goes back. With ``pick`` on, a click on a cell picks its top-1 token (``picked``: the
cell's layer, position, token id and text) instead of selecting the position.
"""

from __future__ import annotations

import ipywidgets
import traitlets

from ..requests.generation import LensModes
from ..requests.lens import LensGrid
from ..requests.prompt import PromptResult
from ..figures.lens import lens_figure, lens_table_html
from ..figures.common import selection_shapes
from ..figures.generation import lens_mode_figure
from .lifecycle import Asking, one_at_a_time
from .plot_panel import FigureSlot, PlotPanel, clicked, row
from .lens_window import PositionWindow
from ..session import Session, session_of

__all__ = ["LogitLens"]


class LogitLens(Asking, PlotPanel):
    """The logit lens of the current prompt, with a position window, a message line and a
    status line. ``session``: where a moved window is asked for (anything with
    ``lens(text, start, stop, key, ablate=...) -> Future``, a `Session`)."""

    _shown_as = "_panel"
    _asks_for = "lens"

    #: On: a click on a cell picks its top-1 token (``picked``) instead of selecting its position.
    pick = traitlets.Bool(False)
    #: The last picked cell: ``{"layer", "position", "id", "text"}``.
    picked = traitlets.Dict()

    _clears_stale = False  # a main view: the explorer undims it with the prompt's answer
    figure = FigureSlot()

    def __init__(
        self, result: PromptResult | None = None, *, session: Session | None = None, key: str = "lens", **kwargs
    ):
        self.session = session if session is None else session_of(session)
        self.key = key
        self._panel: LensGrid | None = None
        self._modes: LensModes | None = None  # shown instead of the window when set
        self._mode = "top-1"
        self._window_display = "none"  # the window's controls: shown for a long prompt
        self._init_asking()  # answers are shown from the kernel's thread
        self._moving = False
        self.window = PositionWindow(label="lens positions")
        self.controls = self.window
        self.controls.layout.display = "none"  # shown when the prompt is longer than the window
        #: "heatmap" or "table": how the top-1 window is drawn.
        self.view_picker = ipywidgets.ToggleButtons(
            options=["heatmap", "table"], value="heatmap", tooltips=["colours", "the words"]
        )
        self.view_picker.style.button_width = "90px"  # "heatmap" whole in JupyterLab's font
        #: The window as a table of words (shown instead of the heatmap in "table").
        self.table = ipywidgets.HTML("")
        super().__init__([row([self.view_picker, self.controls], grid_gap="8px")], ("figure",), **kwargs)
        self.window.observe(one_at_a_time(self._on_window), "value")
        self.view_picker.observe(one_at_a_time(lambda change: self._draw()), "value")
        if result is not None:
            self.update(result)

    @property
    def panel(self) -> LensGrid | None:
        """The lens on screen."""
        return self._panel

    @property
    def modes(self) -> LensModes | None:
        """The `LensModes` drawn instead of the top-1 window, or None."""
        return self._modes

    @property
    def mode(self) -> str:
        return self._mode if self._modes is not None else "top-1"

    @one_at_a_time
    def show_modes(self, modes: LensModes | None, mode: str = "top-1") -> None:
        """Draw the prompt's ``modes`` in ``mode`` (every position; one of ``modes.modes()``),
        or, given None, the top-1 window again. Asks nothing."""
        if modes is not None:
            modes.values(mode)  # refuses an unknown mode, or a target mode without a target
        self._modes, self._mode = modes, mode
        self.controls.layout.display = "none" if modes is not None or self._panel is None else self._window_display
        self._draw()

    def update(self, result: PromptResult) -> None:
        """Show a new prompt's lens; a selection past its end is clamped to the last token."""
        count = len(result.tokens)
        note = ""
        selected = self.selected_token
        if selected >= count:
            note = f"selected token {selected} is past this {count}-token prompt; selected {count - 1}"
            selected = count - 1
        self._result = result
        self._modes = None  # the old prompt's; the explorer asks for the new one's
        with self._hold():
            self.selected_token = selected
        self._ask_nothing()  # shown from the prompt's answer: an older window on its way is not
        self._show_lens(result.lens)
        self.message.value = note

    @one_at_a_time
    def shift(self, direction: int) -> None:
        """Move the window by its own width, earlier (-1) or later (+1), within the prompt."""
        if self._panel is None:
            return
        width = self._panel.stop - self._panel.start
        count = len(self._panel.tokens)
        start = min(max(0, self._panel.start + direction * width), count - width)
        self.window.value = (start, start + width)

    # ------------------------------------------------------------------ the window

    def _show_lens(self, lens: LensGrid) -> None:
        self._panel = lens
        count = len(lens.tokens)
        self._moving = True
        try:
            self.window.count = count
            self.window.value = (lens.start, lens.stop)
        finally:
            self._moving = False
        self._window_display = "none" if (lens.start, lens.stop) == (0, count) else ""
        self.controls.layout.display = self._window_display if self._modes is None else "none"
        self._draw()

    def _draw(self) -> None:
        as_table = self.view_picker.value == "table" and self._modes is None
        self.view_picker.disabled = self._modes is not None  # the modes are drawn as a heatmap
        if as_table and self._panel is not None:
            self.table.value = lens_table_html(self._panel, self.selected_token)
            self._place(self.table)
            return
        if self._modes is not None:
            fig = lens_mode_figure(self._modes, self._mode, self._shown(self.selected_token))
        elif self._panel is not None:
            fig = lens_figure(self._panel, self.selected_token)
        else:
            return
        if self._show(self.figure, fig):
            self.figure.data[0].on_click(self._on_click)
        self._place(self.figure)

    def close(self) -> None:
        self.table.close()  # off the page while the heatmap is shown
        super().close()

    def _place(self, shown) -> None:
        """``shown`` (the figure or the table) last on the page, the other off it."""
        other = self.table if shown is self.figure else self.figure
        children = [child for child in self.children if child is not other and child is not shown]
        if list(self.children) != [*children, shown]:
            self.children = (*children, shown)

    def _shown(self, position: int) -> int:
        """``position``'s column in the drawn modes, or -1."""
        positions = self._modes.positions
        return positions.index(position) if position in positions else -1

    def _on_window(self, change) -> None:
        if self._moving or self._result is None:
            return
        start, stop = change["new"]
        if stop <= start:
            return
        if self.session is None:
            self.message.value = "moving the lens window needs a session to ask the engine"
            return
        result = self._result
        self.set_status("busy", f"asking for positions {start}..{stop - 1}")
        self._ask(
            lambda: self.session.lens(result.prompt, start, stop, key=self.key, ablate=result.ablate),
            lambda lens: self._window_landed(result, (start, stop), lens),
        )

    def _window_landed(self, result: PromptResult, window: tuple, lens: LensGrid) -> None:
        if result is not self._result or tuple(self.window.value) != window:
            return  # a newer prompt or window is on its way
        self._show_lens(lens)
        self.message.value = ""
        self.set_status("idle", "")

    # ------------------------------------------------------------------ events

    def _on_selected(self, change) -> None:
        if self._holding or self._panel is None:
            return
        self.message.value = ""
        if self._modes is not None:
            modes = self._modes
            column = self._shown(change["new"])
            shapes = selection_shapes(len(modes.positions), column, row=False, column=True, rows=modes.num_layers)
            self.figure.layout.shapes = shapes
            return
        lens = self._panel
        if self.view_picker.value == "table":
            self.table.value = lens_table_html(lens, change["new"])
            return
        selected = change["new"] if change["new"] in lens.positions else -1
        self.figure.layout.shapes = selection_shapes(lens.stop, selected, row=False, column=True, rows=lens.num_layers)

    def _on_click(self, trace, points, state=None) -> None:
        """Click on a cell: select its position (the column), or with ``pick`` on, pick its top-1."""
        position = clicked(points, "x")
        if position is None:
            return
        layer = clicked(points, "y")
        if self.pick and layer is not None:
            self.picked = self._top1(layer, position)
            return
        self.selected_token = position

    def _top1(self, layer: int, position: int) -> dict:
        """The top-1 token of the drawn cell at ``layer``, ``position``."""
        if self._modes is not None:
            column = self._shown(position)
            token, text = int(self._modes.top_ids[layer, column]), self._modes.top_texts[layer][column]
        else:
            column = position - self._panel.start
            token, text = int(self._panel.top_ids[layer, column, 0]), self._panel.top_texts[layer][column][0]
        return {"layer": layer, "position": position, "id": token, "text": text}
