/**
 * InView — anywidget front end that brings a part of the explorer into view.
 *
 * Served as it is (`_esm`, with js/in_view.css as `_css`); no imports, no CDN. It draws
 * nothing. The style sheet keeps the explorer's tool strip in view (sticky at the
 * bottom of the notebook's scroller while the explorer's top is on screen).
 *
 * CONTRACT with the Python class (widgets/in_view.py). Traits, `.tag(sync=True)`:
 *   target  Unicode  read  a class name inside the same explorer (`nnw-attention`, `nnw-tools`)
 *   asked   Int      read  bumped by each `show()`: each bump scrolls the target into view
 *                          (as little as it takes, `block: "nearest"`)
 */

function render({ model, el }) {
  el.classList.add("nnw-in-view");
  const show = () => {
    const target = model.get("target");
    const root = el.closest(".nnw-explorer");
    const node = target && root ? root.querySelector(`.${CSS.escape(target)}`) : null;
    if (node) node.scrollIntoView({ block: "nearest", inline: "nearest" });
  };
  model.on("change:asked", show);
  return () => model.off("change:asked", show);
}

export default { render };
