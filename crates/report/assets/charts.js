// headroom's line charts, drawn with uPlot: the same code for the live
// dashboard and the HTML report. `headroomCharts.lineChart` draws one;
// `headroomCharts.drawAll` draws every `[data-chart]` element of a report
// from the JSON it carries.
"use strict";
window.headroomCharts = (function () {
  const dark = matchMedia("(prefers-color-scheme: dark)").matches;
  const ink = dark ? "#e6edf3" : "#1b1f24";
  const grid = { stroke: dark ? "#30363d" : "#e3e7eb" };
  const palette = dark
    ? ["#4493f8", "#ff7b72", "#3fb950", "#d29922", "#a371f7", "#f778ba", "#39c5cf", "#8d96a0"]
    : ["#0969da", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#1b7c83", "#57606a"];
  // Meaningful colours where a series has one (failures red, 2xx green).
  const named = dark
    ? { "failed": "#ff7b72", "5xx": "#ff7b72", "4xx": "#d29922", "2xx": "#3fb950", "3xx": "#a371f7", "offered": "#8d96a0", "achieved (OK)": "#4493f8" }
    : { "failed": "#cf222e", "5xx": "#cf222e", "4xx": "#9a6700", "2xx": "#1a7f37", "3xx": "#8250df", "offered": "#57606a", "achieved (OK)": "#0969da" };
  const errorColours = dark ? ["#f778ba", "#ffa657", "#8d96a0", "#d2a8ff"] : ["#bf3989", "#bc4c00", "#57606a", "#6639ba"];
  const colourOf = (name, i) => named[name] ||
    (name.startsWith("error: ") ? errorColours[i % errorColours.length] : palette[i % palette.length]);
  // Whole seconds on a time axis.
  const seconds = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400];
  const marks = dark ? "#d29922" : "#9a6700";

  // Vertical lines (and a shaded window after, when `to` is given) at the
  // marks `list()` returns: the run's events, a knee, the capacity.
  function markerPlugin(list) {
    return { hooks: { draw: [u => {
      const ctx = u.ctx;
      ctx.save();
      list().forEach((m, i) => {
        const x = u.valToPos(m.at, "x", true);
        if (m.to != null) {
          const x2 = u.valToPos(m.to, "x", true);
          ctx.fillStyle = dark ? "rgba(210,153,34,.12)" : "rgba(154,103,0,.08)";
          ctx.fillRect(x, u.bbox.top, Math.max(1, x2 - x), u.bbox.height);
        }
        ctx.strokeStyle = marks;
        ctx.setLineDash([4, 3]);
        ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
        ctx.fillStyle = marks;
        ctx.font = `${11 * devicePixelRatio}px system-ui`;
        // Labels of nearby marks are stacked, not overprinted.
        ctx.fillText(m.label, x + 4, u.bbox.top + (12 + 14 * i) * devicePixelRatio);
      });
      ctx.restore();
    }] } };
  }

  // A dashed y = x line (achieved against offered).
  const diagonalPlugin = { hooks: { draw: [u => {
    const lo = Math.max(u.scales.x.min, u.scales.y.min), hi = Math.min(u.scales.x.max, u.scales.y.max);
    if (!(hi > lo)) return;
    const ctx = u.ctx;
    ctx.save();
    ctx.strokeStyle = dark ? "#8d96a0" : "#57606a";
    ctx.setLineDash([4, 4]);
    ctx.beginPath();
    ctx.moveTo(u.valToPos(lo, "x", true), u.valToPos(lo, "y", true));
    ctx.lineTo(u.valToPos(hi, "x", true), u.valToPos(hi, "y", true));
    ctx.stroke();
    ctx.restore();
  }] } };

  function fromZero(u, min, max) {
    if (min == null || max == null) return [0, 1];
    const lo = Math.min(0, min);
    const hi = max > lo ? max + (max - lo) * 0.05 : lo + 1;
    return [lo, hi];
  }

  // A line chart in `box`. spec: { x_label, y_label, y2_label, names,
  // right: [bool] (on the right axis), points_only: [bool], time (whole
  // seconds on x), markers: () => [...], diagonal, width, height, xAxis,
  // xSeries (extra uPlot options for x) }; data: uPlot's aligned arrays.
  function lineChart(box, spec, data) {
    const right = spec.right || [];
    const pointsOnly = spec.points_only || [];
    const xAxis = { label: spec.x_label, stroke: ink, grid, ...(spec.time ? { incrs: seconds } : {}), ...(spec.xAxis || {}) };
    const axes = [xAxis, { label: spec.y_label, stroke: ink, grid, size: 60 }];
    if (right.some(Boolean)) axes.push({ label: spec.y2_label || "", stroke: ink, scale: "y2", side: 1, grid: { show: false }, size: 60 });
    const plugins = [];
    if (spec.markers) plugins.push(markerPlugin(spec.markers));
    if (spec.diagonal) plugins.push(diagonalPlugin);
    const opts = {
      width: spec.width || 520, height: spec.height || 240, axes, plugins,
      series: [{ label: spec.x_label.split(" (")[0], ...(spec.xSeries || {}) }].concat(spec.names.map((n, i) => ({
        label: right[i] ? n + " (right axis)" : n,
        stroke: colourOf(n, i), width: 1.5, spanGaps: false,
        scale: right[i] ? "y2" : "y",
        dash: right[i] || n.startsWith("error: ") ? [6, 3] : undefined,
        paths: pointsOnly[i] ? () => null : undefined,
        points: pointsOnly[i] ? { show: true, size: 7 } : undefined,
      }))),
      // y from 0, as a reader expects: 99 to 101 req/s is not a swing.
      scales: { x: { time: false }, y: { range: fromZero }, y2: { range: fromZero } },
    };
    return new uPlot(opts, data || [[]].concat(spec.names.map(() => [])), box);
  }

  // Series of [x, y] points on one x axis: null where a point is not a
  // number (a gap in the line), undefined where a series has no point at
  // that x (the line joins across).
  function align(series) {
    const xs = [...new Set(series.flatMap(s => s.points.map(p => p[0])))].sort((a, b) => a - b);
    const at = new Map(xs.map((x, i) => [x, i]));
    return [xs].concat(series.map(s => {
      const ys = new Array(xs.length).fill(undefined);
      for (const [x, y] of s.points) ys[at.get(x)] = y;
      return ys;
    }));
  }

  // Every chart of a report: `data-chart` holds { series: [{ name, right,
  // points_only, points }], markers, … }. Each chart says how many points
  // it drew (`data-points`), for tests.
  function drawAll() {
    for (const box of document.querySelectorAll("[data-chart]")) {
      const c = JSON.parse(box.dataset.chart);
      const marks = (c.markers || []).map(m => ({ at: m.x, label: m.label }));
      const data = align(c.series);
      lineChart(box, {
        ...c,
        names: c.series.map(s => s.name),
        right: c.series.map(s => s.right),
        points_only: c.series.map(s => s.points_only),
        markers: () => marks,
        width: Math.max(320, box.clientWidth - 16),
        height: 300,
      }, data);
      box.dataset.points = data.slice(1).reduce((n, ys) => n + ys.filter(v => v != null).length, 0);
    }
  }

  return { dark, ink, grid, colourOf, seconds, markerPlugin, lineChart, align, drawAll };
})();
