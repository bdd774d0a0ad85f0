/**
 * module_tree/format.js: how numbers, shapes and token texts are written, and the
 * preview's colours.
 */

import { asStr, h, lower } from "./dom.js";

export const NEG_RGB = [67, 147, 195]; // RdBu blue, mid luminance: legible on light and dark
export const POS_RGB = [214, 96, 77]; // RdBu red

export function fmtShape(shape) {
  return Array.isArray(shape) ? "[" + shape.join(", ") + "]" : "";
}

/** Short number for stats/legend. */
export function fmt(x) {
  if (x === null || x === undefined || x === "") return "\u2014"; // JSON has no NaN: null
  if (typeof x !== "number") x = Number(x);
  if (Number.isNaN(x)) return "NaN";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (a >= 1e5 || a < 1e-3) return x.toExponential(2);
  return String(Number(x.toPrecision(4)));
}

/** Longer number for cell titles. */
export function fmtFull(x) {
  if (Number.isNaN(x)) return "NaN";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  return String(Number(x.toPrecision(6)));
}

/**
 * Token text for display, the one rule of nnterp_widgets/figures/tokens.py (`show_token`;
 * tests/token_cases.json holds the cases both must pass): "" is "\u2205"; space, newline,
 * carriage return and tab become visible marks; every other control, format or separator
 * character becomes `\u{XXXX}`. The result is text, put in the DOM with textContent only.
 */
const VISIBLE = { " ": "\u2423", "\n": "\u21b5", "\r": "\u240d", "\t": "\u21e5" };
const ESCAPED = /^[\p{Cc}\p{Cf}\p{Z}]$/u;

export function showToken(t) {
  const s = asStr(t);
  if (s === "") return "\u2205";
  let shown = "";
  for (const ch of s) {
    if (Object.hasOwn(VISIBLE, ch)) shown += VISIBLE[ch];
    else if (ESCAPED.test(ch)) shown += "\\u{" + ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0") + "}";
    else shown += ch;
  }
  return shown;
}

export function heatColor(v, maxAbs) {
  if (!Number.isFinite(v)) return null;
  if (!(maxAbs > 0)) return "transparent";
  const t = Math.min(1, Math.abs(v) / maxAbs);
  const c = v < 0 ? NEG_RGB : POS_RGB;
  return `rgba(${c[0]}, ${c[1]}, ${c[2]}, ${Math.round(t * 1000) / 1000})`;
}

/** Split `text` around case-insensitive occurrences of `q` (already lower-cased). */
export function highlighted(text, q) {
  if (!q) return [text];
  const out = [];
  const low = lower(text);
  let i = 0;
  for (;;) {
    const j = low.indexOf(q, i);
    if (j < 0) break;
    if (j > i) out.push(text.slice(i, j));
    out.push(h("mark", { class: "nnw-mt-hit" }, text.slice(j, j + q.length)));
    i = j + q.length;
  }
  if (i < text.length) out.push(text.slice(i));
  return out;
}
