"""`GenerationView`: generate N tokens from a prompt and step through the generation's lens.

One engine request per "generate" (the session's ``generate``); the step control
(`StepSlider`: a range input, so arrow keys, Home / End step it) only re-outlines the
step's column of the figure, asking nothing. ``step`` (``-1`` before a generation) is
what the explorer follows to grey the module tree's pattern on a decode step. ``mode``
draws the generation's `LensModes` in a lens mode instead of the top-1 (``target``, when
set, is followed by every generation asked for: a target mode needs it). With ``pick``
on, a click on a cell picks its top-1 token (``picked``). A refused request
(``max_tokens`` of 0, negative, or past the model's length) shows the session's error in
the message line; the next request is served as usual.
"""

from __future__ import annotations

from typing import Any, Callable

import anywidget
import ipywidgets
import traitlets

from ..requests.generation import GENERATE_TOKENS, GenerationResult
from .assets import STEP_SLIDER_CSS, STEP_SLIDER_ESM
from ..figures.causal import branch_html
from ..figures.html import branch_section, generation_section
from ..figures.generation import STEP_AXIS, generation_lens_figure, lens_mode_figure
from .integer_box import IntegerBox
from .job_bar import JobBar
from .lifecycle import MAIN, Asking, close_all, one_at_a_time
from .plot_panel import FigureSlot, apply_theme, clicked, show_figure
from ..session import Session, session_of

#: The generation view's second line of requests: a branch of the shown generation.
BRANCH = "branch"

__all__ = ["GenerationView", "PREFILL_NOTE", "StepSlider", "step_caption"]

#: Said beside the generation: the other panels show the prompt's own forward pass.
PREFILL_NOTE = "the panels above show the prompt (the prefill); this figure shows every generation step"
#: The step control's words for a step (also its aria-valuetext).
STEP_CAPTION = "step {step} of {last}: {kind}"


def step_caption(step: int, last: int) -> str:
    return STEP_CAPTION.format(step=step, last=last, kind="the prefill" if step == 0 else "a decode step")


class StepSlider(anywidget.AnyWidget):
    """The step control: a labelled native range input (js/step_slider.js)."""

    _esm = STEP_SLIDER_ESM
    _css = STEP_SLIDER_CSS
    value = traitlets.Int(0).tag(sync=True)
    max = traitlets.Int(0).tag(sync=True)
    disabled = traitlets.Bool(True).tag(sync=True)
    label = traitlets.Unicode("step").tag(sync=True)
    caption = traitlets.Unicode("").tag(sync=True)

    @traitlets.validate("value")
    def _valid_value(self, proposal):
        return min(max(0, int(proposal["value"])), self.max)


class GenerationView(Asking, ipywidgets.VBox):
    """``GenerationView(session, prompt=lambda: "text", key="generate")``: ``prompt`` gives
    the text to continue when "generate" is pressed (the explorer's prompt box)."""

    _asks_for = "generation"

    #: The step shown, ``-1`` before a generation has landed.
    step = traitlets.Int(-1)
    #: On: a click on a cell picks its top-1 token (``picked``) instead of moving the step.
    pick = traitlets.Bool(False)
    #: The last picked cell: ``{"layer", "position", "id", "text"}``.
    picked = traitlets.Dict()
    #: The page's theme ("light" / "dark"), which the figure follows (the explorer links it).
    theme = traitlets.Unicode("light")

    figure = FigureSlot()

    def __init__(self, session: Session, prompt: Callable[[], str], key: str = "generate", **kwargs: Any) -> None:
        self.session = session_of(session)
        self._prompt = prompt
        self.key = key
        self.result: GenerationResult | None = None
        self.mode = "top-1"
        self.target: Any = None  # followed by every generation asked for (a token id or text)
        self.asked_target: Any = None  # the target the shown (or coming) generation follows
        self._init_asking()
        # The label as wide as its word, so the box holds six digits.
        self.tokens_input = IntegerBox(GENERATE_TOKENS, minimum=1, description="tokens")
        self.generate_button = ipywidgets.Button(description="generate", tooltip="generate this many tokens")
        self.step_slider = StepSlider()
        self.message = ipywidgets.Label("")
        #: The generation's progress and stop button (`JobBar`: shown past a second).
        self.job_bar = JobBar()
        self.note = ipywidgets.Label(PREFILL_NOTE)
        # The figure joins the page when the first generation lands: no bare axes before
        # it, and no plotly view built before it has data.
        self.figure_box = ipywidgets.Box([])
        # Branching: force another of the shown step's top-k and continue (one request).
        self.branch_picker = ipywidgets.Dropdown(options=[], description="branch with", disabled=True)
        self.branch_button = ipywidgets.Button(
            description="branch", tooltip="write this token at the shown step instead, and continue", disabled=True
        )
        self.branch_output = ipywidgets.HTML("")
        self.branch_result = None
        self.branch_button.on_click(lambda button: self.branch(self.branch_picker.value))
        self.generate_button.on_click(lambda button: self._generate_typed())
        self.step_slider.observe(one_at_a_time(self._on_step), "value")
        self._themed: str | None = None  # the theme the figure has
        self.observe(lambda change: self._theme_figure(), "theme")
        super().__init__(
            [
                ipywidgets.HBox([self.tokens_input, self.generate_button, self.step_slider]),
                self.job_bar,
                self.message,
                self.note,
                self.figure_box,
                ipywidgets.HBox([self.branch_picker, self.branch_button]),
                self.branch_output,
            ],
            **kwargs,
        )

    @property
    def shown_prompt(self) -> str | None:
        """The prompt of the answer shown (None before one)."""
        return None if self.result is None else self.result.prompt

    @one_at_a_time
    def generate(self, max_tokens: Any) -> None:
        """Ask for ``max_tokens`` tokens after the prompt (following ``target``); shown when it lands."""
        self.asked_target = self.target
        self.message.value = f"… generating {max_tokens} tokens"
        # A branch belongs to the generation it branched: gone with it, not left under a new one.
        self.branch_output.value, self.branch_result = "", None
        self._ask(
            lambda: self.session.generate(self._prompt(), max_tokens=max_tokens, target=self.target, key=self.key),
            self._generated,
            partial=self._generated,  # the tokens appear as the chunks land
        )

    @one_at_a_time
    def branch(self, token: Any) -> None:
        """Ask for the shown generation with ``token`` (an id or one token's text) written at
        the shown step instead, continued greedily; both continuations shown side by side
        (`wait(line=BRANCH)` waits for it)."""
        if self.result is None:
            return
        generation, step = self.result, self.step_slider.value
        self.branch_output.value = ""
        self.message.value = f"… branching at step {step}"
        self._ask(
            lambda: self.session.branch(generation, step, token, key=f"{self.key}-branch"), self._branched, BRANCH
        )

    def _branched(self, result) -> None:
        self.branch_result = result
        self.branch_output.value = branch_html(result)
        self.message.value = (
            f"branch at step {result.step}: {result.forced_text!r} instead of {result.original_continuation[0]!r}"
        )

    def export_section(self, selected_token: int = -1) -> str:
        """The generation at the shown step and a branch of it, for the explorer's HTML export."""
        if self.result is None:
            return ""
        parts = [generation_section(self.result, self.step, plotlyjs=False)]
        if self.branch_result is not None:
            parts.append(branch_section(self.branch_result))
        return "\n".join(parts)

    def _generate_typed(self) -> None:
        """The generate button: the typed count, or nothing asked while the box refuses it."""
        if not self.tokens_input.valid:
            self.message.value = f"⚠ {self.tokens_input.refusal}"
            return
        self.generate(self.tokens_input.value)

    @one_at_a_time
    def follow(self, target: Any, again: bool = False) -> None:
        """Follow ``target`` (a token's id or text; None keeps the current one) in the next
        generation; with ``again``, a shown generation that follows another target is asked
        for again at its length (a lens mode that reads the target needs it)."""
        self.target = target if target is not None else self.target
        if again and self.result is not None and self.asked_target != target:
            self.generate(self.tokens_input.value)

    @one_at_a_time
    def show_mode(self, mode: str) -> None:
        """Draw the generation in lens mode ``mode`` (a target mode needs a generation that
        followed a target: ask one with ``target`` set). Asks nothing."""
        self.mode = mode
        self._render()

    def _generated(self, result: GenerationResult) -> None:
        self.result = result
        last = len(result.steps) - 1
        with self.step_slider.hold_trait_notifications():
            self.step_slider.max = last
            self.step_slider.value = min(self.step_slider.value, last)
            self.step_slider.disabled = False
        self._on_step()
        self.message.value = f"{len(result.steps)} steps wrote {result.text!r}"

    def _show_error(self, error: BaseException, line: str = MAIN) -> None:
        self.message.value = f"⚠ {type(error).__name__}: {error}"

    def _on_step(self, change=None) -> None:
        if self.result is None:
            return
        value = self.step_slider.value
        step = self.result.steps[value]
        choices = [
            (repr(text), int(i))
            for text, i in zip(step.model_texts, step.model_ids, strict=True)
            if int(i) != step.token
        ]
        self.branch_picker.options = choices
        self.branch_picker.disabled = self.branch_button.disabled = not choices
        self.step_slider.caption = step_caption(value, self.step_slider.max)
        self._render()
        self.step = value

    def _render(self) -> None:
        result = self.result
        if result is None:
            return
        step = self.step_slider.value
        if self.mode == "top-1" or self.mode not in result.modes.modes():
            fig = generation_lens_figure(result, step)
        else:
            fig = lens_mode_figure(result.modes, self.mode, step, axis_title=STEP_AXIS)
            for shape in fig.layout.shapes:
                shape.name = "step"
        if show_figure(self.figure, fig):
            self.figure.data[0].on_click(self._on_click)
            self._themed = None  # a replaced layout dropped the template
        self._theme_figure()
        if not self.figure_box.children:
            self.figure_box.children = (self.figure,)

    def _theme_figure(self) -> None:
        if self.result is not None and self._themed != self.theme:
            apply_theme(self.figure, self.theme)
            self._themed = self.theme

    def _on_click(self, trace, points, state=None) -> None:
        """Click on a cell: show its step, or with ``pick`` on, pick its top-1 token."""
        column, layer = clicked(points, "x"), clicked(points, "y")
        if column is None or self.result is None:
            return
        if self.pick and layer is not None:
            modes = self.result.modes
            self.picked = {
                "layer": layer,
                "position": modes.positions[column],
                "id": int(modes.top_ids[layer, column]),
                "text": modes.top_texts[layer][column],
            }
            return
        self.step_slider.value = column

    def close(self) -> None:
        close_all(self.children)
        super().close()
