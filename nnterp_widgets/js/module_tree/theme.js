/**
 * module_tree/theme.js: the page's theme ("light" or "dark"), written to the `theme`
 * trait at render and on every change, so the plotly panels can follow it: plotly cannot
 * read JupyterLab's CSS variables. JupyterLab marks the body with data-jp-theme-light;
 * elsewhere the page background's luminance decides.
 */

function pageTheme() {
  const rgb = (getComputedStyle(document.body).backgroundColor.match(/[\d.]+/g) || []).map(Number);
  if (rgb.length < 3 || (rgb.length > 3 && rgb[3] === 0)) {
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }
  const [r, g, b] = rgb;
  return 0.2126 * r + 0.7152 * g + 0.0722 * b < 128 ? "dark" : "light";
}

/** Report the theme now and on each change while ``alive()``; returns the stop. */
export function watchTheme(model, alive) {
  const report = () => {
    if (!alive()) return;
    const mark = document.body && document.body.dataset ? document.body.dataset.jpThemeLight : undefined;
    const theme = mark !== undefined ? (mark === "true" ? "light" : "dark") : pageTheme();
    if (model.get("theme") !== theme) {
      model.set("theme", theme);
      model.save_changes();
    }
  };
  report();
  const watch = typeof MutationObserver === "function" && document.body ? new MutationObserver(report) : null;
  if (watch) {
    watch.observe(document.body, {
      attributes: true,
      attributeFilter: ["data-jp-theme-light", "data-jp-theme-name", "class"],
    });
  }
  return () => {
    if (watch) watch.disconnect();
  };
}
