/**
 * PositionWindow — anywidget front end of the lens's window of positions.
 *
 * Served as it is (`_esm`, with js/position_window.css as `_css`); no imports, no CDN.
 *
 * CONTRACT with the Python class (widgets/lens_window.py). Traits, `.tag(sync=True)`:
 *   value  [start, stop]  r/w  the window, positions start..stop-1 (JS keeps its width)
 *   count  Int            read the prompt's positions
 *   label  Unicode        read the accessible name of the control ("lens positions")
 *
 * Mouse: drag the thumb, click the track (the window centres there), or the ◀ / ▶
 * buttons (a window's width at a time). Keyboard: the thumb is a focusable ARIA slider
 * (its value is the window's first position): ←/↓ and →/↑ move one position, PageDown /
 * PageUp one window, Home / End to the start / end; the buttons take Enter and Space.
 * Every move writes `value` once (a drag when it is dropped): each is one request.
 */

const el = (tag, cls) => {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  return node;
};

function render({ model, el: root }) {
  const box = el("div", "nnw-pw");
  box.setAttribute("role", "group");
  // JupyterLab's notebook shortcuts (↑/↓ select cells) would take the keys first
  box.setAttribute("data-lm-suppress-shortcuts", "true");
  const earlier = el("button", "nnw-pw-button nnw-pw-earlier");
  earlier.type = "button";
  earlier.textContent = "◀";
  const later = el("button", "nnw-pw-button nnw-pw-later");
  later.type = "button";
  later.textContent = "▶";
  const track = el("div", "nnw-pw-track");
  const thumb = el("div", "nnw-pw-thumb");
  thumb.tabIndex = 0;
  thumb.setAttribute("role", "slider");
  thumb.setAttribute("aria-orientation", "horizontal");
  track.append(thumb);
  const readout = el("span", "nnw-pw-readout");
  readout.setAttribute("aria-hidden", "true"); // the slider's aria-valuetext says it
  box.append(earlier, track, later, readout);
  root.append(box);

  let shown = null; // the start drawn while dragging, before it is written

  const window_ = () => {
    const [start, stop] = model.get("value");
    const count = Math.max(1, model.get("count"));
    const width = Math.max(1, Math.min(stop - start, count));
    return { start, width, count, last: count - width };
  };
  const clamp = (start) => {
    const { last } = window_();
    return Math.min(Math.max(0, Math.round(start)), last);
  };

  function draw() {
    const { width, count, last } = window_();
    const start = shown === null ? window_().start : shown;
    const label = model.get("label");
    box.setAttribute("aria-label", label);
    thumb.setAttribute("aria-label", label);
    thumb.setAttribute("aria-valuemin", "0");
    thumb.setAttribute("aria-valuemax", String(last));
    thumb.setAttribute("aria-valuenow", String(start));
    const text = `positions ${start}–${start + width - 1} of ${count}`;
    thumb.setAttribute("aria-valuetext", text);
    thumb.title = `${label}: drag, or ← → PageUp PageDown Home End`;
    readout.textContent = text;
    thumb.style.left = `${(100 * start) / count}%`;
    thumb.style.width = `${(100 * width) / count}%`;
    for (const [button, where, off] of [
      [earlier, "earlier", start === 0],
      [later, "later", start === last],
    ]) {
      button.setAttribute("aria-label", `${where} ${label} (${width} at a time)`);
      button.title = button.getAttribute("aria-label");
      // aria-disabled, not disabled: a pressed button keeps the focus at the end
      button.setAttribute("aria-disabled", String(off));
    }
  }

  function moveTo(start) {
    shown = null;
    const next = clamp(start);
    const { start: now, width } = window_();
    if (next !== now) {
      model.set("value", [next, next + width]);
      model.save_changes();
    }
    draw();
  }

  const page = (direction) => moveTo(window_().start + direction * window_().width);
  const onEarlier = () => earlier.getAttribute("aria-disabled") !== "true" && page(-1);
  const onLater = () => later.getAttribute("aria-disabled") !== "true" && page(1);

  const KEYS = {
    ArrowLeft: -1,
    ArrowDown: -1,
    ArrowRight: 1,
    ArrowUp: 1,
  };
  function onKey(event) {
    const { start, width, last } = window_();
    let next = null;
    if (event.key in KEYS) next = start + KEYS[event.key];
    else if (event.key === "PageDown") next = start - width;
    else if (event.key === "PageUp") next = start + width;
    else if (event.key === "Home") next = 0;
    else if (event.key === "End") next = last;
    if (next === null) return;
    event.preventDefault();
    moveTo(next);
  }

  // Dragging: the thumb follows the pointer; the window is written once, when dropped.
  let drag = null;
  function onDown(event) {
    if (event.button !== 0) return;
    event.preventDefault();
    thumb.focus();
    const rect = track.getBoundingClientRect();
    const { start, width, count } = window_();
    if (event.target !== thumb) {
      // a click on the track centres the window there
      moveTo(((event.clientX - rect.left) / rect.width) * count - width / 2);
      return;
    }
    drag = { x: event.clientX, start, perPx: count / rect.width, id: event.pointerId };
    thumb.setPointerCapture(event.pointerId);
    thumb.classList.add("nnw-pw-dragging");
  }
  function onMove(event) {
    if (!drag || event.pointerId !== drag.id) return;
    shown = clamp(drag.start + (event.clientX - drag.x) * drag.perPx);
    draw();
  }
  function onUp(event) {
    if (!drag || event.pointerId !== drag.id) return;
    const next = clamp(drag.start + (event.clientX - drag.x) * drag.perPx);
    drag = null;
    thumb.classList.remove("nnw-pw-dragging");
    moveTo(next);
  }

  earlier.addEventListener("click", onEarlier);
  later.addEventListener("click", onLater);
  thumb.addEventListener("keydown", onKey);
  track.addEventListener("pointerdown", onDown);
  thumb.addEventListener("pointermove", onMove);
  thumb.addEventListener("pointerup", onUp);
  thumb.addEventListener("pointercancel", onUp);
  const redraw = () => {
    if (!drag) draw();
  };
  model.on("change:value", redraw);
  model.on("change:count", redraw);
  model.on("change:label", redraw);
  draw();

  return () => {
    model.off("change:value", redraw);
    model.off("change:count", redraw);
    model.off("change:label", redraw);
    box.remove();
  };
}

export default { render };
