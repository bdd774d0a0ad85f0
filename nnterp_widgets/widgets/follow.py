"""`FollowControl`: follow a token through the layers, and pick the lens mode.

A target token is typed (exactly one token's text) or picked by clicking a lens cell
with "pick by click" on (the cell's top-1 token, by id). The lens mode (`MODES`: the
top-1, the target's probability or rank, the entropy) switches the prompt's lens
(`LogitLens.show_modes`, from one ``session.follow`` request) and the generation's lens
(`GenerationView.show_mode`; a target mode asks the generation again, following the
target, when the one on screen follows another). A target the engine refuses (not one
token, outside the vocabulary) shows the session's message here and the lenses go back
to the top-1; the next request is served as usual.
"""

from __future__ import annotations

from typing import Any, Callable

import ipywidgets

from ..requests.generation import MODES, TARGET_MODES, LensModes
from .generation import GenerationView
from .lens import LogitLens
from .lifecycle import MAIN, Asking, close_all, one_at_a_time
from .plot_panel import row
from ..session import Session

__all__ = ["FollowControl", "NEEDS_A_TARGET", "PICK_HINT"]

#: Said when a target mode is picked with no target.
NEEDS_A_TARGET = "type a token to follow (or pick one: 'pick by click', then click a lens cell)"
#: The pick toggle's tooltip.
PICK_HINT = "on: a click on a lens cell follows that cell's top-1 token"


class FollowControl(Asking, ipywidgets.VBox):
    """``FollowControl(session, prompt, lens, generation, key)``: ``prompt`` gives the
    explorer's prompt; ``lens`` a `LogitLens`, ``generation`` a `GenerationView`."""

    _shown_as = "modes"
    _asks_for = "lens modes"

    def __init__(
        self,
        session: Session,
        prompt: Callable[[], str],
        lens: LogitLens,
        generation: GenerationView,
        key: str = "follow",
        **kwargs: Any,
    ) -> None:
        self.session = session
        self._prompt = prompt
        self.lens = lens
        self.generation = generation
        self.key = key
        self.modes: LensModes | None = None  # the prompt's, as last landed
        self._picked: dict = {}  # the last picked cell (its id is followed while the box shows its text)
        self._init_asking()
        self.target_box = ipywidgets.Text(
            value="",
            description="follow",
            placeholder="one token, e.g. ' Paris'",
            continuous_update=False,
            layout=ipywidgets.Layout(width="200px"),
        )
        self.mode_picker = ipywidgets.ToggleButtons(
            options=list(MODES),
            value="top-1",
            tooltips=list(MODES.values()),
            style=ipywidgets.ToggleButtonsStyle(button_width="70px"),
            layout=ipywidgets.Layout(width="auto"),
        )
        self.pick_toggle = ipywidgets.ToggleButton(
            value=False, description="pick by click", tooltip=PICK_HINT, layout=ipywidgets.Layout(width="auto")
        )
        self.message = ipywidgets.Label("")
        for view in (lens, generation):
            ipywidgets.dlink((self.pick_toggle, "value"), (view, "pick"))
            view.observe(one_at_a_time(self._on_picked), "picked")
        self._quiet = False
        self.target_box.observe(one_at_a_time(self._changed), "value")
        self.mode_picker.observe(one_at_a_time(self._changed), "value")
        super().__init__(
            [row([self.target_box, self.pick_toggle, ipywidgets.Label("lens mode"), self.mode_picker]), self.message],
            **kwargs,
        )

    @property
    def mode(self) -> str:
        return self.mode_picker.value

    @property
    def target(self) -> Any:
        """What is followed: the picked token's id while the box shows its text, else the
        box's text (``None`` when empty)."""
        text = self.target_box.value
        if self._picked and text == self._picked["text"]:
            return self._picked["id"]
        return text or None

    @one_at_a_time
    def follow(self, target: Any, mode: str | None = None) -> None:
        """Follow ``target`` (a token id or one token's text) in ``mode`` (``"probability"`` by default)."""
        if isinstance(target, int):
            text = self.session.tokenizer().decode([target])
            self._picked = {"id": target, "text": text}
            target = text
        self._quiet = True  # one refresh for both changes
        try:
            self.mode_picker.value = mode or (self.mode if self.mode in TARGET_MODES else "probability")
            self.target_box.value = target
        finally:
            self._quiet = False
        self.refresh()

    @one_at_a_time
    def refresh(self) -> None:
        """Draw both lenses in the current mode: one ``follow`` request for the prompt (none
        in top-1 mode), and the generation asked again if it follows another target."""
        mode, target = self.mode, self.target
        if mode == "top-1":
            self._ask_nothing()
            self.message.value = ""
            self._show(None, mode)
            return
        if mode in TARGET_MODES and target is None:
            self._ask_nothing()
            self.message.value = NEEDS_A_TARGET
            self._show(None, "top-1")
            return
        self.message.value = f"… following {target!r}" if mode in TARGET_MODES else f"… the lens's {mode}"
        wanted = target if mode in TARGET_MODES else None
        self._ask(
            lambda: self.session.follow(self._prompt(), wanted, key=self.key),
            lambda modes: self._followed(mode, wanted, modes),
        )

    def _followed(self, mode: str, wanted: Any, modes: LensModes) -> None:
        self.modes = modes
        self._show(modes, mode)
        followed = f"following {modes.target.text!r} (id {modes.target.id}) · " if modes.target is not None else ""
        self.message.value = followed + MODES[mode]
        self.generation.follow(wanted, again=mode in TARGET_MODES)

    def _show(self, modes: LensModes | None, mode: str) -> None:
        self.lens.show_modes(modes, mode)
        self.generation.show_mode(mode)

    def _show_error(self, error: BaseException, line: str = MAIN) -> None:
        self.message.value = f"⚠ {type(error).__name__}: {error}"
        self._show(None, "top-1")

    def _changed(self, change) -> None:
        if not self._quiet:
            self.refresh()

    def _on_picked(self, change) -> None:
        cell = change["new"]
        if cell:
            change["owner"].picked = {}  # so that picking the same cell again is a change
            self.follow(int(cell["id"]))

    def close(self) -> None:
        close_all(self.children)
        super().close()
