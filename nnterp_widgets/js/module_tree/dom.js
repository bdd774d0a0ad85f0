/**
 * module_tree/dom.js: building DOM nodes from data, and reading traits defensively.
 *
 * `h` is the one way the module tree puts data into the page: text through textContent,
 * attributes through setAttribute, never markup. The `as*` readers turn a trait's value
 * into the type the view expects, whatever arrived.
 */

export function h(tag, attrs, ...kids) {
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

export const asArray = (x) => (Array.isArray(x) ? x : []);
export const asStr = (x, d = "") => (typeof x === "string" ? x : x === null || x === undefined ? d : String(x));
export const asObj = (x) => (x && typeof x === "object" && !Array.isArray(x) ? x : {});
export const lower = (s) => s.toLowerCase();

export function asInt(x, d) {
  const n = Number(x);
  return Number.isInteger(n) ? n : d;
}

/** A binary trait's bytes (an ArrayBuffer or any view of one; nothing: none). */
export function bytesOf(view) {
  if (!view) return new Uint8Array(0);
  if (view instanceof ArrayBuffer) return new Uint8Array(view);
  if (ArrayBuffer.isView(view)) return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  return new Uint8Array(0);
}

/** A binary trait as float32 values, copied so that the float view is aligned. */
export function floatsOf(view) {
  const copy = new Uint8Array(bytesOf(view));
  return new Float32Array(copy.buffer, 0, Math.floor(copy.byteLength / 4));
}

export function readFloats(buf, n) {
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
