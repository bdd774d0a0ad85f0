/**
 * AttentionText — the attention view's token view (anywidget; widgets/attention_text.py).
 *
 * The prompt as text. Hover a token (or move to it with the arrow keys) and every token
 * it attends to is shaded by its weight in the shown head; a click (or Enter) selects it,
 * and the selected token is shaded while nothing is hovered. Shading never moves a token:
 * the hovered token is outlined, the selected one underlined, each weight is a tooltip. The shading is done here, so
 * a hover asks nothing of the kernel. Token text is always set as text, never as markup.
 *
 * CONTRACT (all traits sync=True):
 *   tokens    List[str]  read   each token as shown (the package's one token formatter)
 *   rows      List[int]  read   the queries whose weights are here: every one (a short prompt),
 *                               or the selected one (past the pattern side), or none
 *   weights   Bytes      read   those rows of the head's exact pattern, uint8 [rows, n]
 *                               row-major (weight * 255)
 *   scales    Bytes      read   float32 [rows]: each row's colour-scale top (its largest
 *                               weight off the first token; above it a cell saturates)
 *   shade     Unicode    read   the shade's colour as "r, g, b"
 *   caption   Unicode    read   which layer and head the weights are of
 *   selected  Int        r/w    the selected query (-1: none); the JS writes it on a click
 *
 * A hovered query whose row is not here is outlined, nothing shaded: a click selects it,
 * and the kernel sends its row.
 */

import { bytesOf, floatsOf, h } from "./module_tree/dom.js";

const HOW = "hover a token (or move with the arrow keys) to shade what it attends to; click it (or Enter) to select it";

function render({ model, el }) {
  const ac = new AbortController();
  const on = (target, type, fn) => target.addEventListener(type, fn, { signal: ac.signal });
  // The caption leads the text (one box, no line of its own: the view sits under the head grid).
  const caption = h("span", { class: "nnw-att-caption" });
  const body = h("span", { class: "nnw-att-body" });
  const root = h("div", { class: "nnw-att-text nnw-chips", tabindex: 0, role: "group" }, caption, body);
  el.append(root);

  let spans = [];
  let weights = new Uint8Array(0);
  let scales = new Float32Array(0);
  let rowOf = new Map(); // query -> its row in weights and scales
  let hovered = -1; // the query shaded while the pointer (or the keyboard cursor) is on it

  function count() {
    return spans.length;
  }

  function selected() {
    const value = Number(model.get("selected"));
    return Number.isInteger(value) && value >= 0 && value < count() ? value : -1;
  }

  function build() {
    const tokens = model.get("tokens") || [];
    const rows = model.get("rows") || [];
    weights = bytesOf(model.get("weights"));
    scales = floatsOf(model.get("scales"));
    rowOf = new Map(rows.map((query, index) => [Number(query), index]));
    body.replaceChildren();
    spans = [];
    hovered = -1;
    const consistent = weights.length === rows.length * tokens.length && scales.length === rows.length;
    if (!tokens.length || !consistent) {
      root.title = "";
      root.setAttribute("aria-label", "no pattern");
      caption.textContent = "";
      return;
    }
    tokens.forEach((text, index) => {
      const span = document.createElement("span");
      span.className = "nnw-chip nnw-att-token";
      span.dataset.index = String(index);
      span.textContent = String(text);
      spans.push(span);
    });
    body.append(...spans);
    // Said once per pattern: a caption that changed on hover would move the tokens under the pointer.
    const base = String(model.get("caption") || "");
    const every = rows.length === tokens.length;
    caption.textContent = base ? `${base} · ${every ? "hover" : "click"} a token: ` : "";
    root.title = HOW;
    root.setAttribute("aria-label", `the prompt's tokens: ${HOW}`);
    shade();
  }

  function shade() {
    const query = hovered >= 0 ? hovered : selected();
    const n = count();
    const rgb = String(model.get("shade") || "255, 45, 120");
    if (query < 0) {
      for (const span of spans) {
        span.style.background = "";
        span.classList.remove("nnw-att-after", "nnw-att-query", "nnw-chip-selected");
        span.removeAttribute("title");
      }
      return;
    }
    const chosen = selected();
    const index = rowOf.get(query);
    if (index === undefined) {
      for (const span of spans) {
        span.style.background = "";
        span.classList.remove("nnw-att-after");
        span.classList.toggle("nnw-att-query", span === spans[query]);
        span.classList.toggle("nnw-chip-selected", Number(span.dataset.index) === chosen);
        span.removeAttribute("title");
      }
      spans[query].title = "click to see what this token attends to";
      return;
    }
    const top = Math.max(scales[index] || 1, 1e-6);
    for (let key = 0; key < n; key++) {
      const span = spans[key];
      span.classList.toggle("nnw-att-query", key === query);
      span.classList.toggle("nnw-chip-selected", key === chosen);
      if (key > query) {
        span.style.background = "";
        span.classList.add("nnw-att-after");
        span.title = `key ${key}: after the query`;
        continue;
      }
      span.classList.remove("nnw-att-after");
      const weight = weights[index * n + key] / 255;
      const alpha = Math.min(1, weight / top);
      span.style.background = `rgba(${rgb}, ${alpha.toFixed(2)})`;
      span.title = `key ${key}: weight ${weight.toFixed(3)}`;
    }
  }

  function indexOf(target) {
    const span = target && target.closest ? target.closest(".nnw-att-token") : null;
    return span && body.contains(span) ? Number(span.dataset.index) : -1;
  }

  function choose(index) {
    if (index < 0 || index >= count()) return;
    model.set("selected", index);
    model.save_changes();
    shade();
  }

  on(body, "mouseover", (event) => {
    const index = indexOf(event.target);
    if (index >= 0 && index !== hovered) {
      hovered = index;
      shade();
    }
  });
  on(root, "mouseleave", () => {
    hovered = -1;
    shade();
  });
  on(body, "click", (event) => choose(indexOf(event.target)));
  on(root, "blur", () => {
    hovered = -1;
    shade();
  });
  on(root, "keydown", (event) => {
    const n = count();
    if (!n) return;
    const from = hovered >= 0 ? hovered : Math.max(selected(), 0);
    let next = null;
    if (event.key === "ArrowRight") next = Math.min(n - 1, hovered >= 0 ? from + 1 : from);
    else if (event.key === "ArrowLeft") next = Math.max(0, hovered >= 0 ? from - 1 : from);
    else if (event.key === "Home") next = 0;
    else if (event.key === "End") next = n - 1;
    else if (event.key === "Enter" || event.key === " ") {
      choose(from);
    } else if (event.key === "Escape") {
      hovered = -1;
      shade();
    } else return;
    event.preventDefault();
    event.stopPropagation(); // JupyterLab's notebook shortcuts never see these keys
    if (next !== null) {
      hovered = next;
      shade();
      spans[next].scrollIntoView({ block: "nearest" });
    }
  });

  const rebuilt = ["change:tokens", "change:rows", "change:weights", "change:scales", "change:caption"];
  const reshaded = ["change:selected", "change:shade"];
  for (const name of rebuilt) model.on(name, build);
  for (const name of reshaded) model.on(name, shade);
  build();
  return () => {
    for (const name of rebuilt) model.off(name, build);
    for (const name of reshaded) model.off(name, shade);
    ac.abort();
    root.remove();
  };
}

export default { render };
