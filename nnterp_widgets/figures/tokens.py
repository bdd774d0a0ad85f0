"""The one rule for showing a token's text: the figures, the module tree's JS and the
export all show a token this way.

* ``""`` is ``"∅"`` (an empty label would be invisible);
* space, newline, carriage return and tab become ``␣``, ``↵``, ``␍``, ``⇥``, so ``" the"``
  and ``"the"`` differ at a glance and a newline never breaks a label;
* every other control, format or separator character (Unicode categories ``Cc``, ``Cf``,
  ``Z*``: NUL, zero-width joiners, no-break spaces, ...) becomes ``\\u{XXXX}``;
* nothing else changes: the result is plain text, and each medium escapes it for itself
  (the JS puts it in the DOM with ``textContent``; plotly labels go through
  :func:`.figures.escape_token`), so markup in a token is shown as text.

``js/module_tree.js`` (``showToken``) implements the same rule; ``tests/token_cases.json``
holds the cases every implementation is tested against.
"""

from __future__ import annotations

import unicodedata

__all__ = ["EMPTY", "ELLIPSIS", "VISIBLE", "show_token"]

EMPTY = "∅"
ELLIPSIS = "…"
VISIBLE = {" ": "␣", "\n": "↵", "\r": "␍", "\t": "⇥"}
_ESCAPED = ("Cc", "Cf", "Zs", "Zl", "Zp")


def _shown(char: str) -> str:
    if char in VISIBLE:
        return VISIBLE[char]
    if unicodedata.category(char) in _ESCAPED:
        return f"\\u{{{ord(char):04X}}}"
    return char


def show_token(text: str, max_chars: int | None = None) -> str:
    """``text`` as a token is shown; cut to ``max_chars`` characters (the last "…") if given."""
    if text == "":
        return EMPTY
    shown = "".join(_shown(char) for char in text)
    if max_chars is not None and len(shown) > max_chars:
        shown = shown[: max(0, max_chars - 1)] + ELLIPSIS
    return shown
