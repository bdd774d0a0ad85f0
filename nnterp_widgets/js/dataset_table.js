/**
 * DatasetTable — a batch's prompts as a table (anywidget; widgets/dataset.py).
 *
 * One row a prompt: its index, its text, what it answered and the batch's metric. A click
 * on a column's head sorts by it (again: the other way); the filter box keeps the rows
 * whose prompt or answer holds its text. Only the rows in view are in the DOM, so a
 * batch of thousands scrolls as one of ten. A click on a row (or Enter on it) selects it:
 * the kernel opens that prompt in the explorer. Text is always set as text, never markup.
 *
 * CONTRACT (all traits sync=True):
 *   rows      List   read   [[index, prompt, answer, metric or null, error or null], ...]
 *   metric    Unicode read  the metric column's name
 *   caption   Unicode read  a line over the table (what the batch asked, how many answered)
 *   selected  Int    r/w    the selected prompt's index (-1: none); the JS writes it on a click
 *   theme     Unicode write "light" or "dark", the page's theme (as the module tree reports
 *                           it), so the set's plotly figure can follow it
 */

import { h } from "./module_tree/dom.js";
import { watchTheme } from "./module_tree/theme.js";

const ROW_HEIGHT = 24; // px: every row is one line, so the rows in view follow from the scroll offset
const SPARE = 8; // rows drawn above and below the view, so a fast scroll shows no gap
const COLUMNS = [
  ["#", 0, "nnw-ds-index"],
  ["prompt", 1, "nnw-ds-prompt"],
  ["answer", 2, "nnw-ds-answer"],
  ["metric", 3, "nnw-ds-metric"],
];

function shown(value) {
  if (value === null || value === undefined) return "—";
  return Math.abs(value) >= 1000 || (value !== 0 && Math.abs(value) < 0.001) ? value.toExponential(2) : value.toFixed(3);
}

function compare(a, b) {
  // Missing metrics last, whichever way the column is sorted.
  if (a === null || a === undefined) return b === null || b === undefined ? 0 : 1;
  if (b === null || b === undefined) return -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b));
}

function render({ model, el }) {
  const ac = new AbortController();
  const on = (target, type, fn) => target.addEventListener(type, fn, { signal: ac.signal });
  const caption = h("div", { class: "nnw-ds-caption" });
  const filter = h("input", {
    type: "search",
    class: "nnw-ds-filter",
    placeholder: "filter: text in the prompt or the answer",
    "aria-label": "filter the prompts",
  });
  const head = h("div", { class: "nnw-ds-row nnw-ds-head", role: "row" });
  const body = h("div", { class: "nnw-ds-body" });
  const spacer = h("div", { class: "nnw-ds-spacer" }, body);
  const view = h("div", { class: "nnw-ds-view", tabindex: 0, role: "grid" }, spacer);
  const root = h("div", { class: "nnw-ds" }, caption, filter, head, view);
  el.append(root);

  let order = []; // indices into rows, as sorted and filtered
  let sortBy = 0;
  let ascending = true;

  function rows() {
    return model.get("rows") || [];
  }

  function header() {
    head.replaceChildren();
    for (const [name, column, cls] of COLUMNS) {
      const cell = document.createElement("button");
      cell.type = "button";
      cell.className = `nnw-ds-cell ${cls}`;
      const label = column === 3 ? String(model.get("metric") || name) : name;
      cell.textContent = label + (column === sortBy ? (ascending ? " ▲" : " ▼") : "");
      cell.title = `sort by ${label}`;
      cell.setAttribute("aria-sort", column === sortBy ? (ascending ? "ascending" : "descending") : "none");
      on(cell, "click", () => {
        ascending = column === sortBy ? !ascending : true;
        sortBy = column;
        rebuild();
      });
      head.append(cell);
    }
  }

  function rebuild() {
    const all = rows();
    const needle = filter.value.trim().toLowerCase();
    order = [];
    all.forEach((row, index) => {
      if (!needle || String(row[1]).toLowerCase().includes(needle) || String(row[2]).toLowerCase().includes(needle)) {
        order.push(index);
      }
    });
    order.sort((a, b) => {
      const x = all[a][sortBy];
      const y = all[b][sortBy];
      if (x === null || x === undefined || y === null || y === undefined) return compare(x, y);
      return ascending ? compare(x, y) : compare(y, x);
    });
    caption.textContent = `${String(model.get("caption") || "")} · ${order.length} of ${all.length} shown`;
    header();
    spacer.style.height = `${order.length * ROW_HEIGHT}px`;
    draw();
  }

  function draw() {
    const all = rows();
    const first = Math.max(0, Math.floor(view.scrollTop / ROW_HEIGHT) - SPARE);
    const last = Math.min(order.length, Math.ceil((view.scrollTop + view.clientHeight) / ROW_HEIGHT) + SPARE);
    const chosen = Number(model.get("selected"));
    body.style.transform = `translateY(${first * ROW_HEIGHT}px)`;
    body.replaceChildren();
    for (let at = first; at < last; at++) {
      const row = all[order[at]];
      const line = document.createElement("div");
      line.className = "nnw-ds-row";
      line.setAttribute("role", "row");
      line.dataset.index = String(row[0]);
      if (row[0] === chosen) line.classList.add("nnw-ds-selected");
      if (row[4]) line.classList.add("nnw-ds-failed");
      const texts = [String(row[0]), String(row[1]), String(row[2]), shown(row[3])];
      COLUMNS.forEach(([, column, cls], i) => {
        const cell = document.createElement("div");
        cell.className = `nnw-ds-cell ${cls}`;
        cell.textContent = texts[i];
        cell.title = column === 2 && row[4] ? String(row[4]) : texts[i];
        line.append(cell);
      });
      body.append(line);
    }
  }

  function select(index) {
    model.set("selected", index);
    model.save_changes();
    draw();
  }

  on(view, "scroll", () => draw());
  on(filter, "input", () => {
    view.scrollTop = 0;
    rebuild();
  });
  on(body, "click", (event) => {
    const line = event.target.closest(".nnw-ds-row");
    if (line) select(Number(line.dataset.index));
  });
  on(view, "keydown", (event) => {
    if (!order.length) return;
    const chosen = Number(model.get("selected"));
    let at = order.indexOf(chosen);
    if (event.key === "ArrowDown") at = Math.min(order.length - 1, at + 1);
    else if (event.key === "ArrowUp") at = Math.max(0, at - 1);
    else return;
    event.preventDefault();
    const index = order[at];
    view.scrollTop = Math.min(view.scrollTop, at * ROW_HEIGHT);
    if ((at + 1) * ROW_HEIGHT > view.scrollTop + view.clientHeight) view.scrollTop = (at + 1) * ROW_HEIGHT - view.clientHeight;
    select(index);
  });
  model.on("change:rows", rebuild);
  model.on("change:caption", rebuild);
  model.on("change:metric", rebuild);
  model.on("change:selected", draw);
  rebuild();
  let disposed = false;
  const stopTheme = watchTheme(model, () => !disposed);
  return () => {
    disposed = true;
    stopTheme();
    ac.abort();
  };
}

export default { render };
