"""`IntegerBox`: the one box a view takes a whole number in (tokens to write, a layer, a head).

    box = IntegerBox(8, minimum=1, maximum=256, description="tokens")
    box.text.value = "1.5"      # refused in place: box.valid is False, box.note says why
    box.value                   # still 8: a refused entry is never rounded or clamped
    box.text.value = "12"
    box.value, box.valid        # 12, True

A number box of the browser's own (ipywidgets' IntText) turns "1.5" into 15 or 1 and "-1"
into the minimum without a word; this box keeps what was typed, says what it takes, and a
view asks nothing while one of its boxes holds a refused entry (`valid`).
"""

from __future__ import annotations

import re

import ipywidgets
import traitlets

__all__ = ["IntegerBox", "parse_integer"]

#: A whole number as typed: digits, with a sign.
WHOLE = re.compile(r"[+-]?\d+")


NOT_WHOLE = "{name} {text!r}: type a whole number{span}"


OUT_OF_RANGE = "{name} {value} is out of range: type a whole number{span}"


def _span(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f" from {minimum} to {maximum}"
    if minimum is not None:
        return f" of at least {minimum}"
    return "" if maximum is None else f" of at most {maximum}"


def parse_integer(text: str, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """``text`` as a whole number in ``minimum..maximum``; a `ValueError` saying what is
    taken otherwise (never rounded, never clamped)."""
    typed = str(text).strip()
    if not WHOLE.fullmatch(typed):
        raise ValueError(NOT_WHOLE.format(name=name, text=typed, span=_span(minimum, maximum)))
    value = int(typed)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(OUT_OF_RANGE.format(name=name, value=value, span=_span(minimum, maximum)))
    return value


class IntegerBox(ipywidgets.HBox):
    """A text box that takes a whole number in a range, and says so in place when it is
    given anything else (see the module's docstring).

    Args:
        value: the starting number.
        minimum, maximum: the range taken (None: unbounded on that side).
        description: the box's label, also the name in its refusals.
    """

    value = traitlets.Int()
    valid = traitlets.Bool(True)

    def __init__(
        self, value: int, *, minimum: int | None = None, maximum: int | None = None, description: str = "", **kwargs
    ) -> None:
        self.minimum, self.maximum, self.name = minimum, maximum, description
        self.text = ipywidgets.Text(
            value=str(value),
            description=description,
            style={"description_width": "initial"},
            layout=ipywidgets.Layout(width="150px"),
            tooltip=f"a whole number{_span(minimum, maximum)}",
        )
        self.note = ipywidgets.HTML("")
        super().__init__([self.text, self.note], **kwargs)
        self.add_class("nnw-integer")  # the browser tests find every number box by it
        self.value = int(value)
        self.text.observe(self._typed, "value")
        self.observe(self._set, "value")

    def set_range(self, minimum: int | None, maximum: int | None) -> None:
        """A new range (the model's layers, once known); the entry is checked again."""
        self.minimum, self.maximum = minimum, maximum
        self.text.tooltip = f"a whole number{_span(minimum, maximum)}"
        self._typed({"new": self.text.value})

    @property
    def refusal(self) -> str:
        """Why the entry is refused ("" when it is taken)."""
        try:
            parse_integer(self.text.value, self.name, self.minimum, self.maximum)
        except ValueError as error:
            return str(error)
        return ""

    def _typed(self, change) -> None:
        try:
            number = parse_integer(change["new"], self.name, self.minimum, self.maximum)
        except ValueError as error:
            self.valid = False
            self.note.value = f'<span style="color: var(--jp-error-color1, red)">⚠ {_escape(str(error))}</span>'
            self.text.add_class("nnw-refused")
            return
        self.valid, self.note.value = True, ""
        self.text.remove_class("nnw-refused")
        self.value = number

    def _set(self, change) -> None:
        if str(change["new"]) != self.text.value.strip():
            self.text.value = str(change["new"])


def _escape(text: str) -> str:
    import html

    return html.escape(text, quote=False)
