"""The prompt as text, each token shaded by a signed value: how a per-token answer reads
at any length (occlusion's change in the answer, say), where an axis of 300 token labels
cannot be read.

    shaded = ShadedText.of(texts, values, caption="Δ logit of ' Paris'", unit="logit")
    shaded.strongest(5)        # [(position, shown text, value)], largest |value| first
    shaded.alpha(3)            # how strongly token 3 is shaded, 0..1

Data only: `widgets.shaded_text.ShadedTextView` draws it in the browser (``js/shaded_text.js``). A
value's sign picks the colour (`NEGATIVE` / `POSITIVE`, the effect heatmaps' ends); its
size against ``half`` the strength; NaN (not known yet) is left plain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .tokens import show_token

__all__ = ["FULL_SHADE", "NEGATIVE", "POSITIVE", "ShadedText", "shaded_html"]

#: The shades of a negative and a positive value ("r, g, b"): RdBu's ends, as the effect
#: heatmaps colour them.
NEGATIVE = "33, 102, 172"
POSITIVE = "178, 24, 43"
#: Tokens listed as the strongest, unless asked otherwise.
STRONGEST = 5
#: The opacity of a full shade: the token's text stays legible on it, light or dark.
FULL_SHADE = 0.85


@dataclass(frozen=True)
class ShadedText:
    """``tokens``: each token as shown (`show_token`); ``values``: float32 ``[n]``, NaN
    where none is known yet; ``half``: the size at which a shade is full; ``notes``: each
    token's tooltip; ``caption``: what the values are; ``unit``: their name, short."""

    tokens: tuple[str, ...]
    values: np.ndarray
    half: float
    notes: tuple[str, ...]
    caption: str = ""
    unit: str = ""

    @classmethod
    def of(
        cls, texts, values, *, caption: str = "", unit: str = "", notes=None, half: float | None = None
    ) -> "ShadedText":
        """From raw token texts and their values (``half``: the largest size by default)."""
        values = np.asarray(values, dtype=np.float32).reshape(-1)
        if len(values) != len(texts):
            raise ValueError(f"{len(values)} values for {len(texts)} tokens")
        finite = np.abs(values[np.isfinite(values)])
        if half is None:
            half = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        shown = tuple(show_token(text) for text in texts)
        if notes is None:
            notes = tuple(
                f"{i}: {token}" + ("" if not np.isfinite(v) else f" · {unit} {v:+.3f}".replace("  ", " "))
                for i, (token, v) in enumerate(zip(shown, values, strict=True))
            )
        values.setflags(write=False)
        return cls(shown, values, float(half), tuple(notes), caption, unit)

    def alpha(self, position: int) -> float:
        """How strongly token ``position`` is shaded: ``|value| / half``, at most 1 (0 for NaN)."""
        value = float(self.values[position])
        return 0.0 if not np.isfinite(value) else min(1.0, abs(value) / self.half)

    def shade(self, position: int) -> str:
        """Token ``position``'s background as CSS ("" for NaN): its sign's colour at
        `alpha` times `FULL_SHADE` (the browser view draws the same)."""
        value = float(self.values[position])
        if not np.isfinite(value):
            return ""
        return f"rgba({NEGATIVE if value < 0 else POSITIVE}, {self.alpha(position) * FULL_SHADE:.3f})"

    def strongest(self, count: int = STRONGEST) -> list[tuple[int, str, float]]:
        """The ``count`` tokens of largest ``|value|``, largest first (NaN left out)."""
        known = np.flatnonzero(np.isfinite(self.values))
        order = known[np.argsort(-np.abs(self.values[known]), kind="stable")][:count]
        return [(int(i), self.tokens[i], float(self.values[i])) for i in order]


def shaded_html(shaded: ShadedText, strongest: int = STRONGEST, *, ident: str = "") -> str:
    """``shaded`` as static HTML (the page export): the caption, the text with each token's
    shade and its note as a tooltip (in a box of id ``ident``, if given), and the strongest
    tokens listed. Every text escaped."""
    import html

    def esc(text: str) -> str:
        return html.escape(text, quote=True)

    spans = "".join(
        f'<span class="shaded-token" title="{esc(note)}"'
        + (f' style="background: {shade}"' if (shade := shaded.shade(i)) else "")
        + f">{esc(token)}</span>"
        for i, (token, note) in enumerate(zip(shaded.tokens, shaded.notes, strict=True))
    )
    listed = ", ".join(f"<code>{esc(token)}</code> {value:+.3f}" for _, token, value in shaded.strongest(strongest))
    box = f'<div class="shaded" id="{esc(ident)}">' if ident else '<div class="shaded">'
    return f'<p class="meta">{esc(shaded.caption)}</p>\n{box}{spans}</div>\n' + (
        f'<p class="meta">strongest ({esc(shaded.unit or "value")}): {listed}</p>' if listed else ""
    )
