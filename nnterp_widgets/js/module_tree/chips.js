/**
 * module_tree/chips.js: the prompt's tokens as chips; clicking one selects that token
 * everywhere (the `selected_token` trait), clicking the pressed one clears it.
 */

import { asArray, asInt, asStr, h } from "./dom.js";
import { showToken } from "./format.js";

/** Select token ``i``, or none when ``i`` is the selected one. */
export function toggleToken(model, i) {
  const cur = asInt(model.get("selected_token"), -1);
  const next = i === cur ? -1 : i;
  model.set("selected_token", next);
  model.save_changes();
}

/** The chips of one view: ``{ el, render }``. */
export function tokenChips({ model, on }) {
  const tokensEl = h("div", { class: "nnw-mt-tokens", role: "toolbar", "aria-label": "Prompt tokens" });

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

  on(tokensEl, "click", (e) => {
    const chip = e.target.closest(".nnw-mt-chip");
    if (!chip) return;
    toggleToken(model, asInt(chip.dataset.index, -1));
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

  return { el: tokensEl, render: renderTokens };
}
