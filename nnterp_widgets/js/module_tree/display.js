/**
 * module_tree/display.js: the `tree` trait's nodes as display items (nodes, groups of
 * repeated blocks, values), with the maps the view navigates by, and the rows a filter
 * and the expanded items show (`visibleRows`). Pure data: no DOM.
 */

import { asArray, asInt, asObj, asStr, lower } from "./dom.js";

/**
 * Items: node {kind,key,node,name,hay,values,children,defaultExpanded},
 *        group {kind,key,label,meta,members,defaultExpanded},
 *        value {kind,key,value,name,hay,available}.
 */
export function buildDisplay(roots) {
  const parentOf = new Map(); // item key -> parent item key ("" for roots)
  const itemByKey = new Map();
  const valueKeyById = new Map();

  function register(item, parentKey) {
    let key = item.key;
    // ids are documented unique; keep the view usable if they are not.
    for (let k = 2; itemByKey.has(key); k++) key = item.key + "#" + k;
    item.key = key;
    itemByKey.set(key, item);
    parentOf.set(key, parentKey);
  }

  function valueItem(v, node, parentKey) {
    const value = asObj(v);
    const id = asStr(value.id);
    const name = asStr(value.name, id);
    const item = {
      kind: "value",
      key: "v:" + id,
      value,
      id,
      name,
      available: value.available === true,
      hay: lower(name + "\n" + id + "\n" + asStr(node.name) + "." + name),
    };
    register(item, parentKey);
    if (!valueKeyById.has(id)) valueKeyById.set(id, item.key);
    return item;
  }

  function nodeItem(n, parentKey) {
    const node = asObj(n);
    const id = asStr(node.id);
    const name = asStr(node.name) || asStr(node.native) || id;
    const rep = node.repeat && typeof node.repeat === "object" ? node.repeat : null;
    const item = {
      kind: "node",
      key: "n:" + id,
      node,
      id,
      name,
      hay: lower(name + "\n" + id),
      defaultExpanded: !(rep && asInt(rep.index, 0) > 0),
      values: [],
      children: [],
    };
    register(item, parentKey);
    item.values = asArray(node.values).map((v) => valueItem(v, { name }, item.key));
    item.children = siblings(asArray(node.children), item.key);
    return item;
  }

  function groupOf(n) {
    const r = n && n.repeat;
    return r && typeof r === "object" && typeof r.group === "string" ? r.group : null;
  }

  function siblings(nodes, parentKey) {
    const sorted = nodes
      .map((n, i) => ({ n: asObj(n), i }))
      .sort((a, b) => (b.n.standard === true) - (a.n.standard === true) || a.i - b.i)
      .map((x) => x.n);
    const members = new Map();
    for (const n of sorted) {
      const g = groupOf(n);
      if (g === null) continue;
      if (!members.has(g)) members.set(g, []);
      members.get(g).push(n);
    }
    const out = [];
    const done = new Set();
    for (const n of sorted) {
      const g = groupOf(n);
      const ms = g === null ? null : members.get(g);
      const grouped = ms && (ms.length > 1 || asInt(n.repeat.count, 1) > 1);
      if (!grouped) {
        out.push(nodeItem(n, parentKey));
        continue;
      }
      if (done.has(g)) continue;
      done.add(g);
      const ordered = ms
        .map((m, i) => ({ m, i, idx: asInt(m.repeat.index, i) }))
        .sort((a, b) => a.idx - b.idx || a.i - b.i);
      const idxs = ordered.map((x) => x.idx);
      const lo = Math.min(...idxs);
      const hi = Math.max(...idxs);
      // "layers[0]" -> base "layers"; fall back to the group id.
      const first = asStr(ordered[0].m.name);
      const suffix = "[" + ordered[0].idx + "]";
      const base = first.endsWith(suffix) && first.length > suffix.length ? first.slice(0, -suffix.length) : g;
      const count = Math.max(asInt(ordered[0].m.repeat.count, ms.length), ms.length);
      const types = new Set(ms.map((m) => asStr(m.type)));
      const meta =
        (ms.length < count ? `${ms.length} of ${count}` : `${ms.length}`) +
        " \u00d7 " +
        (types.size === 1 ? [...types][0] || "block" : "blocks");
      const group = {
        kind: "group",
        key: "g:" + parentKey + "|" + g,
        label: `${base}[${lo}..${hi}]`,
        meta,
        defaultExpanded: true,
        members: [],
      };
      register(group, parentKey);
      group.members = ordered.map((x) => nodeItem(x.m, group.key));
      out.push(group);
    }
    return out;
  }

  const roots_ = siblings(asArray(roots), "");
  return { roots: roots_, parentOf, itemByKey, valueKeyById };
}

/** Display kids of an item, in order: a node's values first, then its children. */
export function kidsOf(item) {
  if (item.kind === "node") return item.values.concat(item.children);
  if (item.kind === "group") return item.members;
  return [];
}

/**
 * The rows the tree shows, in order: the items matching ``filterText`` (a node also when
 * a descendant matches) under the ones ``isExpanded(item)`` opens. Returns
 * ``{ rows, matches, q }``: each row ``{ item, level, setsize, posinset, expandable,
 * expanded, parentKey }``, the number of matching items, and the lower-cased query.
 */
export function visibleRows(display, filterText, isExpanded) {
  const q = lower(filterText.trim());
  let matches = 0;

  // view = { item, kids: [view], hit: bool } ; null when filtered out
  function view(item) {
    if (item.kind === "value") {
      const hit = q !== "" && item.hay.includes(q);
      if (q && !hit) return null;
      if (hit) matches++;
      return { item, kids: [], hit };
    }
    const kids = [];
    for (const k of kidsOf(item)) {
      const v = view(k);
      if (v) kids.push(v);
    }
    const hit = q !== "" && item.kind === "node" && item.hay.includes(q);
    if (q && !hit && kids.length === 0) return null;
    if (hit) matches++;
    return { item, kids, hit };
  }

  const out = [];
  function flatten(views, level, parentKey) {
    views.forEach((v, i) => {
      const expandable = v.kids.length > 0;
      const open = expandable && isExpanded(v.item);
      out.push({
        item: v.item,
        level,
        setsize: views.length,
        posinset: i + 1,
        expandable,
        expanded: open,
        parentKey,
      });
      if (open) flatten(v.kids, level + 1, v.item.key);
    });
  }
  const top = [];
  for (const r of display.roots) {
    const v = view(r);
    if (v) top.push(v);
  }
  flatten(top, 1, "");
  return { rows: out, matches, q };
}
