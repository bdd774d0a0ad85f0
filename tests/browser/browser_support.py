"""Shared by the browser tests: Debian's Chromium, its flags, a text-contrast probe.

The tests drive /usr/bin/chromium (apt) through the ``playwright`` Python package; no
``playwright install``. ``require_browser()`` skips a test module when either is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "artifacts" / "screenshots"

CHROME_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def require_browser():
    """Skip the calling module unless Chromium and playwright are there; returns ``playwright.sync_api``."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found (apt-get install -y chromium)", allow_module_level=True)
    return pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install playwright)")


# Contrast of an element's text against the background actually painted behind it
# (backgrounds composited up the ancestor chain, text colour alpha composited on top).
CONTRAST_JS = """
(sel) => {
  const el = typeof sel === 'string' ? document.querySelector(sel) : sel;
  if (!el) return null;
  function parse(c) {
    let m = c.match(/^rgba?\\(([^)]+)\\)$/);
    if (m) {
      const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
      return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
    }
    m = c.match(/^color\\(srgb ([^)]+)\\)$/);
    if (m) {
      const p = m[1].split(/[\\s\\/]+/).filter(Boolean).map(Number);
      return [p[0] * 255, p[1] * 255, p[2] * 255, p.length > 3 ? p[3] : 1];
    }
    throw new Error('unparsed colour ' + c);
  }
  const over = (top, under) => {
    const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + under[i] * (1 - a)).concat([1]);
  };
  const layers = [];
  for (let n = el; n; n = n.parentElement) {
    const cs = getComputedStyle(n);
    const c = parse(cs.backgroundColor);
    const op = Number(cs.opacity);
    if (c[3] > 0) layers.push(c);
    if (c[3] >= 1) break;
  }
  let bg = [255, 255, 255, 1];
  for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg);
  let op = 1;
  for (let n = el; n; n = n.parentElement) op *= Number(getComputedStyle(n).opacity);
  const fg0 = parse(getComputedStyle(el).color);
  const fg = over([fg0[0], fg0[1], fg0[2], fg0[3] * op], bg);
  const lum = (c) => {
    const [r, g, b] = c.slice(0, 3).map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const L1 = lum(fg), L2 = lum(bg);
  return { ratio: (Math.max(L1, L2) + 0.05) / (Math.min(L1, L2) + 0.05), fg, bg };
}
"""
