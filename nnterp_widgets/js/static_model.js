/*
 * The static export's read-only model: widgets/export.py appends this to module_tree.js
 * in the page's one module script, so the page runs the widget's own `render` on the
 * ModuleTree state saved in the page (a JSON block), with no kernel behind it. Writes
 * (a clicked value or chip, the reported theme) go nowhere: the page shows what was saved.
 */
{
  const holder = document.getElementById("nnw-model");
  const state = JSON.parse(holder.textContent);
  const bytes = Uint8Array.from(atob(state.preview_data || ""), (c) => c.charCodeAt(0));
  state.preview_data = new DataView(bytes.buffer);
  const model = {
    get: (key) => state[key],
    set() {},
    save_changes() {},
    send() {},
    on() {},
    off() {},
  };
  render({ model, el: document.getElementById(holder.dataset.target) });
}
