/**
 * module_tree/preview.js: the selected value's preview: its shape, dtype and statistics,
 * and a slice of it as a heat table whose rows are the prompt's tokens (clicking a row's
 * token selects it). The numbers come as the `preview_data` bytes (float32).
 */

import { asArray, asInt, asObj, asStr, h, readFloats } from "./dom.js";
import { NEG_RGB, POS_RGB, fmt, fmtFull, fmtShape, heatColor, showToken } from "./format.js";
import { toggleToken } from "./chips.js";

/** The preview pane of one view: ``{ el, render }``. */
export function previewPane({ model, on }) {
  const previewEl = h("div", { class: "nnw-mt-previewpane", role: "region", "aria-label": "Value preview" });

  function renderPreview() {
    const p = asObj(model.get("preview"));
    const sel = asStr(model.get("selected"));
    const selTok = asInt(model.get("selected_token"), -1);
    previewEl.replaceChildren();
    if (!p.id) {
      const text = sel ? `Waiting for a preview of ${sel}\u2026` : "Select a value in the tree to preview it.";
      previewEl.append(h("div", { class: "nnw-mt-placeholder" }, text));
      return;
    }
    const stale = sel !== "" && sel !== asStr(p.id);
    const box = h("div", { class: "nnw-mt-preview" + (stale ? " nnw-mt-stale" : "") });
    previewEl.append(box);

    const head = h("div", { class: "nnw-mt-phead" }, h("span", { class: "nnw-mt-pid" }, asStr(p.id)));
    if (Array.isArray(p.shape)) head.append(h("span", { class: "nnw-mt-shape" }, fmtShape(p.shape)));
    if (p.dtype) head.append(h("span", { class: "nnw-mt-dtype" }, asStr(p.dtype)));
    if (stale) head.append(h("span", { class: "nnw-mt-meta" }, "(previous selection)"));
    box.append(head);

    const stats = asObj(p.stats);
    const statsEl = h("div", { class: "nnw-mt-stats" });
    let first = true;
    for (const [k, label] of [
      ["min", "min"],
      ["max", "max"],
      ["mean", "mean"],
      ["norm", "norm"],
    ]) {
      if (!(k in stats)) continue;
      if (!first) statsEl.append("  ");
      first = false;
      statsEl.append(h("span", { class: "nnw-mt-k" }, label + " "), fmt(stats[k]));
    }
    if (!first) box.append(statsEl);

    const labels = asArray(p.rows).map((x) => asStr(x));
    const cols = Math.max(0, asInt(p.cols, 0));
    const nrows = labels.length;
    if (!nrows || !cols) return;
    const rowTokens = asArray(p.row_tokens);
    const { values, got } = readFloats(model.get("preview_data"), nrows * cols);
    let maxAbs = 0;
    for (let i = 0; i < got; i++) {
      const a = Math.abs(values[i]);
      if (Number.isFinite(a) && a > maxAbs) maxAbs = a;
    }

    const bar = h("span", { class: "nnw-mt-legend-bar", "aria-hidden": "true" });
    bar.style.backgroundImage = `linear-gradient(to right, rgb(${NEG_RGB.join(",")}), transparent, rgb(${POS_RGB.join(",")}))`;
    box.append(h("div", { class: "nnw-mt-legend" }, fmt(-maxAbs), bar, "+" + fmt(maxAbs)));

    const table = h("table", { class: "nnw-mt-heat" });
    const lastDim = Array.isArray(p.shape) && p.shape.length ? p.shape[p.shape.length - 1] : null;
    let cap = `${nrows} token${nrows === 1 ? "" : "s"} \u00d7 ${cols} column${cols === 1 ? "" : "s"}`;
    if (lastDim !== null && lastDim > cols) cap += ` (first ${cols} of ${lastDim})`;
    if (got < nrows * cols) cap += ` \u2014 preview_data holds ${got} of ${nrows * cols} values`;
    table.append(h("caption", null, cap));
    const body = h("tbody");
    for (let i = 0; i < nrows; i++) {
      const tok = asInt(rowTokens[i], i);
      const tr = h("tr", { "data-token": tok, class: tok === selTok ? "nnw-mt-tokrow" : null });
      tr.append(
        h(
          "th",
          { scope: "row", class: "nnw-mt-rowlabel", title: `token ${tok}: ${JSON.stringify(labels[i])}` },
          showToken(labels[i]),
        ),
      );
      for (let j = 0; j < cols; j++) {
        const v = values[i * cols + j];
        const num = fmtFull(v);
        const td = h("td", { class: "nnw-mt-cell", title: `${num} (token ${tok}, col ${j})`, "aria-label": num });
        const c = heatColor(v, maxAbs);
        if (c === null) td.classList.add("nnw-mt-nan");
        else td.style.backgroundColor = c;
        tr.append(td);
      }
      body.append(tr);
    }
    table.append(body);
    box.append(table);
  }

  on(previewEl, "click", (e) => {
    const th = e.target.closest(".nnw-mt-rowlabel");
    if (!th) return;
    const tr = th.closest("tr");
    toggleToken(model, asInt(tr && tr.dataset.token, -1));
  });

  return { el: previewEl, render: renderPreview };
}
