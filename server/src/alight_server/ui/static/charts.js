// Line charts over the run's steps, drawn by uPlot (vendor/uplot, served with the page: no CDN, works offline).
// A chart is series of (step, value) points, optionally with a band (low, high) drawn around one of them.
"use strict";

const Charts = (() => {
  const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"];
  const HEIGHT = 190;

  function rgba(hex, alpha) {
    const n = parseInt(hex.slice(1), 16);
    return `rgba(${n >> 16}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
  }

  // The decimals that write x exactly (0.25: 2), within float noise (0.1 + 0.2).
  function decimals(x) {
    for (let d = 0; d < 15; d++) {
      const scaled = Math.abs(x) * 10 ** d;
      if (Math.abs(scaled - Math.round(scaled)) < 1e-6 * Math.max(1, scaled)) return d;
    }
    return 15;
  }

  // A value axis's tick labels. uPlot's own format keeps 3 decimals, so a KL of 1.2e-6 read "0" and one
  // of -3e-7 "-0". Here a tick gets the decimals its axis's step needs, so neighbouring ticks read apart;
  // an axis whose ticks are all under 1e-3 (or reach 1e6) reads in exponent form, 1.2e-6; zero is "0".
  function valueTicks(u, splits, axisIdx, space, incr) {
    const largest = Math.max(...splits.map((v) => Math.abs(v ?? 0)));
    const exponent = largest > 0 && (largest < 1e-3 || largest >= 1e6) ? Math.floor(Math.log10(largest)) : null;
    const fixed = new Intl.NumberFormat("en-US", { maximumFractionDigits: decimals(incr) });
    return splits.map((v) => {
      if (v === null || v === undefined) return "";
      if (Math.abs(v) < incr / 2) return "0"; // the tick at zero, whichever sign float arithmetic gave it
      return exponent === null ? fixed.format(v) : v.toExponential(decimals(incr / 10 ** exponent));
    });
  }

  // A value axis as wide as its widest tick label (1.25e-6 is wider than uPlot's fixed 50 px), never narrower.
  function valueAxisSize(u, values, axisIdx, cycleNum) {
    const axis = u.axes[axisIdx];
    if (cycleNum > 1) return axis._size; // uPlot sizes, then lays out again: settle on the first measure
    u.ctx.font = axis.font[0];
    const widest = Math.max(0, ...(values || []).map((v) => u.ctx.measureText(v).width / uPlot.pxRatio));
    return Math.max(50, Math.ceil(axis.ticks.size + axis.gap + widest));
  }

  // A hovered point's value in the legend: four significant digits (whole numbers whole), a tiny one in
  // exponent form (uPlot's own format wrote 1.2e-6 as "0").
  function legendValue(u, v) {
    if (v === null || v === undefined) return "--"; // as uPlot writes no value
    const a = Math.abs(v);
    if (a === 0) return "0";
    if (a < 1e-3 || a >= 1e6) return v.toExponential(3);
    return String(+v.toFixed(Math.max(0, 3 - Math.floor(Math.log10(a)))));
  }

  // A flat series' scale: its value ± its own size (at most 1), so 1.2e-6 draws on 0..2.4e-6, not -1..1.
  function valueRange(u, min, max) {
    if (min !== max) return uPlot.rangeNum(min, max, 0.1, true);
    const pad = Math.min(Math.abs(min), 1) || 1; // a lone 0: -1..1 (uPlot's own default is 0..100)
    return [min - pad, max + pad];
  }

  // uPlot wants one sorted x array and, per series, a y value (or null: a gap) at each x.
  function aligned(series) {
    const xs = new Set();
    for (const s of series) {
      for (const [x] of s.points) xs.add(x);
      for (const [x] of s.band || []) xs.add(x);
    }
    const x = [...xs].sort((a, b) => a - b);
    const column = (pairs, pick) => {
      const at = new Map(pairs.map((p) => [p[0], pick(p)]));
      return x.map((v) => (at.has(v) ? at.get(v) : null));
    };
    return { x, column };
  }

  // opts: {title, series: [{name, points: [[x, y]], band: [[x, lo, hi]]?, color?}], onPoint(x)?}
  // A series without a colour takes the next of COLORS (a policy's series bring their policy's: policies.js).
  // Returns the chart's box; `box.chart` is the uPlot instance (its series and data), for readers and tests.
  function line(opts) {
    const box = document.createElement("div");
    box.className = "chart";
    box.dataset.title = opts.title;
    const { x, column } = aligned(opts.series);
    if (!x.length) {
      const title = document.createElement("div");
      title.className = "chart-title";
      title.textContent = opts.title;
      const empty = document.createElement("div");
      empty.className = "chart-empty";
      empty.textContent = "no data yet";
      box.append(title, empty);
      return box;
    }
    const data = [x];
    const series = [{ label: "step" }];
    const bands = [];
    opts.series.forEach((s, i) => {
      const color = s.color || COLORS[i % COLORS.length];
      data.push(column(s.points, (p) => p[1]));
      series.push({
        label: s.name, stroke: color, width: 2, spanGaps: true, points: { show: true, size: 7 }, value: legendValue,
      });
      if (s.band && s.band.length) {
        const faint = { stroke: rgba(color, 0.35), width: 1, spanGaps: true, points: { show: false }, value: legendValue };
        data.push(column(s.band, (p) => p[2]), column(s.band, (p) => p[1]));
        series.push({ ...faint, label: `${s.name} high` }, { ...faint, label: `${s.name} low` });
        bands.push({ series: [series.length - 2, series.length - 1], fill: rgba(color, 0.15) });
      }
    });
    const chart = new uPlot({
      title: opts.title,
      width: 420,
      height: HEIGHT,
      // Half a step of room each side, so the first and last points sit inside the plot, where a click reaches.
      scales: {
        x: { time: false, range: (u, min, max) => [min - 0.5, max + 0.5] },
        y: { range: valueRange },
      },
      // Steps are whole: their ticks step by whole numbers only.
      axes: [
        { label: "step", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000] },
        { values: valueTicks, size: valueAxisSize },
      ],
      cursor: { drag: { x: false, y: false } },
      series,
      bands,
    }, data, box);
    box.chart = chart;
    // A click picks the step under the cursor (uPlot snaps the cursor to the nearest x).
    if (opts.onPoint) {
      chart.over.style.cursor = "pointer";
      chart.over.addEventListener("click", () => {
        if (chart.cursor.idx !== null && chart.cursor.idx !== undefined) opts.onPoint(chart.data[0][chart.cursor.idx]);
      });
    }
    // The box takes its width from the page's grid once it is on screen.
    new ResizeObserver(() => {
      const width = box.clientWidth - 2;
      if (width > 0 && width !== chart.width) chart.setSize({ width, height: HEIGHT });
    }).observe(box);
    return box;
  }

  return { line };
})();
