/**
 * ShadedText — the prompt as text, each token shaded by a signed value (anywidget;
 * widgets/shaded_text.py). Occlusion draws its answer this way: a token's shade is how
 * much the answer changes when that token is occluded, so a paragraph of 300 tokens reads
 * as a paragraph. Under the text, the strongest tokens are listed; a click on a token (or
 * on one listed, or Enter) selects it. Token text is always set as text, never markup.
 *
 * CONTRACT (all traits sync=True):
 *   tokens    List[str]  read   each token as shown (the package's one token formatter)
 *   values    Bytes      read   float32 [n]: each token's value (NaN: not known yet)
 *   half      Float      read   the size at which a shade is full
 *   notes     List[str]  read   each token's tooltip
 *   strongest List[int]  read   the positions listed under the text, strongest first
 *   unit      Unicode    read   the values' short name ("Δ logit")
 *   caption   Unicode    read   what the values are
 *   negative  Unicode    read   the shade of a negative value, "r, g, b"
 *   positive  Unicode    read   the shade of a positive value, "r, g, b"
 *   full      Float      read   the opacity of a full shade
 *   selected  Int        r/w    the selected token (-1: none); the JS writes it on a click
 */

import { floatsOf, h } from "./module_tree/dom.js";

function signed(value) {
  return (value >= 0 ? "+" : "−") + Math.abs(value).toFixed(2);
}

function render({ model, el }) {
  const ac = new AbortController();
  const on = (target, type, fn) => target.addEventListener(type, fn, { signal: ac.signal });
  const caption = h("div", { class: "nnw-shaded-caption" });
  const body = h("div", { class: "nnw-shaded-body nnw-chips", tabindex: 0, role: "group" });
  const listed = h("div", { class: "nnw-shaded-strongest" });
  const root = h("div", { class: "nnw-shaded" }, caption, body, listed);
  el.append(root);
  let spans = [];

  function select(position) {
    model.set("selected", position);
    model.save_changes();
    marks(); // at once, whatever the model's own change event does
  }

  function marks() {
    const chosen = model.get("selected");
    spans.forEach((span, i) => span.classList.toggle("nnw-chip-selected", i === chosen));
  }

  function draw() {
    const tokens = model.get("tokens") || [];
    const values = floatsOf(model.get("values"));
    const notes = model.get("notes") || [];
    const half = model.get("half") || 1;
    const negative = model.get("negative");
    const full = model.get("full");
    const positive = model.get("positive");
    caption.textContent = model.get("caption") || "";
    body.setAttribute("aria-label", model.get("caption") || "shaded text");
    body.replaceChildren();
    spans = tokens.map((text, i) => {
      const span = document.createElement("span");
      span.className = "nnw-chip nnw-shaded-token";
      span.textContent = text;
      span.title = notes[i] || text;
      const value = values[i];
      if (Number.isFinite(value)) {
        const alpha = Math.min(1, Math.abs(value) / half) * full;
        span.style.backgroundColor = `rgba(${value < 0 ? negative : positive}, ${alpha.toFixed(3)})`;
      } else {
        span.classList.add("nnw-shaded-unknown");
      }
      span.dataset.position = String(i);
      body.append(span);
      return span;
    });
    listed.replaceChildren();
    const strongest = model.get("strongest") || [];
    if (strongest.length) {
      const lead = document.createElement("span");
      lead.textContent = `strongest (${model.get("unit") || "value"}): `;
      listed.append(lead);
      strongest.forEach((position, k) => {
        const item = document.createElement("button");
        item.type = "button";
        item.className = "nnw-shaded-item";
        item.textContent = `${tokens[position]} @${position} ${signed(values[position])}`;
        item.title = notes[position] || "";
        on(item, "click", () => select(position));
        if (k) listed.append(document.createTextNode(" "));
        listed.append(item);
      });
    }
    marks();
  }

  on(body, "click", (event) => {
    const span = event.target.closest(".nnw-shaded-token");
    if (span) select(Number(span.dataset.position));
  });
  on(body, "keydown", (event) => {
    const count = spans.length;
    if (!count) return;
    const chosen = model.get("selected");
    if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
      const step = event.key === "ArrowRight" ? 1 : -1;
      select(Math.max(0, Math.min(count - 1, (chosen < 0 ? 0 : chosen + step))));
      spans[model.get("selected")].scrollIntoView({ block: "nearest" });
      event.preventDefault();
    }
  });
  const redraw = () => draw();
  for (const name of ["tokens", "values", "half", "notes", "strongest", "unit", "caption", "full"]) {
    model.on(`change:${name}`, redraw);
  }
  model.on("change:selected", marks);
  draw();
  return () => {
    ac.abort();
    for (const name of ["tokens", "values", "half", "notes", "strongest", "unit", "caption", "full"]) {
      model.off(`change:${name}`, redraw);
    }
    model.off("change:selected", marks);
  };
}

export default { render };
