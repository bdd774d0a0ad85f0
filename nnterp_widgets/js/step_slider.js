/**
 * StepSlider — the generation's step control (anywidget; widgets/generation.py).
 *
 * A native range input, so it is focusable and the arrow keys, Home / End and
 * PageUp / PageDown step it, labelled by its <label> (and aria-valuetext says which
 * step it is: "step 1 of 5: a decode step"). Plain modern JS, no imports, no CDN.
 *
 * CONTRACT (all traits sync=True):
 *   value     Int      r/w   the step shown (the JS writes it on input)
 *   max       Int      read  the last step (0 is the prefill)
 *   disabled  Bool     read  true until a generation has landed
 *   label     Unicode  read  the visible label, "step"
 *   caption   Unicode  read  what the step is, shown beside the input and as aria-valuetext
 *
 * Keys stop at the input: JupyterLab's notebook shortcuts never see them.
 */

function render({ model, el }) {
  const ac = new AbortController();
  const id = "nnw-step-" + Math.random().toString(36).slice(2);
  const root = document.createElement("div");
  root.className = "nnw-step";
  const label = document.createElement("label");
  label.htmlFor = id;
  const input = document.createElement("input");
  input.type = "range";
  input.id = id;
  input.min = "0";
  input.step = "1";
  const caption = document.createElement("output");
  caption.htmlFor = id;
  caption.setAttribute("aria-live", "polite");
  root.append(label, input, caption);
  el.append(root);

  function draw() {
    label.textContent = String(model.get("label") || "step");
    input.max = String(Math.max(0, Number(model.get("max")) || 0));
    input.value = String(Number(model.get("value")) || 0);
    input.disabled = Boolean(model.get("disabled"));
    const text = String(model.get("caption") || "");
    caption.textContent = text;
    if (text) input.setAttribute("aria-valuetext", text);
    else input.removeAttribute("aria-valuetext");
  }

  input.addEventListener(
    "input",
    () => {
      const value = Number(input.value);
      if (value !== model.get("value")) {
        model.set("value", value);
        model.save_changes();
      }
    },
    { signal: ac.signal },
  );
  input.addEventListener("keydown", (e) => e.stopPropagation(), { signal: ac.signal });

  const names = ["change:value", "change:max", "change:disabled", "change:label", "change:caption"];
  for (const name of names) model.on(name, draw);
  draw();
  return () => {
    for (const name of names) model.off(name, draw);
    ac.abort();
    root.remove();
  };
}

export default { render };
