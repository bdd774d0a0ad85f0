/**
 * module_tree/tree_pane.js: the tree of modules and values, its filter and its keyboard.
 *
 * A roving-focus ARIA tree: one row is in the tab order, arrows move through the visible
 * rows, Right/Left open and close, Enter/Space select a served value (setting the
 * `selected` trait) or explain a greyed one in the note under the tree. Expansion, the
 * filter, scroll and focus are this view's own and survive every re-render.
 */

import { buildDisplay, visibleRows } from "./display.js";
import { asStr, h } from "./dom.js";
import { fmtShape, highlighted } from "./format.js";

const INDENT_PX = 14;

/**
 * The tree pane of one view: ``{ el, onTree, onSelected }``, the pane and what to call
 * when the `tree` or the `selected` trait changes. ``on(target, type, fn)`` adds a
 * listener the view removes when it goes; ``uid`` makes its element ids unique.
 */
export function treePane({ model, on, uid }) {
  // view-local state (kept across re-renders)
  const expanded = new Map(); // key -> bool, user choices without a filter
  let filterCollapsed = new Set(); // keys collapsed while a filter is active
  let filterText = "";
  let focusKey = null; // roving tabindex owner in the tree
  let whyShown = false; // the note under the tree is a hovered or focused value's reason
  let display = buildDisplay([]);
  let rows = []; // visible rows, in order
  let rowIndex = new Map(); // key -> index in rows
  let rowEls = new Map(); // key -> element

  const filterEl = h("input", {
    class: "nnw-mt-filter",
    type: "search",
    placeholder: "Filter modules and values\u2026",
    "aria-label": "Filter modules and values by name or path",
    "aria-controls": uid + "-tree",
    spellcheck: "false",
    autocomplete: "off",
  });
  const countEl = h("span", { class: "nnw-mt-count", "aria-live": "polite" });
  const expandAllEl = h("button", { class: "nnw-mt-btn", type: "button", text: "Expand all" });
  const collapseAllEl = h("button", { class: "nnw-mt-btn", type: "button", text: "Collapse all" });
  const treeEl = h("div", {
    class: "nnw-mt-tree",
    role: "tree",
    id: uid + "-tree",
    "aria-label": "Modules and their values",
  });
  const descEl = h("div", { hidden: true }); // aria-describedby targets for unavailable values
  const noteEl = h("div", { class: "nnw-mt-note", role: "status", "aria-live": "polite" });
  const el = h(
    "div",
    { class: "nnw-mt-treepane" },
    h("div", { class: "nnw-mt-toolbar" }, filterEl, countEl, expandAllEl, collapseAllEl),
    treeEl,
    descEl,
    noteEl,
  );

  /* ---- expansion */
  const filtering = () => filterText.trim() !== "";

  function isExpanded(item) {
    if (filtering()) return !filterCollapsed.has(item.key);
    return expanded.has(item.key) ? expanded.get(item.key) : item.defaultExpanded;
  }

  function setExpanded(item, value) {
    if (filtering()) {
      if (value) filterCollapsed.delete(item.key);
      else filterCollapsed.add(item.key);
    } else {
      expanded.set(item.key, value);
    }
  }

  /* ---- visible rows */
  function computeRows() {
    return visibleRows(display, filterText, isExpanded);
  }

  /* ---- tree rendering */
  function renderRow(r, q, descId) {
    const it = r.item;
    const row = h("div", {
      class: "nnw-mt-row nnw-mt-" + it.kind,
      role: "treeitem",
      "data-key": it.key,
      "data-kind": it.kind,
      "aria-level": r.level,
      "aria-setsize": r.setsize,
      "aria-posinset": r.posinset,
      "aria-expanded": r.expandable ? String(r.expanded) : null,
      tabindex: "-1",
    });
    row.style.paddingLeft = 4 + (r.level - 1) * INDENT_PX + "px";
    const caret = h("span", { class: "nnw-mt-caret", "aria-hidden": "true" });
    if (r.expandable) caret.textContent = r.expanded ? "\u25be" : "\u25b8";
    row.append(caret);

    if (it.kind === "group") {
      row.append(
        h("span", { class: "nnw-mt-name" }, it.label),
        h("span", { class: "nnw-mt-meta" }, it.meta),
      );
      row.title = it.label;
    } else if (it.kind === "node") {
      const n = it.node;
      const std = n.standard === true;
      row.append(h("span", { class: "nnw-mt-name" + (std ? " nnw-mt-std" : "") }, highlighted(it.name, q)));
      if (n.type) row.append(h("span", { class: "nnw-mt-type" }, asStr(n.type)));
      const tp = Number(n.tensor_parallel_size);
      if (tp > 1) {
        const note = `tensor parallel: split across ${tp} workers; every value is gathered whole`;
        row.append(h("span", { class: "nnw-mt-meta nnw-mt-tp", title: note }, `tp=${tp}`));
      }
      row.title = it.id;
      row.dataset.id = it.id;
    } else {
      const v = it.value;
      const sel = it.id !== "" && it.id === asStr(model.get("selected"));
      row.dataset.id = it.id;
      row.setAttribute("aria-selected", String(sel));
      caret.textContent = it.available ? "\u25cf" : "\u2298";
      row.append(h("span", { class: "nnw-mt-name" }, highlighted(it.name, q)));
      if (Array.isArray(v.shape)) row.append(h("span", { class: "nnw-mt-shape" }, fmtShape(v.shape)));
      if (v.dtype) row.append(h("span", { class: "nnw-mt-dtype" }, asStr(v.dtype)));
      if (v.writable === true) row.append(h("span", { class: "nnw-mt-badge", title: "writable (can be patched)" }, "rw"));
      if (it.available) {
        row.title = it.id;
      } else {
        const reason = asStr(v.reason) || "not available";
        row.classList.add("nnw-mt-off");
        row.title = reason;  // the seed's reason, word for word (the name shows the path)
        row.setAttribute("aria-disabled", "true");
        descEl.append(h("span", { id: descId }, "Unavailable: " + reason));
        row.setAttribute("aria-describedby", descId);
      }
    }
    return row;
  }

  function renderTree() {
    const hadFocus = treeEl.contains(document.activeElement);
    const scroll = treeEl.scrollTop;
    const res = computeRows();
    rows = res.rows;
    rowIndex = new Map(rows.map((r, i) => [r.item.key, i]));
    rowEls = new Map();
    descEl.replaceChildren();
    const frag = document.createDocumentFragment();
    let d = 0;
    for (const r of rows) {
      const rowEl = renderRow(r, res.q, `${uid}-d${d++}`);
      rowEls.set(r.item.key, rowEl);
      frag.append(rowEl);
    }
    if (rows.length === 0) {
      const msg = display.roots.length === 0 ? "No modules yet." : "Nothing matches the filter.";
      frag.append(h("div", { class: "nnw-mt-empty", role: "presentation" }, msg));
    }
    treeEl.replaceChildren(frag);
    treeEl.scrollTop = scroll;
    countEl.textContent = res.q ? `${res.matches} match${res.matches === 1 ? "" : "es"}` : "";

    // roving tabindex: keep the same row, else its nearest visible ancestor, else the first
    let key = focusKey;
    while (key && !rowEls.has(key)) key = display.parentOf.get(key) || null;
    if (!key && rows.length) key = rows[0].item.key;
    focusKey = key;
    if (key) {
      const rowEl = rowEls.get(key);
      rowEl.tabIndex = 0;
      if (hadFocus) rowEl.focus({ preventScroll: false });
    }
  }

  function setFocusKey(key, focus) {
    if (!rowEls.has(key)) return;
    if (focusKey && rowEls.has(focusKey)) rowEls.get(focusKey).tabIndex = -1;
    focusKey = key;
    const rowEl = rowEls.get(key);
    rowEl.tabIndex = 0;
    if (focus) {
      rowEl.focus();
      rowEl.scrollIntoView({ block: "nearest" });
    }
  }

  function focusIndex(i) {
    if (!rows.length) return;
    const j = Math.max(0, Math.min(rows.length - 1, i));
    setFocusKey(rows[j].item.key, true);
  }

  function updateSelection() {
    const sel = asStr(model.get("selected"));
    for (const [key, rowEl] of rowEls) {
      if (!key.startsWith("v:")) continue;
      rowEl.setAttribute("aria-selected", String(rowEl.dataset.id === sel && sel !== ""));
    }
  }

  /** Expand the ancestors of the value `id` so its row is visible (not while filtering it out). */
  function reveal(id) {
    const key = display.valueKeyById.get(id);
    if (!key || rowEls.has(key)) return false;
    const chain = [];
    for (let k = display.parentOf.get(key); k; k = display.parentOf.get(k)) chain.push(k);
    let changed = false;
    for (const k of chain) {
      const item = display.itemByKey.get(k);
      if (item && !isExpanded(item)) {
        setExpanded(item, true);
        changed = true;
      }
    }
    if (!changed) return false;
    renderTree();
    const rowEl = rowEls.get(key);
    if (rowEl) rowEl.scrollIntoView({ block: "nearest" });
    return true;
  }

  function showNote(parts) {
    noteEl.replaceChildren(...parts);
    whyShown = false;
  }

  // A greyed value's reason, drawn under the tree when the value is hovered or gets the
  // keyboard focus (a native tooltip is not drawn in every browser, nor reached by keys).
  function explain(key) {
    const i = rowIndex.get(key);
    const it = i === undefined ? null : rows[i].item;
    if (it && it.kind === "value" && !it.available) {
      showNote([
        h("span", { class: "nnw-mt-note-name" }, it.name),
        " is not available: " + (asStr(it.value.reason) || "no reason given"),
      ]);
      whyShown = true;
    } else if (whyShown) {
      showNote([]);
    }
  }

  function activate(key) {
    const i = rowIndex.get(key);
    if (i === undefined) return;
    const r = rows[i];
    const it = r.item;
    if (it.kind === "value") {
      if (!it.available) {
        showNote([
          h("span", { class: "nnw-mt-note-name" }, it.name),
          " is not available: " + (asStr(it.value.reason) || "no reason given"),
        ]);
        return;
      }
      showNote([]);
      if (asStr(model.get("selected")) !== it.id) {
        model.set("selected", it.id);
        model.save_changes();
      }
      return;
    }
    if (r.expandable) {
      setExpanded(it, !r.expanded);
      renderTree();
    }
  }

  /* ---- tree events */
  on(treeEl, "click", (e) => {
    const rowEl = e.target.closest("[role=treeitem]");
    if (!rowEl || !treeEl.contains(rowEl)) return;
    const key = rowEl.dataset.key;
    setFocusKey(key, false);
    activate(key);
  });

  // focus arriving any other way (programmatic, assistive tech) moves the roving tabindex too
  on(treeEl, "focusin", (e) => {
    const rowEl = e.target.closest && e.target.closest("[role=treeitem]");
    if (rowEl && rowEl.dataset.key !== focusKey) setFocusKey(rowEl.dataset.key, false);
    if (rowEl) explain(rowEl.dataset.key);
  });
  on(treeEl, "mouseover", (e) => {
    const rowEl = e.target.closest && e.target.closest("[role=treeitem]");
    if (rowEl) explain(rowEl.dataset.key);
  });

  on(treeEl, "keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const rowEl = e.target.closest("[role=treeitem]");
    if (!rowEl) return;
    const i = rowIndex.get(rowEl.dataset.key);
    if (i === undefined) return;
    const r = rows[i];
    let handled = true;
    switch (e.key) {
      case "ArrowDown":
        focusIndex(i + 1);
        break;
      case "ArrowUp":
        focusIndex(i - 1);
        break;
      case "Home":
        focusIndex(0);
        break;
      case "End":
        focusIndex(rows.length - 1);
        break;
      case "ArrowRight":
        if (r.expandable && !r.expanded) {
          setExpanded(r.item, true);
          renderTree();
        } else if (r.expandable) {
          focusIndex(i + 1);
        }
        break;
      case "ArrowLeft":
        if (r.expandable && r.expanded) {
          setExpanded(r.item, false);
          renderTree();
        } else if (r.parentKey && rowIndex.has(r.parentKey)) {
          focusIndex(rowIndex.get(r.parentKey));
        }
        break;
      case "Enter":
      case " ":
        activate(r.item.key);
        break;
      default:
        handled = false;
    }
    if (handled) {
      e.preventDefault();
      e.stopPropagation(); // keep notebook shortcuts (e.g. Enter = edit cell) out of it
    }
  });

  on(filterEl, "input", () => {
    filterText = filterEl.value;
    filterCollapsed = new Set();
    renderTree();
  });

  on(filterEl, "keydown", (e) => {
    if (e.key === "ArrowDown" && rows.length) {
      e.preventDefault();
      focusIndex(0);
    } else if (e.key === "Escape" && filterEl.value) {
      e.preventDefault();
      filterEl.value = "";
      filterText = "";
      filterCollapsed = new Set();
      renderTree();
    }
    e.stopPropagation();
  });

  function setAll(value) {
    if (filtering()) {
      filterCollapsed = new Set();
      if (!value) for (const r of rows) if (r.expandable) filterCollapsed.add(r.item.key);
    } else {
      for (const item of display.itemByKey.values()) if (item.kind !== "value") expanded.set(item.key, value);
    }
    renderTree();
  }
  on(expandAllEl, "click", () => setAll(true));
  on(collapseAllEl, "click", () => setAll(false));

  return {
    el,
    onTree() {
      display = buildDisplay(model.get("tree"));
      renderTree();
      const sel = asStr(model.get("selected"));
      if (sel) reveal(sel);
    },
    onSelected() {
      updateSelection();
      const sel = asStr(model.get("selected"));
      if (sel) reveal(sel);
    },
  };
}
