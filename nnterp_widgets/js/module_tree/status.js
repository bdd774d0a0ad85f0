/**
 * module_tree/status.js: the status line (busy with a spinner, an error, or a note), and
 * the state it marks on the whole view (`aria-busy`, `data-state`).
 */

import { asObj, asStr, h } from "./dom.js";

/** The status line of one view, marking ``root``: ``{ el, render }``. */
export function statusLine({ model, root }) {
  const statusEl = h("div", { class: "nnw-mt-status", "aria-live": "polite" });

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
          h("pre", { class: "nnw-mt-error-msg" }, msg || "The request failed; its reason is on the explorer's status line."),
        ),
      );
    } else if (msg) {
      statusEl.hidden = false;
      statusEl.append(h("div", null, msg));
    } else {
      statusEl.hidden = true;
    }
  }

  return { el: statusEl, render: renderStatus };
}
