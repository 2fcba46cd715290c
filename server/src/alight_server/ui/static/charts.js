// Line charts as plain SVG: series of (step, value) points, optional bands (low, high) around them.
// No library and no network: the dashboard works offline. Text goes in as text nodes only.
"use strict";

const Charts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const W = 420, H = 190;
  const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"];

  function el(name, attrs, text) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // "Nice" tick values covering [lo, hi]: steps of 1, 2 or 5 times a power of ten.
  function ticks(lo, hi, n) {
    if (lo === hi) { lo -= 1; hi += 1; }
    const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toFixed(10));
    return out;
  }

  function fmt(v) {
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(1);
    return String(+v.toPrecision(3));
  }

  // opts: {title, series: [{name, points: [[x, y]], band: [[x, lo, hi]]?, dots?}], onPoint(x)?}
  function line(opts) {
    const legend = opts.series.length > 1;
    const PAD = { l: 52, r: 12, t: legend ? 40 : 26, b: 28 };
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": opts.title });
    svg.appendChild(el("text", { x: PAD.l, y: 16, class: "chart-title" }, opts.title));
    const all = [];
    for (const s of opts.series) {
      for (const [x, y] of s.points) all.push([x, y]);
      for (const [x, lo, hi] of s.band || []) { all.push([x, lo]); all.push([x, hi]); }
    }
    if (!all.length) {
      svg.appendChild(el("text", { x: W / 2, y: H / 2, class: "chart-empty", "text-anchor": "middle" }, "no data yet"));
      return svg;
    }
    const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
    let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    const yt = ticks(y0, y1, 4);
    y0 = Math.min(y0, yt[0]); y1 = Math.max(y1, yt[yt.length - 1]);
    if (y0 === y1) { y0 -= 1; y1 += 1; }
    const sx = (x) => PAD.l + ((x - x0) / (x1 - x0)) * (W - PAD.l - PAD.r);
    const sy = (y) => H - PAD.b - ((y - y0) / (y1 - y0)) * (H - PAD.t - PAD.b);
    for (const v of yt) {
      svg.appendChild(el("line", { x1: PAD.l, x2: W - PAD.r, y1: sy(v), y2: sy(v), class: "grid" }));
      svg.appendChild(el("text", { x: PAD.l - 6, y: sy(v) + 4, "text-anchor": "end", class: "tick" }, fmt(v)));
    }
    for (const v of ticks(x0, x1, 5).filter((v) => Number.isInteger(v))) {
      svg.appendChild(el("text", { x: sx(v), y: H - PAD.b + 16, "text-anchor": "middle", class: "tick" }, String(v)));
    }
    svg.appendChild(el("text", { x: W - PAD.r, y: H - 2, "text-anchor": "end", class: "tick" }, "step"));
    opts.series.forEach((s, i) => {
      const color = s.color || COLORS[i % COLORS.length];
      if (s.band && s.band.length) {
        const upper = s.band.map(([x, , hi]) => `${sx(x)},${sy(hi)}`);
        const lower = s.band.slice().reverse().map(([x, lo]) => `${sx(x)},${sy(lo)}`);
        svg.appendChild(el("polygon", { points: upper.concat(lower).join(" "), fill: color, class: "band" }));
        if (s.band.length === 1) {
          const [x, lo, hi] = s.band[0];
          svg.appendChild(el("line", { x1: sx(x), x2: sx(x), y1: sy(lo), y2: sy(hi), stroke: color, class: "whisker" }));
        }
      }
      const pts = s.points.map(([x, y]) => `${sx(x)},${sy(y)}`).join(" ");
      svg.appendChild(el("polyline", { points: pts, stroke: color, class: "series", "data-series": s.name }));
      for (const [x, y] of s.points) {
        const dot = el("circle", { cx: sx(x), cy: sy(y), r: 3.5, fill: color, class: "point", "data-step": x });
        dot.appendChild(el("title", {}, `${s.name} at step ${x}: ${fmt(y)}`));
        if (opts.onPoint) dot.addEventListener("click", () => opts.onPoint(x));
        svg.appendChild(dot);
      }
      if (legend) {
        const lx = PAD.l + i * 84;
        svg.appendChild(el("rect", { x: lx, y: 24, width: 10, height: 4, fill: color }));
        svg.appendChild(el("text", { x: lx + 14, y: 29, class: "legend" }, s.name));
      }
    });
    return svg;
  }

  return { line };
})();
