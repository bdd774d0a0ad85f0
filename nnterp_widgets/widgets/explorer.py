"""`Explorer`: a prompt box and the three panels, linked around one prompt.

A prompt change is one engine request (the session's prompt request) whose result
paints the module tree, the attention view (at its current layer) and the lens; a layer
switch, a lens window move or a value preview is one more request each (cached by the
session), and a new prompt drops those still waiting for the old one. Selecting a token
in any panel selects it in all of them. Answers are shown from the kernel's thread (`KernelThread`), and
``close()`` unsubscribes the explorer from its session.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import ipywidgets as widgets
import traitlets

from ..requests.prompt import PromptResult
from ..session import Session, State, Status, session_of
from .attention import AttentionView
from .attribution import AttributionPanel
from .contributions import ContributionPanel
from .occlusion import OcclusionPanel
from .steering import SteerPanel
from .follow import FollowControl
from .in_view import InView
from .generation import GenerationView
from .lens import LogitLens
from .lifecycle import MAIN, STALE, Asking, close_all, one_at_a_time
from .plot_panel import row
from .patching import PatchPanel
from .text_line import TextLine
from .tree import ModuleTree

_ids = itertools.count()

DEFAULT_PROMPT = "The Eiffel Tower is in the city of"
#: The value whose availability the attention view reports per step.
PATTERN = "self_attn.attention_probabilities"


#: Classes `InView` finds the explorer and its parts by.
EXPLORER, ATTENTION, TOOLS, TOOL_STRIP = "nnw-explorer", "nnw-attention", "nnw-tools", "nnw-tool-strip"

#: What the attention view and the lens say while the engine starts.
WAITING = "waiting for the engine to start: {what} appears with the first answer"


class Explorer(Asking, widgets.VBox):
    """``Explorer(session=None, prompt="The Eiffel Tower is in the city of")``: on the
    session's model (the trained model by default, `Session.open()`).

    Its prompt is asked for as every view asks (`Asking`); the answer feeds every panel.
    """

    _asks_for = "answer"

    #: The explorer un-dims its panels itself when the prompt's answer lands (`update`).
    _clears_stale = False

    selected_token = traitlets.Int(-1)

    def __init__(self, session: Session | None = None, prompt: str = DEFAULT_PROMPT, **kwargs: Any) -> None:
        self.session = session_of(session)
        self._key = f"explorer-{next(_ids)}"
        self.result: PromptResult | None = None
        self._init_asking()
        self._closed = False
        self.prompt_box = widgets.Text(
            value=prompt, description="prompt", continuous_update=False, layout=widgets.Layout(width="60%")
        )
        self.run_button = widgets.Button(description="run", tooltip="run the prompt (Enter)")
        self.status_line = TextLine()  # wraps: an error is shown whole
        self.ablation_line = TextLine()  # the ablated run against the clean one
        self.ablation = None  # its `AblationDelta`, once landed
        self._ablation_done = threading.Event()
        self._ablation_done.set()
        self.tree = ModuleTree(self.session, key=self._key)
        self.attention = AttentionView(session=self.session, key=self._key)
        self.lens = LogitLens(session=self.session, key=self._key)
        self.panels = (self.tree, self.attention, self.lens)
        self.generation = GenerationView(self.session, lambda: self.prompt_box.value, key=f"{self._key}-generate")
        # Its own two prompts; asks nothing until "patch" is pressed. Linked by the selection.
        self.patching = PatchPanel(self.session, key=f"{self._key}-patch")
        self._sections: list = []
        traitlets.link((self, "selected_token"), (self.patching, "selected_token"))
        traitlets.dlink((self.tree, "theme"), (self.patching, "theme"))
        # Asks nothing until "attribute" is pressed; a click on a head shows it in the attention view.
        self.attribution = AttributionPanel(self.session, lambda: self.prompt_box.value, key=f"{self._key}-attribute")
        traitlets.dlink((self.tree, "theme"), (self.attribution, "theme"))
        self.attribution.observe(one_at_a_time(self._on_attributed_head), "selected_head")
        self.contributions = ContributionPanel(
            self.session, lambda: self.prompt_box.value, key=f"{self._key}-contributions"
        )
        traitlets.link((self, "selected_token"), (self.contributions, "selected_token"))
        traitlets.dlink((self.tree, "theme"), (self.contributions, "theme"))
        self.occlusion = OcclusionPanel(self.session, lambda: self.prompt_box.value, key=f"{self._key}-occlude")
        traitlets.link((self, "selected_token"), (self.occlusion, "selected_token"))
        traitlets.dlink((self.tree, "theme"), (self.occlusion, "theme"))
        self.steering = SteerPanel(self.session, lambda: self.prompt_box.value, key=f"{self._key}-steer")
        self.follow = FollowControl(
            self.session, lambda: self.prompt_box.value, self.lens, self.generation, key=f"{self._key}-follow"
        )
        self.generation.observe(one_at_a_time(self._on_step), "step")  # the tree and the attention view follow the step
        for panel in self.panels:
            traitlets.link((self, "selected_token"), (panel, "selected_token"))
        for panel in (self.attention, self.lens, self.generation):
            traitlets.dlink((self.tree, "theme"), (panel, "theme"))  # plotly follows the page
        self.prompt_box.observe(lambda change: self.run(change["new"]), names="value")
        self.run_button.on_click(lambda button: self.run(self.prompt_box.value))
        self.attention.observe(lambda change: self.run(self.prompt_box.value), "ablated")
        # One screen (1600 x 1000): the tree in a column on the left; beside it the attention
        # view (heatmap and head grid side by side) above the lens. Where the page is
        # narrower the column wraps under the tree. The tools, which each ask on their own,
        # are tabs under both (one at a time instead of a page several screens tall).
        # The tree is an anywidget, whose page element keeps a class once set: it is dimmed
        # through a plain box around it.
        self.tree.layout.width = "100%"  # of its column: long lines scroll inside the tree
        self.tree_box = widgets.Box([self.tree], layout=widgets.Layout(flex="0 1 380px", min_width="300px"))
        #: The attention view, the lens's follow control and the lens, in one column.
        self.readings = widgets.VBox(
            [self.attention, self.lens, self.follow], layout=widgets.Layout(flex="1 1 760px", min_width="0")
        )
        self.views = row([self.tree_box, self.readings], align="flex-start", grid_gap="12px")
        self.tools = widgets.Tab(children=[panel for _, panel in self._tool_tabs()])
        self.tools.titles = tuple(title for title, _ in self._tool_tabs())
        # The tools are picked on a strip of their own, a child of the explorer's box: it
        # stays on screen (sticky at the bottom of the notebook while the views fill it;
        # the Tab's own bar, at its top, could not be held there), and its style hides the
        # Tab's bar. A tool picked, or a linked change, scrolls what it shows into view.
        self.tool_strip = widgets.ToggleButtons(
            options=self.tools.titles, index=0, tooltips=[f"open the {title} tool" for title in self.tools.titles]
        )
        self.tool_strip.style.button_width = "auto"
        self.tool_strip.add_class(TOOL_STRIP)
        traitlets.link((self.tool_strip, "index"), (self.tools, "selected_index"))
        self.tools.add_class(TOOLS)
        self.attention.add_class(ATTENTION)
        self.in_view = InView()
        self.tools.observe(lambda change: self.in_view.show(TOOLS), "selected_index")
        super().__init__(
            [
                row([self.prompt_box, self.run_button, self.status_line], grid_gap="8px"),
                self.ablation_line,
                self.views,
                self.tool_strip,
                self.tools,
                self.in_view,
            ],
            **kwargs,
        )
        self.add_class(EXPLORER)
        self.outlined_seconds: float | None = None
        self._unsubscribe = self.session.on_status(lambda status: self._kernel.call(self._on_session_status, status))
        if not self.session.ready:  # empty states that say what they wait for
            for panel, what in ((self.attention, "the attention pattern"), (self.lens, "the logit lens")):
                panel.message.value = WAITING.format(what=what)
        self.run(prompt)

    @one_at_a_time
    def run(self, prompt: str) -> None:
        """Ask for ``prompt`` (with the attention view's ablated heads): one engine request,
        shown in every panel when it lands; with heads ablated, the same request's clean
        invoke gives the change in the clean top-1's probability (the line under the status)."""
        heads = self.attention.ablated
        self._set_status(State.BUSY, "running…")
        self._mark_stale(prompt)
        self._ablation_pending(heads)
        self._ask(lambda: self.session.prompt(prompt, key=self._key, layer=self._layer(), ablate=heads), self._landed)
        if not self.session.ready:  # the tree and the tokens first, from the model's files
            asked = self._asked
            self.session.on_described(lambda: self._kernel.call(self._outline, asked, prompt))

    def _mark_stale(self, prompt: str) -> None:
        """Dim what shows an earlier prompt: the main panels until this answer lands; a
        tool's answer (generation, attribution, graph, occlusion, steering) until it
        runs again on this prompt, with a line saying so."""
        for panel in self._dimmed():
            panel.add_class(STALE)
        for tool in self._tools():
            tool.mark_stale(prompt)

    def _dimmed(self) -> tuple:
        """What a new prompt dims until its answer: the main views (the tree by its box)."""
        return (self.tree_box, self.attention, self.lens)

    def _tool_tabs(self) -> tuple:
        """The tools' tabs: (title, panel), in the order a tour meets them."""
        return (
            ("generation", self.generation),
            ("attribution", self.attribution),
            ("contribution graph", self.contributions),
            ("occlusion", self.occlusion),
            ("steering", self.steering),
            ("patching", self.patching),
        )

    def show_tool(self, title: str) -> None:
        """Open the tools' tab called ``title`` ("generation", "attribution", ...)."""
        titles = [name for name, _ in self._tool_tabs()]
        if title not in titles:
            raise ValueError(f"no tool {title!r}: the tabs are {', '.join(titles)}")
        self.tools.selected_index = titles.index(title)

    def _tools(self) -> tuple:
        return (self.generation, self.attribution, self.contributions, self.occlusion, self.steering)

    def _exported(self) -> tuple:
        """The views that add a section to the HTML export (each its `export_section`), in page order."""
        return (self.generation, self.patching, *self._tools()[1:], *self._sections)

    def add_section(self, view: Any) -> None:
        """Put ``view``'s part of the page (its ``export_section``) in `to_html`'s page,
        after the tools' (a `DatasetView` linked to this explorer adds itself)."""
        if view not in self._sections:
            self._sections.append(view)

    def _outline(self, asked: int, prompt: str) -> None:
        """Before the engine is ready: the prompt's tokens and the tree's shapes for them."""
        if self._closed or asked != self._asked or self.result is not None:
            return
        try:
            tokens = self.session.tokens(prompt)
        except Exception:  # noqa: BLE001 - the request itself will say what is wrong
            return
        self.tree.outline(tokens)
        #: Seconds from the session's opening to the tree and chips drawn before the engine
        #: was ready (None when the first answer came first).
        self.outlined_seconds = time.monotonic() - self.session.started_at
        for panel in (self.attention, self.lens):  # while the engine starts, not after
            panel.make_figures()

    def _ablation_pending(self, heads: tuple) -> None:
        self.ablation = None
        if not heads:
            self.ablation_line.text = ""
            self._ablation_done.set()
            return
        self._ablation_done.clear()
        self.ablation_line.text = f"… ablating {len(heads)} head(s)"

    def _show_ablation(self, delta, error: BaseException | None = None) -> None:
        """The ablated run against the clean one (``delta``, an `AblationDelta`), or why not."""
        if error is not None:
            self.ablation_line.text = f"⚠ ablation: {type(error).__name__}: {error}"
        elif delta is not None:
            self.ablation = delta
            token = self.session.tokenizer().decode([int(delta.ids[0])])
            heads = ", ".join(f"L{layer}H{head}" for layer, head in delta.heads)
            self.ablation_line.text = (
                f"ablating {heads}: p({token!r}) {float(delta.clean[0]):.4f} → "
                f"{float(delta.ablated[0]):.4f} (Δ {delta.top1_delta:+.4f})"
            )
        self._ablation_done.set()

    def wait_ablation(self, timeout: float | None = 300):
        """Block until the ablation's change is shown (for scripts and tests); its `AblationDelta`."""
        if not self._ablation_done.wait(timeout):
            raise TimeoutError(f"no ablation from the engine within {timeout} s")
        return self.ablation

    def _layer(self) -> int | None:
        """The attention view's layer, if it can come with the prompt (else the first)."""
        layers = self.result.pattern_layers if self.result is not None else ()
        return self.attention.layer if self.attention.layer in layers else None

    def _landed(self, result: PromptResult) -> None:
        if self._closed:
            return
        self.update(result)
        if not self._ablation_done.is_set():
            self._show_ablation(self.result.ablation)

    def _show_error(self, error: BaseException, line: str = MAIN) -> None:
        self._set_status(State.ERROR, f"{type(error).__name__}: {error}")
        if not self._ablation_done.is_set():
            self._show_ablation(None, error)

    def update(self, result: PromptResult) -> None:
        self.result = result
        for panel in self._dimmed():
            panel.remove_class(STALE)
        for panel in (self.attention, self.lens):
            if panel.message.value.startswith(WAITING[:20]):
                panel.message.value = ""
        if self.selected_token >= len(result.tokens):
            self.selected_token = -1
        for panel in self.panels:
            panel.update(result)
        if self.follow.mode != "top-1":
            self.follow.refresh()  # the new prompt's lens modes
        self._set_status(
            State.IDLE, f"{len(result.tokens)} tokens · engine requests so far: {self.session.engine_requests}"
        )

    def _on_step(self, change) -> None:
        """A generation step shown: the tree greys what that step cannot serve (the engine's
        reasons), and the attention view says its pattern is the prefill's."""
        step = change["new"]
        self.tree.step = step
        result = self.generation.result
        if result is None or step < 0:
            return
        reasons = result.step(step).unavailable()
        self.attention.show_step(step, reasons.get(PATTERN) if not result.step(step).is_prefill else None)

    def _set_status(self, state: State, message: str) -> None:
        prefix = {State.ERROR: "⚠ ", State.BUSY: "… "}.get(state, "")
        self.status_line.text = prefix + message
        for panel in self.panels:
            # A panel takes the explorer's state; its message is said on the line above, and
            # an error's in the tree too, whose error box is where a user looks for why.
            panel.set_status(state, message if state is State.ERROR and panel is self.tree else "")

    def _on_session_status(self, status: Status) -> None:
        # The engine starting, reopening or failing; "ready" says nothing of this prompt.
        if not self._closed and status.state is not State.IDLE:
            self._set_status(status.state, status.message)

    def _on_attributed_head(self, change) -> None:
        """A head clicked in the attribution map: the attention view shows it."""
        if len(change["new"]) == 2:
            layer, head = change["new"]
            self.attention.layer = layer
            self.attention.head = head
            self.in_view.show(ATTENTION)

    def close(self) -> None:
        """Unsubscribe from the session and close every panel; an answer on its way is dropped."""
        self._closed = True
        self._unsubscribe()
        close_all(self.children)
        super().close()

    def to_html(self, path: str | None = None) -> str:
        """The current view as a self-contained HTML page (works offline); written to ``path`` if given.

        The prompt's module tree (shapes, greyed values with their reasons as tooltips,
        on the generation step shown), the attention heatmap of the chosen layer / head as
        shown (a zoom window when zoomed) and the logit lens, with the selected token
        outlined; the patching panel's sweep, the attribution map, the contribution graph, the occlusion row, the
        steered continuations and a branch, each once one has run; and the generation, when
        one is shown (its tokens, the per-step lens with the step outlined, each step's
        availability). Raises ``RuntimeError`` before a prompt has landed.
        """
        from .export import export_html

        if self.result is None:
            raise RuntimeError("no prompt has landed yet: call explorer.wait() first")
        chosen = self.selected_token
        return export_html(
            self.result,
            self.tree.tree,
            attention=self.attention.shown,
            attention_row=self.attention.row_panel,
            head=self.attention.head,
            lens=self.lens.panel,
            selected_token=chosen,
            selected=self.tree.selected,
            preview=self.tree.preview,
            preview_data=self.tree.preview_data,
            sections=[section for view in self._exported() if (section := view.export_section(chosen))],
            path=path,
        )
