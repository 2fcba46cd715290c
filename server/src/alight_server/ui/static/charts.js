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
      series.push({ label: s.name, stroke: color, width: 2, spanGaps: true, points: { show: true, size: 7 } });
      if (s.band && s.band.length) {
        const faint = { stroke: rgba(color, 0.35), width: 1, spanGaps: true, points: { show: false } };
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
      // A flat series gets ±1 around its value (uPlot's own default for a lone 0 is 0..100).
      scales: {
        x: { time: false, range: (u, min, max) => [min - 0.5, max + 0.5] },
        y: { range: (u, min, max) => (min === max ? [min - 1, max + 1] : uPlot.rangeNum(min, max, 0.1, true)) },
      },
      axes: [{ label: "step", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000] }, {}],
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
