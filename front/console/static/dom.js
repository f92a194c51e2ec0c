// Small DOM and formatting helpers. Names and ids come from users: always text, never HTML.

/** An element with attributes (`class`, `data-*`, properties) and children (nodes or text). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null) continue;
    if (key === "class") el.className = value;
    else if (key.startsWith("data-") || key === "title") el.setAttribute(key, value);
    else if (key === "style") Object.assign(el.style, value);
    else el[key] = value;
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function $(selector) {
  return document.querySelector(selector);
}

/** Seconds as "850 ms", "2.40 s" or "3 min". */
export function seconds(s) {
  if (s === null || s === undefined) return "–";
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${s.toFixed(2)} s`;
  return `${(s / 60).toFixed(1)} min`;
}

/** A priority as the policy computed it: a few significant digits, no exponent. */
export function priority(p) {
  if (!Number.isFinite(p)) return String(p);
  if (Math.abs(p) >= 1000) return p.toFixed(1);
  return String(Number(p.toPrecision(4)));
}

export function share(x) {
  return x === null || x === undefined ? "–" : x.toFixed(2);
}

/** The first characters of an activation id, enough to tell calls apart. */
export function shortId(id) {
  return id ? id.slice(0, 8) : "–";
}

// A colour per function, the same in the cores, the queue and the charts.
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"];
const colours = new Map();

export function colour(fn) {
  if (!colours.has(fn)) colours.set(fn, PALETTE[colours.size % PALETTE.length]);
  return colours.get(fn);
}
