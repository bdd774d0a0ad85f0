"""`ToolView`: one base for the explorer's tools (attribution, contributions, occlusion,
patching, steering): a view that asks the session one question about a prompt and shows
the answer, with its controls, its state and its part of the HTML export.

    class OcclusionPanel(ToolView, PlotPanel):
        _shown_as = "occlusion"              # the attribute holding the answer shown
        _asks_for = "occlusion"              # what `wait` says it waits for
        _default_key = "occlude"
        _options = {"answer": " Paris"}      # keyword options and their defaults (self._defaults)

        def _controls(self):                 # the tool's boxes and button, built once
            self.answer_box = ipywidgets.Text(self._defaults["answer"])
            return [ipywidgets.HBox([self.answer_box, self.run_button])]

        def export_section(self, selected_token=-1):   # its part of the page, or ""
            return "" if self.occlusion is None else occlusion_section(self.occlusion)

``prompt`` is the text, or a function returning it (the explorer passes its prompt
box's); ``key`` names the tool's requests at the session (a newer run replaces a waiting one).
"""

from __future__ import annotations

from typing import Any, Callable

import ipywidgets

from ..session import Session, session_of
from .lifecycle import Asking


class ToolView(Asking):
    """The base of a tool view (a mixin before its widget class, e.g. `PlotPanel`); see the
    module's docstring."""

    #: The key its requests go under unless the caller names one.
    _default_key = "tool"
    #: The figure slots a `PlotPanel` tool draws into, and how it lays them out.
    _figure_slots: tuple[str, ...] = ("figure",)
    _layout: dict = {}

    #: The tool's own keyword options and their defaults; the constructor keeps them in ``_defaults``.
    _options: dict = {}

    def __init__(
        self,
        session: Session,
        prompt: str | Callable[[], str] | None = None,
        *,
        key: str | None = None,
        **kwargs: Any,
    ) -> None:
        self._defaults = {name: kwargs.pop(name, default) for name, default in self._options.items()}
        self.session = session_of(session)
        self.key = key if key is not None else self._default_key
        self._prompt = prompt if callable(prompt) else (lambda: prompt)
        if not isinstance(getattr(type(self), self._shown_as, None), property):
            setattr(self, self._shown_as, None)
        self._init_asking()
        self.run_button = ipywidgets.Button(description=self._run_label, tooltip=self._run_tooltip)
        super().__init__(self._controls(), self._figure_slots, **self._layout, **kwargs)
        self.run_button.on_click(lambda button: self.run())
        self._connect()

    #: The run button's label and tooltip.
    _run_label = "run"
    _run_tooltip = ""

    def _controls(self) -> list:
        """The tool's control rows (built once, in the constructor; the run button exists)."""
        raise NotImplementedError

    def _connect(self) -> None:
        """Observers of the built view (its traits, its controls): none by default."""

    def run(self) -> None:
        """Ask the session for the tool's answer about the prompt."""
        raise NotImplementedError

    @property
    def shown_prompt(self) -> str | None:
        """The prompt of the answer shown (None before one)."""
        answer = getattr(self, self._shown_as)
        return None if answer is None else answer.prompt

    def export_section(self, selected_token: int = -1) -> str:
        """The tool's part of the explorer's HTML export (`figures.html`), or "" before an answer."""
        raise NotImplementedError
