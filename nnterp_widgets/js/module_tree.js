/**
 * ModuleTree — anywidget front end for nnterp_widgets' module/value explorer.
 *
 * Served as it is: anywidget reads this file (`_esm`) and js/module_tree.css (`_css`);
 * no build step. Plain modern JS: no imports, no CDN, no npm. The static HTML export
 * (widgets/export.py) runs this same module on a read-only model.
 *
 * CONTRACT with the Python class (anywidget.AnyWidget, `_esm = MODULE_TREE_ESM`).
 * All traits are `.tag(sync=True)`.
 *
 *   tree           List (JSON)   read    Root nodes. Node:
 *                    { id: str            unique native dotted path, "model.model.layers.0.mlp"
 *                      name: str          display name (standard name if any), "layers[0].mlp"
 *                      native: str        native attribute name, "mlp"
 *                      type: str          module class, "Qwen2MLP"
 *                      standard: bool     true if `name` is a standard name
 *                      repeat: null | { group: str, index: int, count: int }
 *                                         repeated block (decoder layers); siblings sharing
 *                                         `group` are shown under one collapsible group row
 *                      values: [Value]    listed under the node, before its children
 *                      tensor_parallel_size?: int  root only: workers the model is split
 *                                         across (shown when > 1; values are whole regardless)
 *                      children: [Node] }
 *                  Value:
 *                    { id: str            unique, "model.model.layers.0.mlp.mlp_output"
 *                      name: str          "mlp_output"
 *                      available: bool    false: greyed, not selectable
 *                      reason: str|null   why unavailable (tooltip + aria description)
 *                      shape: [int]|null  for the current prompt
 *                      dtype: str|null
 *                      writable: bool }
 *   selected       Unicode       r/w     id of the selected Value, "" for none. The JS sets it
 *                                        (model.set + model.save_changes) when a served
 *                                        (available) value is clicked / Enter / Space; never
 *                                        for an unavailable one. Python answers with a preview.
 *                                        Set from Python, it is highlighted and revealed.
 *   preview        Dict (JSON)   read    {} or { id, shape: [int], dtype: str,
 *                                        stats: {min, max, mean, norm} (floats; null for a
 *                                        non-finite one, since JSON has no NaN/inf),
 *                                        rows: [str] (row labels = token texts, shown as text),
 *                                        cols: int,
 *                                        row_tokens?: [int] (optional: prompt index of each
 *                                        row; default row i is token i) }
 *   preview_data   Bytes         read    little-endian float32, rows.length * cols values,
 *                                        row-major (a slice of the value). Arrives as a
 *                                        DataView (ArrayBuffer / typed array also accepted).
 *   status         Dict (JSON)   read    { state: "idle" | "busy" | "error", message: str }
 *   prompt_tokens  List(Unicode) read    the prompt's token texts, shown as chips
 *   selected_token Int           r/w     -1 for none. Set by clicking a chip (clicking the
 *                                        pressed chip sets -1) or a preview row label.
 *
 * The JS sends no custom messages (model.send is unused) and writes only `selected` and
 * `selected_token`. Every trait change re-renders the affected part; expansion state,
 * filter text, scroll and keyboard focus are kept across re-renders (they are view-local,
 * theme (str, JS writes): "light" or "dark", the page's theme (JupyterLab's
 *     data-jp-theme-light on the body, else the background's luminance), reported at
 *     render and on every theme change so the plotly panels can follow it.
 * not synced). render() returns a cleanup function that removes all listeners and the DOM.
 *
 * Safety: data is only ever put into the DOM with createElement / textContent /
 * setAttribute, so module names, token texts and messages render as text.
 */

const INDENT_PX = 14;
const NEG_RGB = [67, 147, 195]; // RdBu blue, mid luminance: legible on light and dark
const POS_RGB = [214, 96, 77]; // RdBu red

let viewSeq = 0;

/* ---------------------------------------------------------------- small helpers */

function h(tag, attrs, ...kids) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = String(v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    node.append(kid); // strings become text nodes
  }
  return node;
}

const asArray = (x) => (Array.isArray(x) ? x : []);
const asStr = (x, d = "") => (typeof x === "string" ? x : x === null || x === undefined ? d : String(x));
const asObj = (x) => (x && typeof x === "object" && !Array.isArray(x) ? x : {});
const lower = (s) => s.toLowerCase();

function asInt(x, d) {
  const n = Number(x);
  return Number.isInteger(n) ? n : d;
}

function fmtShape(shape) {
  return Array.isArray(shape) ? "[" + shape.join(", ") + "]" : "";
}

/** Short number for stats/legend. */
function fmt(x) {
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
function fmtFull(x) {
  if (Number.isNaN(x)) return "NaN";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  return String(Number(x.toPrecision(6)));
}

/**
 * Token text for display, the one rule of nnterp_widgets/widgets/tokens.py (`show_token`;
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

function readFloats(buf, n) {
  let view = null;
  if (buf instanceof DataView) view = buf;
  else if (buf instanceof ArrayBuffer) view = new DataView(buf);
  else if (ArrayBuffer.isView(buf)) view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const out = new Float64Array(n).fill(NaN);
  let got = 0;
  if (view) {
    got = Math.min(n, Math.floor(view.byteLength / 4));
    for (let i = 0; i < got; i++) out[i] = view.getFloat32(i * 4, true);
  } else if (Array.isArray(buf)) {
    got = Math.min(n, buf.length);
    for (let i = 0; i < got; i++) out[i] = Number(buf[i]);
  }
  return { values: out, got };
}

function heatColor(v, maxAbs) {
  if (!Number.isFinite(v)) return null;
  if (!(maxAbs > 0)) return "transparent";
  const t = Math.min(1, Math.abs(v) / maxAbs);
  const c = v < 0 ? NEG_RGB : POS_RGB;
  return `rgba(${c[0]}, ${c[1]}, ${c[2]}, ${Math.round(t * 1000) / 1000})`;
}

/** Split `text` around case-insensitive occurrences of `q` (already lower-cased). */
function highlighted(text, q) {
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

/* --------------------------------------------------------- tree -> display items */

/**
 * Items: node {kind,key,node,name,hay,values,children,defaultExpanded},
 *        group {kind,key,label,meta,members,defaultExpanded},
 *        value {kind,key,value,name,hay,available}.
 */
function buildDisplay(roots) {
  const parentOf = new Map(); // item key -> parent item key ("" for roots)
  const itemByKey = new Map();
  const valueKeyById = new Map();

  function register(item, parentKey) {
    let key = item.key;
    // ids are documented unique; keep the view usable if they are not.
    for (let k = 2; itemByKey.has(key); k++) key = item.key + "#" + k;
    item.key = key;
    itemByKey.set(key, item);
    parentOf.set(key, parentKey);
  }

  function valueItem(v, node, parentKey) {
    const value = asObj(v);
    const id = asStr(value.id);
    const name = asStr(value.name, id);
    const item = {
      kind: "value",
      key: "v:" + id,
      value,
      id,
      name,
      available: value.available === true,
      hay: lower(name + "\n" + id + "\n" + asStr(node.name) + "." + name),
    };
    register(item, parentKey);
    if (!valueKeyById.has(id)) valueKeyById.set(id, item.key);
    return item;
  }

  function nodeItem(n, parentKey) {
    const node = asObj(n);
    const id = asStr(node.id);
    const name = asStr(node.name) || asStr(node.native) || id;
    const rep = node.repeat && typeof node.repeat === "object" ? node.repeat : null;
    const item = {
      kind: "node",
      key: "n:" + id,
      node,
      id,
      name,
      hay: lower(name + "\n" + id),
      defaultExpanded: !(rep && asInt(rep.index, 0) > 0),
      values: [],
      children: [],
    };
    register(item, parentKey);
    item.values = asArray(node.values).map((v) => valueItem(v, { name }, item.key));
    item.children = siblings(asArray(node.children), item.key);
    return item;
  }

  function groupOf(n) {
    const r = n && n.repeat;
    return r && typeof r === "object" && typeof r.group === "string" ? r.group : null;
  }

  function siblings(nodes, parentKey) {
    const sorted = nodes
      .map((n, i) => ({ n: asObj(n), i }))
      .sort((a, b) => (b.n.standard === true) - (a.n.standard === true) || a.i - b.i)
      .map((x) => x.n);
    const members = new Map();
    for (const n of sorted) {
      const g = groupOf(n);
      if (g === null) continue;
      if (!members.has(g)) members.set(g, []);
      members.get(g).push(n);
    }
    const out = [];
    const done = new Set();
    for (const n of sorted) {
      const g = groupOf(n);
      const ms = g === null ? null : members.get(g);
      const grouped = ms && (ms.length > 1 || asInt(n.repeat.count, 1) > 1);
      if (!grouped) {
        out.push(nodeItem(n, parentKey));
        continue;
      }
      if (done.has(g)) continue;
      done.add(g);
      const ordered = ms
        .map((m, i) => ({ m, i, idx: asInt(m.repeat.index, i) }))
        .sort((a, b) => a.idx - b.idx || a.i - b.i);
      const idxs = ordered.map((x) => x.idx);
      const lo = Math.min(...idxs);
      const hi = Math.max(...idxs);
      // "layers[0]" -> base "layers"; fall back to the group id.
      const first = asStr(ordered[0].m.name);
      const suffix = "[" + ordered[0].idx + "]";
      const base = first.endsWith(suffix) && first.length > suffix.length ? first.slice(0, -suffix.length) : g;
      const count = Math.max(asInt(ordered[0].m.repeat.count, ms.length), ms.length);
      const types = new Set(ms.map((m) => asStr(m.type)));
      const meta =
        (ms.length < count ? `${ms.length} of ${count}` : `${ms.length}`) +
        " \u00d7 " +
        (types.size === 1 ? [...types][0] || "block" : "blocks");
      const group = {
        kind: "group",
        key: "g:" + parentKey + "|" + g,
        label: `${base}[${lo}..${hi}]`,
        meta,
        defaultExpanded: true,
        members: [],
      };
      register(group, parentKey);
      group.members = ordered.map((x) => nodeItem(x.m, group.key));
      out.push(group);
    }
    return out;
  }

  const roots_ = siblings(asArray(roots), "");
  return { roots: roots_, parentOf, itemByKey, valueKeyById };
}

/** Display kids of an item, in order: a node's values first, then its children. */
function kidsOf(item) {
  if (item.kind === "node") return item.values.concat(item.children);
  if (item.kind === "group") return item.members;
  return [];
}

/* ------------------------------------------------------------------------ theme */

function pageTheme() {
  const rgb = (getComputedStyle(document.body).backgroundColor.match(/[\d.]+/g) || []).map(Number);
  if (rgb.length < 3 || (rgb.length > 3 && rgb[3] === 0)) {
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }
  const [r, g, b] = rgb;
  return 0.2126 * r + 0.7152 * g + 0.0722 * b < 128 ? "dark" : "light";
}

/* ------------------------------------------------------------------------ render */

function render({ model, el }) {
  const uid = "nnw-mt-" + ++viewSeq;
  const ac = new AbortController();
  const on = (target, type, fn) => target.addEventListener(type, fn, { signal: ac.signal });

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
  let disposed = false;

  /* ---- skeleton */
  const tokensEl = h("div", { class: "nnw-mt-tokens", role: "toolbar", "aria-label": "Prompt tokens" });
  const statusEl = h("div", { class: "nnw-mt-status", "aria-live": "polite" });
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
  const previewEl = h("div", { class: "nnw-mt-previewpane", role: "region", "aria-label": "Value preview" });

  const root = h(
    "div",
    // data-lm-suppress-shortcuts: JupyterLab (Lumino) skips its notebook keybindings for
    // keys pressed inside the widget (arrows, Enter, Space, letters in the filter box).
    { class: "nnw-mt", "data-lm-suppress-shortcuts": "true" },
    tokensEl,
    statusEl,
    h(
      "div",
      { class: "nnw-mt-body" },
      h(
        "div",
        { class: "nnw-mt-treepane" },
        h("div", { class: "nnw-mt-toolbar" }, filterEl, countEl, expandAllEl, collapseAllEl),
        treeEl,
        descEl,
        noteEl,
      ),
      previewEl,
    ),
  );
  el.append(root);

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
    const q = lower(filterText.trim());
    let matches = 0;

    // view = { item, kids: [view], hit: bool } ; null when filtered out
    function view(item) {
      if (item.kind === "value") {
        const hit = q !== "" && item.hay.includes(q);
        if (q && !hit) return null;
        if (hit) matches++;
        return { item, kids: [], hit };
      }
      const kids = [];
      for (const k of kidsOf(item)) {
        const v = view(k);
        if (v) kids.push(v);
      }
      const hit = q !== "" && item.kind === "node" && item.hay.includes(q);
      if (q && !hit && kids.length === 0) return null;
      if (hit) matches++;
      return { item, kids, hit };
    }

    const out = [];
    function flatten(views, level, parentKey) {
      views.forEach((v, i) => {
        const expandable = v.kids.length > 0;
        const open = expandable && isExpanded(v.item);
        out.push({
          item: v.item,
          level,
          setsize: views.length,
          posinset: i + 1,
          expandable,
          expanded: open,
          parentKey,
        });
        if (open) flatten(v.kids, level + 1, v.item.key);
      });
    }
    const top = [];
    for (const r of display.roots) {
      const v = view(r);
      if (v) top.push(v);
    }
    flatten(top, 1, "");
    return { rows: out, matches, q };
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
        row.title = reason;
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

  /* ---- token chips */
  function renderTokens() {
    const toks = asArray(model.get("prompt_tokens"));
    const sel = asInt(model.get("selected_token"), -1);
    const focusedIdx = tokensEl.contains(document.activeElement)
      ? asInt(document.activeElement.dataset.index, -1)
      : -1;
    tokensEl.replaceChildren();
    tokensEl.hidden = toks.length === 0;
    if (!toks.length) return;
    tokensEl.append(h("span", { class: "nnw-mt-label", "aria-hidden": "true" }, "Prompt"));
    const rover = focusedIdx >= 0 && focusedIdx < toks.length ? focusedIdx : sel >= 0 && sel < toks.length ? sel : 0;
    toks.forEach((t, i) => {
      const chip = h(
        "button",
        {
          class: "nnw-mt-chip",
          type: "button",
          "data-index": i,
          "aria-pressed": String(i === sel),
          title: `token ${i}: ${JSON.stringify(asStr(t))}`,
          tabindex: i === rover ? "0" : "-1",
        },
        showToken(t),
      );
      tokensEl.append(chip);
    });
    if (focusedIdx >= 0) {
      const chip = tokensEl.querySelector(`[data-index="${rover}"]`);
      if (chip) chip.focus();
    }
  }

  function setToken(i) {
    const cur = asInt(model.get("selected_token"), -1);
    const next = i === cur ? -1 : i;
    model.set("selected_token", next);
    model.save_changes();
  }

  on(tokensEl, "click", (e) => {
    const chip = e.target.closest(".nnw-mt-chip");
    if (!chip) return;
    setToken(asInt(chip.dataset.index, -1));
  });

  on(tokensEl, "keydown", (e) => {
    const chip = e.target.closest(".nnw-mt-chip");
    if (!chip) return;
    const chips = [...tokensEl.querySelectorAll(".nnw-mt-chip")];
    const i = chips.indexOf(chip);
    let j = null;
    if (e.key === "ArrowRight") j = i + 1;
    else if (e.key === "ArrowLeft") j = i - 1;
    else if (e.key === "Home") j = 0;
    else if (e.key === "End") j = chips.length - 1;
    if (e.key === "Enter" || e.key === " ") e.stopPropagation(); // native button click follows
    if (j === null) return;
    e.preventDefault();
    e.stopPropagation();
    j = Math.max(0, Math.min(chips.length - 1, j));
    chip.tabIndex = -1;
    chips[j].tabIndex = 0;
    chips[j].focus();
  });

  /* ---- status */
  function renderStatus() {
    const s = asObj(model.get("status"));
    const state = asStr(s.state, "idle");
    const msg = asStr(s.message);
    statusEl.replaceChildren();
    root.setAttribute("aria-busy", String(state === "busy"));
    root.dataset.state = state;
    if (state === "busy") {
      statusEl.hidden = false;
      statusEl.append(
        h(
          "div",
          { class: "nnw-mt-status-busy" },
          h("span", { class: "nnw-mt-spinner", "aria-hidden": "true" }),
          h("span", null, msg || "Working\u2026"),
        ),
      );
    } else if (state === "error") {
      statusEl.hidden = false;
      statusEl.append(
        h(
          "div",
          { class: "nnw-mt-error", role: "alert" },
          h("span", { class: "nnw-mt-error-icon", "aria-hidden": "true" }, "\u26a0"),
          h("span", { class: "nnw-mt-error-title" }, "Error"),
          h("pre", { class: "nnw-mt-error-msg" }, msg || "Something went wrong."),
        ),
      );
    } else if (msg) {
      statusEl.hidden = false;
      statusEl.append(h("div", null, msg));
    } else {
      statusEl.hidden = true;
    }
  }

  /* ---- preview */
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
    setToken(asInt(tr && tr.dataset.token, -1));
  });

  /* ---- model listeners */
  function onTree() {
    display = buildDisplay(model.get("tree"));
    renderTree();
    const sel = asStr(model.get("selected"));
    if (sel) reveal(sel);
  }
  function onSelected() {
    updateSelection();
    const sel = asStr(model.get("selected"));
    if (sel) reveal(sel);
    renderPreview();
  }
  function onSelectedToken() {
    renderTokens();
    renderPreview();
  }

  const listeners = [
    ["change:tree", onTree],
    ["change:selected", onSelected],
    ["change:preview", renderPreview],
    ["change:preview_data", renderPreview],
    ["change:status", renderStatus],
    ["change:selected_token", onSelectedToken],
    ["change:prompt_tokens", renderTokens],
  ];
  const guarded = listeners.map(([ev, fn]) => [ev, () => { if (!disposed) fn(); }]);
  for (const [ev, fn] of guarded) model.on(ev, fn);

  onTree();
  renderTokens();
  renderStatus();
  renderPreview();

  // The page's theme, reported to Python so the plotly panels can follow it: plotly
  // cannot read JupyterLab's CSS variables. JupyterLab marks the body with
  // data-jp-theme-light; elsewhere the page background's luminance decides.
  const reportTheme = () => {
    if (disposed) return;
    const mark = document.body && document.body.dataset ? document.body.dataset.jpThemeLight : undefined;
    const theme = mark !== undefined ? (mark === "true" ? "light" : "dark") : pageTheme();
    if (model.get("theme") !== theme) {
      model.set("theme", theme);
      model.save_changes();
    }
  };
  reportTheme();
  const themeWatch = typeof MutationObserver === "function" && document.body
    ? new MutationObserver(reportTheme) : null;
  if (themeWatch) themeWatch.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "data-jp-theme-name", "class"] });

  return () => {
    disposed = true;
    if (themeWatch) themeWatch.disconnect();
    for (const [ev, fn] of guarded) model.off(ev, fn);
    ac.abort();
    root.remove();
  };
}

export default { render };
