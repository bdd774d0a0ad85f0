/**
 * ModuleTree — anywidget front end for nnterp_widgets' module/value explorer.
 *
 * The entry of the module tree's front end; its parts are the ES modules in
 * js/module_tree/ (dom, format, display, tree_pane, chips, status, preview, theme), each
 * small enough to read at once. anywidget takes one module, so widgets/assets.py inlines
 * the parts' local imports into one module text (`assets.module_text`): no build step,
 * no generated file, no CDN, no npm. The static HTML export (widgets/export.py) runs that
 * same text on a read-only model.
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

import { tokenChips } from "./module_tree/chips.js";
import { h } from "./module_tree/dom.js";
import { showToken } from "./module_tree/format.js";
import { previewPane } from "./module_tree/preview.js";
import { statusLine } from "./module_tree/status.js";
import { watchTheme } from "./module_tree/theme.js";
import { treePane } from "./module_tree/tree_pane.js";

export { showToken };

let viewSeq = 0;

function render({ model, el }) {
  const uid = "nnw-mt-" + ++viewSeq;
  const ac = new AbortController();
  const on = (target, type, fn) => target.addEventListener(type, fn, { signal: ac.signal });
  let disposed = false;

  // data-lm-suppress-shortcuts: JupyterLab (Lumino) skips its notebook keybindings for
  // keys pressed inside the widget (arrows, Enter, Space, letters in the filter box).
  const root = h("div", { class: "nnw-mt", "data-lm-suppress-shortcuts": "true" });
  const chips = tokenChips({ model, on });
  const status = statusLine({ model, root });
  const tree = treePane({ model, on, uid });
  const preview = previewPane({ model, on });
  root.append(chips.el, status.el, h("div", { class: "nnw-mt-body" }, tree.el, preview.el));
  el.append(root);

  // Each trait's change re-renders what shows it; a selection shows in the preview too.
  const listeners = [
    ["change:tree", [tree.onTree]],
    ["change:selected", [tree.onSelected, preview.render]],
    ["change:preview", [preview.render]],
    ["change:preview_data", [preview.render]],
    ["change:status", [status.render]],
    ["change:selected_token", [chips.render, preview.render]],
    ["change:prompt_tokens", [chips.render]],
  ];
  const guarded = listeners.map(([ev, renders]) => [ev, () => disposed || renders.forEach((render) => render())]);
  for (const [ev, fn] of guarded) model.on(ev, fn);

  tree.onTree();
  chips.render();
  status.render();
  preview.render();
  const stopTheme = watchTheme(model, () => !disposed);

  return () => {
    disposed = true;
    stopTheme();
    for (const [ev, fn] of guarded) model.off(ev, fn);
    ac.abort();
    root.remove();
  };
}

export default { render };
