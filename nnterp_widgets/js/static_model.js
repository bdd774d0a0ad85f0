/*
 * The static export's model: widgets/export.py appends this to a widget's module
 * (module_tree.js, attention_tokens.js) after a line naming the JSON block that holds the
 * widget's saved state (`const STATIC_HOLDER = "...";`), one module script per widget, so
 * the page runs the widget's own `render` with no kernel behind it. The block's
 * data-bytes names the keys saved as base64 (binary traits, a DataView here); data-local
 * names the keys the page keeps itself (the token view's selected token). Other writes (a
 * clicked value, the reported theme) go nowhere: the page shows what was saved.
 */
{
  const holder = document.getElementById(STATIC_HOLDER);
  const state = JSON.parse(holder.textContent);
  const keys = (name) => (holder.dataset[name] || "").split(",").filter(Boolean);
  for (const key of keys("bytes")) {
    const bytes = Uint8Array.from(atob(state[key] || ""), (c) => c.charCodeAt(0));
    state[key] = new DataView(bytes.buffer);
  }
  const local = new Set(keys("local"));
  const listeners = new Map();
  const model = {
    get: (key) => state[key],
    set(key, value) {
      if (!local.has(key) || state[key] === value) return;
      state[key] = value;
      for (const fn of listeners.get("change:" + key) || []) fn();
    },
    save_changes() {},
    send() {},
    on(name, fn) {
      if (!listeners.has(name)) listeners.set(name, new Set());
      listeners.get(name).add(fn);
    },
    off(name, fn) {
      if (listeners.has(name)) listeners.get(name).delete(fn);
    },
  };
  render({ model, el: document.getElementById(holder.dataset.target) });
}
