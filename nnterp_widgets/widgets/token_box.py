"""`TokenBox`: the box a tool takes one token's text in (an answer, a foil), with the text
shown as the model sees it.

    box = TokenBox(session, " Paris", description="answer")
    box.value             # " Paris": what the request gets
    box.hint.value        # "␣Paris · one token": the leading space made visible
    box.value = "Paris"   # the hint offers "␣Paris" where that is one token and this is not
                          # written after a space (box.spaced_button sets it)

A text box shows a leading space as nothing; after a word, a model's next token usually
starts with one, so "Paris" and " Paris" are different tokens and a typed "Paris" silently
scores the other. The hint says which token the box holds (the package's one token
formatter), how many tokens the text is, and offers the spaced form.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets
import traitlets

from ..figures.tokens import show_token

__all__ = ["TokenBox"]

#: What the hint says of the text in the box.
ONE_TOKEN = "{shown} · one token"
TOKENS = "{shown} · {count} tokens ({pieces}): give one token"
SPACED = "{shown} is one token, and so is {spaced} (with the leading space that usually follows a word)"


class TokenBox(ipywidgets.VBox):
    """A token's text box and its hint (see the module's docstring).

    Args:
        session: the session whose tokenizer reads the text (once it is described).
        value: the starting text.
        description: the box's label.
        width: the text box's width.
    """

    value = traitlets.Unicode("")

    def __init__(self, session: Any, value: str = "", *, description: str = "", width: str = "220px") -> None:
        self.text = ipywidgets.Text(value=value, description=description, layout=ipywidgets.Layout(width=width))
        self.hint = ipywidgets.HTML("")
        self.spaced_button = ipywidgets.Button(description="", layout=ipywidgets.Layout(display="none", width="auto"))
        # The hint under the box, so a row of boxes keeps its width.
        super().__init__([self.text, ipywidgets.HBox([self.hint, self.spaced_button])])
        self._tokenizer = None
        traitlets.link((self.text, "value"), (self, "value"))
        self.observe(lambda change: self._say(), "value")
        self.spaced_button.on_click(lambda button: setattr(self, "value", " " + self.value))
        on_described = getattr(session, "on_described", None)
        if on_described is not None:
            on_described(lambda: self._know(session))
        self._say()

    def _know(self, session: Any) -> None:
        try:
            self._tokenizer = session.tokenizer()
        except Exception:  # noqa: BLE001 - no tokenizer: the hint shows the text alone
            self._tokenizer = None
        self._say()

    def _count(self, text: str) -> list[int]:
        return list(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def _say(self) -> None:
        text = self.value
        shown = show_token(text)
        self.spaced_button.layout.display = "none"
        if not text or self._tokenizer is None:
            self.hint.value = f"<code>{html.escape(shown)}</code>" if text else ""
            return
        ids = self._count(text)
        if len(ids) != 1:
            pieces = " + ".join(show_token(self._tokenizer.decode([i])) for i in ids)
            said = TOKENS.format(shown=shown, count=len(ids), pieces=pieces)
        else:
            said = ONE_TOKEN.format(shown=shown)
        if not text.startswith(" ") and len(self._count(" " + text)) == 1:
            spaced = show_token(" " + text)
            if len(ids) == 1:
                said = SPACED.format(shown=shown, spaced=spaced)
            self.spaced_button.description = f"use {spaced}"
            self.spaced_button.tooltip = f"score {spaced!s}, the form with the leading space"
            self.spaced_button.layout.display = ""
        self.hint.value = f'<span class="nnw-token-hint">{html.escape(said)}</span>'
