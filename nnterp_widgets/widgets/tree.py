"""`ModuleTree`: the model's modules and standard values (anywidget; front end in js/)."""

from __future__ import annotations

import itertools
from typing import Any

import anywidget
import numpy as np
import traitlets

from ..session import PromptResult, Session
from .assets import MODULE_TREE_ESM

_ids = itertools.count()


class ModuleTree(anywidget.AnyWidget):
    """The module tree of the session's model.

    Unavailable values are greyed with their reason on hover; clicking a served value
    previews it for the current prompt. ``ModuleTree(session, prompt="...")`` runs its
    own prompt; inside an `Explorer` the explorer feeds it.
    """

    _esm = MODULE_TREE_ESM
    tree = traitlets.List().tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    preview = traitlets.Dict().tag(sync=True)
    preview_data = traitlets.Bytes(b"").tag(sync=True)
    status = traitlets.Dict({"state": "idle", "message": ""}).tag(sync=True)
    prompt_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    selected_token = traitlets.Int(-1).tag(sync=True)
    #: The page's theme as the front end sees it ("light" / "dark"); JS writes it.
    theme = traitlets.Unicode("light").tag(sync=True)

    def __init__(self, session: Session | None = None, prompt: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.session = session if session is not None else Session.open()
        self.result: PromptResult | None = None
        self._key = f"tree-{next(_ids)}"
        self.observe(self._on_selected, names="selected")
        if self.session.ready:
            self.tree = self.session.tree()
        else:
            self.status = {"state": "busy", "message": "starting the engine"}
            self.session.on_ready(self._on_ready)
        if prompt is not None:
            self.run(prompt)

    def _on_ready(self, future) -> None:
        if future.exception() is not None:
            self.set_status("error", f"the engine failed to start: {future.exception()}")
        elif self.result is None:
            self.tree = self.session.tree()
            self.set_status("idle", "")

    def run(self, prompt: str) -> None:
        """Ask the session for ``prompt`` (one engine request) and show it when it lands."""
        self.set_status("busy", "running the prompt")
        self.session.prompt(prompt, key=self._key).add_done_callback(self._landed)

    def _landed(self, future) -> None:
        from ..session import Superseded

        error = future.exception()
        if isinstance(error, Superseded):
            return
        if error is not None:
            self.set_status("error", str(error))
            return
        self.update(future.result())

    def update(self, result: PromptResult) -> None:
        """Show ``result``'s prompt: shapes on every value, token chips, fresh preview."""
        self.result = result
        with self.hold_sync():
            self.tree = self.session.tree(result)
            self.prompt_tokens = list(result.tokens.texts)
            if self.selected_token >= len(result.tokens):
                self.selected_token = -1
            self._send_preview()
            self.status = {"state": "idle", "message": ""}

    def set_status(self, state: str, message: str) -> None:
        self.status = {"state": "error" if state == "error" else ("busy" if state in ("busy", "starting", "reopening") else "idle"),
                       "message": message}

    def _on_selected(self, change) -> None:
        self._send_preview()

    def _send_preview(self) -> None:
        summary = self.result.values.get(self.selected) if self.result is not None else None
        if summary is None:
            self.preview, self.preview_data = {}, b""
            return
        texts = self.result.tokens.texts
        rows = [texts[i] if i < len(texts) else str(i) for i in summary.row_tokens]
        if summary.shape and len(summary.shape) >= 2 and summary.shape[1] != len(texts):
            rows = [str(i) for i in summary.row_tokens]  # not a per-token value (logits)
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
