"""`ModuleTree`: the model's modules and standard values (anywidget; front end in ../js/)."""

from __future__ import annotations

import itertools
from typing import Any

import anywidget
import numpy as np
import traitlets

from ..session import IDLE, Session, State, Status, session_of
from ..requests.prompt import PromptResult
from .assets import MODULE_TREE_CSS, MODULE_TREE_ESM, module_text
from .lifecycle import MAIN, Asking, one_at_a_time

#: What the tree says while the engine starts (its modules, shapes and reasons need none).
STARTING = "starting the engine: the tree and the tokens are from the model's files; values fill in when it is ready"

_ids = itertools.count()


class ModuleTree(Asking, anywidget.AnyWidget):
    """The module tree of the session's model.

    Unavailable values are greyed with their reason on hover; clicking a served value
    previews it for the current prompt (one engine request, cached by the session; the
    shapes come from the engine's description, without one). ``ModuleTree(session,
    prompt="...")`` runs its own prompt; inside an `Explorer` the explorer feeds it.

    Its prompt and the preview are asked for as every view asks (`Asking`): while a prompt
    of its own is on its way, a new selection waits for it (its answer asks for the
    selected value's preview).
    """

    _shown_as = "summary"
    _asks_for = "preview"

    #: The explorer dims the tree by its box, and clears it when the prompt lands.
    _clears_stale = False

    _esm = module_text(MODULE_TREE_ESM)  # the entry with its parts inlined (assets.py)
    _css = MODULE_TREE_CSS
    tree = traitlets.List().tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    preview = traitlets.Dict().tag(sync=True)
    preview_data = traitlets.Bytes(b"").tag(sync=True)
    status = traitlets.Dict(IDLE.to_json()).tag(sync=True)
    prompt_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    selected_token = traitlets.Int(-1).tag(sync=True)
    #: The page's theme as the front end sees it ("light" / "dark"); JS writes it.
    theme = traitlets.Unicode("light").tag(sync=True)
    #: A generation step whose availability the tree shows (``-1``: none, the prompt's own
    #: pass): on a decode step the pattern is greyed with the engine's reason.
    step = traitlets.Int(-1)

    def __init__(
        self, session: Session | None = None, prompt: str | None = None, *, key: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.session = session_of(session)
        self.result: PromptResult | None = None
        self.summary = None  # the previewed value's ValueSummary
        self._key = key if key is not None else f"tree-{next(_ids)}"
        self._init_asking()
        self._running = False  # a prompt of its own is on its way
        self._closed = False
        self.observe(self._on_selected, names="selected")
        self.observe(lambda change: self._show_tree(), names="step")
        if self.session.described.done():
            self.tree = self.session.tree()
        else:  # drawn as soon as the tree exists, seconds before the engine is ready
            self.session.on_described(lambda: self._kernel.call(self._on_described))
        if not self.session.ready:
            self.set_status(State.BUSY, STARTING)
            self.session.on_ready(lambda: self._kernel.call(self._on_ready))
        if prompt is not None:
            self.run(prompt)

    def _on_described(self) -> None:
        if not self._closed and self.result is None and not self.tree:
            self.tree = self.session.tree()

    def _on_ready(self) -> None:
        if self._closed:
            return
        if self.session.start_error is not None:
            self.set_status("error", f"the engine failed to start: {self.session.start_error}")
        elif self.result is None:
            if not self.prompt_tokens:
                self.tree = self.session.tree()
            self.set_status(State.IDLE)

    def outline(self, tokens) -> None:
        """Before the engine is ready: ``tokens``' chips and the tree's shapes for their
        count (`Session.tokens`: the tokenizer only), marked as waiting for the engine."""
        if self._closed or self.result is not None:
            return
        with self.hold_sync():
            self.tree = self.session.tree(len(tokens))
            self.prompt_tokens = list(tokens.texts)

    @one_at_a_time
    def run(self, prompt: str) -> None:
        """Ask the session for ``prompt`` (one engine request) and show it when it lands."""
        self.set_status(State.BUSY, "running the prompt")
        self._running = True
        self._ask(lambda: self.session.prompt(prompt, key=self._key), self._landed)

    def _landed(self, result: PromptResult) -> None:
        if not self._closed:
            self.update(result)

    def _show_error(self, error: BaseException, line: str = MAIN) -> None:
        self._running = False
        super()._show_error(error, line)

    def update(self, result: PromptResult) -> None:
        """Show ``result``'s prompt: shapes on every value (from the engine's description),
        token chips, and the selected value's preview asked for again."""
        self.result = result
        self._running = False
        with self.hold_sync():
            self._show_tree()
            self.prompt_tokens = list(result.tokens.texts)
            if self.selected_token >= len(result.tokens):
                self.selected_token = -1
            self.status = IDLE.to_json()
        self._ask_preview()

    def _show_tree(self) -> None:
        """The tree for the prompt's length, its availability on ``step`` (no request); on
        a decode step the values hold that step's one token."""
        if self.session.described.done():
            tokens = len(self.result.tokens) if self.result is not None else (len(self.prompt_tokens) or None)
            if self.step > 0:
                tokens = 1
            self.tree = self.session.tree(tokens, step=self.step if self.step >= 0 else None)

    def set_status(self, state: State | str, message: str = "") -> None:
        """Show a `Status` (``"idle"``, ``"busy"`` or ``"error"``, and its message)."""
        self.status = Status(state, message).to_json()

    def close(self) -> None:
        """Close the view; an answer still on its way is dropped."""
        self._closed = True
        super().close()

    def _on_selected(self, change) -> None:
        self._ask_preview()

    def _ask_preview(self) -> None:
        """One request for the selected value's summary (cached by the session)."""
        if self._running:
            return  # the prompt's answer asks for it
        result, selected = self.result, self.selected
        self.summary = None
        self.preview, self.preview_data = {}, b""
        if result is None or not selected:
            self._ask_nothing()
            return
        self.set_status(State.BUSY, "previewing the value")
        self._ask(
            lambda: self.session.value(result.prompt, selected, key=self._key, ablate=result.ablate),
            lambda summary: self._preview_landed(result, summary),
        )

    def _preview_landed(self, result: PromptResult, summary) -> None:
        if self._closed:
            return
        self._send_preview(result, summary)
        self.set_status(State.IDLE)

    def _send_preview(self, result: PromptResult, summary) -> None:
        self.summary = summary
        texts = result.tokens.texts
        rows = [texts[i] if i < len(texts) else str(i) for i in summary.row_tokens]
        if summary.shape and len(summary.shape) >= 2 and summary.shape[1] != len(texts):
            rows = [str(i) for i in summary.row_tokens]  # not a per-token value (logits)
        with self.hold_sync():
            self.preview = {
                "id": summary.id,
                "shape": list(summary.shape),
                "dtype": summary.dtype,
                "stats": summary.stats,
                "rows": rows,
                "row_tokens": list(summary.row_tokens),
                "cols": int(summary.preview.shape[1]),
                "total_cols": summary.total_cols,
            }
            self.preview_data = np.ascontiguousarray(summary.preview, dtype="<f4").tobytes()
