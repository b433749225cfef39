// Runs side by side: the diff of several configs (GET /config-diff), a group's charts with the mean of its
// runs and their min–max band (GET /run-groups/series/...), and the parallel coordinates of the runs
// selected in the table: each config value that differs an axis, then a chosen metric ("which lr won?").
"use strict";

const BAND_POINTS = 500;
const OVERLAY_MAX = 16;

// --- config diff: #diff=a,b,c -------------------------------------------------------------------------

async function showDiff(runs) {
  const diff = await api("/config-diff?" + new URLSearchParams({runs: runs.join(",")}));
  const head = "<tr><th>key</th>" + diff.runs.map((r, i) => `<th>${escapeHtml(diff.names[i] || r)}<br><small>${escapeHtml(r)}</small></th>`).join("") + "</tr>";
  const rows = diff.rows.map((row) => `<tr data-key="${escapeHtml(row.key)}"><td>${escapeHtml(row.key)}</td>` +
    row.values.map((v) => v == null ? '<td class="absent">—</td>' : `<td>${escapeHtml(v)}</td>`).join("") + "</tr>").join("");
  $("diff-table").innerHTML = `<thead>${head}</thead><tbody>${rows}</tbody>`;
  $("diff-note").textContent = `${diff.runs.length} runs: ${diff.rows.length} keys differ, ${diff.same} the same`;
  $("diff-view").dataset.ready = "1";
}

// --- a group's charts: #group=LABEL&runs=a,b&metrics=m1,m2&x=step&smooth=0.6 -----------------------------
// As a run's charts are: on the x axis picked, the mean smoothed as a run's line is (its raw line dim), and a
// legend with the mean, min, max and runs under the cursor (the last ones while it is elsewhere).

function groupControls() {  // the x axis and smoothing of the group's charts, in its toolbar (made once)
  if ($("group-axis")) return;
  const axis = el("select", {id: "group-axis"}, ...["step", "epoch", "round", "ts"].map((a) => el("option", {value: a}, a)));
  const smoothing = el("input", {id: "group-smoothing", type: "range", min: "0", max: "0.99", step: "0.01", value: "0"});
  const shown = el("output", {id: "group-smoothing-value"}, "0.00");
  $("group-runs").before(el("label", {}, "x ", axis), " ", el("label", {}, "smoothing ", smoothing, " ", shown), " ");
  const rewrite = (key, value, keep) => {
    const hash = new URLSearchParams(location.hash.slice(1));
    if (value === keep) hash.delete(key); else hash.set(key, value);
    history.replaceState(null, "", "#" + hash.toString());
  };
  axis.addEventListener("change", () => { rewrite("x", axis.value, "step"); route(); });
  smoothing.addEventListener("input", () => {
    shown.textContent = Number(smoothing.value).toFixed(2);
    rewrite("smooth", smoothing.value, "0");
    for (const chart of groupCharts) chart.draw(Number(smoothing.value));
  });
}

let groupCharts = [];

async function showGroup(label, runs, metrics, hash = new URLSearchParams()) {
  groupControls();
  const axis = ["step", "epoch", "round", "ts"].includes(hash.get("x")) ? hash.get("x") : "step";
  const asked = Number(hash.get("smooth")), smoothing = asked > 0 && asked < 1 ? asked : 0;
  $("group-axis").value = axis;
  $("group-smoothing").value = String(smoothing);
  $("group-smoothing-value").textContent = smoothing.toFixed(2);
  $("group-title").textContent = `${label}: ${runs.length} runs, each metric's mean (line) and min–max (band)`;
  const expand = runs.slice(0, OVERLAY_MAX);
  $("group-runs").href = `#run=${encodeURIComponent(expand[0])}&overlay=${expand.slice(1).map(encodeURIComponent).join(",")}`;
  const box = $("group-charts");
  groupCharts.forEach((c) => c.plot && c.plot.destroy());
  groupCharts = [];
  box.innerHTML = "";
  delete box.dataset.ready;
  if (!metrics.length) {
    const listing = await api(`/runs/${encodeURIComponent(runs[0])}/series`);
    metrics = [...new Set(listing.filter((s) => s.kind === "metrics" && !s.name.startsWith("system.")).map((s) => s.name))].sort().slice(0, 8);
  }
  for (const name of metrics) {
    const reply = await api(`/run-groups/series/${encodeURIComponent(name)}?` +
      new URLSearchParams({runs: runs.join(","), x: axis, max_points: String(BAND_POINTS)}));
    reply.bands.filter((b) => b.x.length).forEach((b, i) => {
      const chart = new BandChart(name, b, i, axis);
      groupCharts.push(chart);
      box.appendChild(chart.el);
      requestAnimationFrame(() => chart.draw(smoothing));
    });
  }
  box.dataset.ready = "1";
}

class BandChart {
  constructor(name, band, i, axis) {
    this.band = band; this.axis = axis; this.colour = PALETTE[i % PALETTE.length]; this.plot = null;
    const labels = Object.entries(band.labels).map(([k, v]) => `${k}=${v}`).join(" ");  // a rank only where a run has several
    this.el = el("div", {className: "chart"}, el("h3", {}, el("span", {}, name, " ", el("small", {}, labels))),
                 el("div", {className: "plot"}), el("div", {className: "legend"}));
    Object.assign(this.el.dataset, {title: name, points: String(band.x.length), runs: String(Math.max(...band.n))});
  }

  draw(weight) {
    this.weight = weight;
    const b = this.band, c = this.colour, time = this.axis === "ts";
    const series = [{label: this.axis},
      {label: "min", stroke: c + "55", width: 1, points: {show: false}},
      {label: "max", stroke: c + "55", width: 1, points: {show: false}},
      {label: "mean", stroke: c + (weight > 0 ? "55" : ""), width: weight > 0 ? 1 : 2, points: {show: false}},
      {label: "smoothed", stroke: c, width: 2, points: {show: false}, show: weight > 0}];
    const data = [b.x, b.min, b.max, b.mean, smooth(b.mean, weight)];
    if (this.plot) this.plot.destroy();
    this.plot = new uPlot({
      width: Math.max(300, this.el.clientWidth - 16), height: 240, scales: {x: {time}}, series, legend: {show: false},
      bands: [{series: [2, 1], fill: c + "33"}], axes: chartAxes(time),
      cursor: {y: false, sync: {key: "nissa-group", setSeries: false}},
      hooks: {setCursor: [(u) => this.legend(u.cursor.idx)]},
    }, data, this.el.querySelector(".plot"));
    this.legend(null);
  }

  legend(idx) {  // the values under the cursor, else the last ones
    const b = this.band, at = idx ?? b.x.length - 1, box = this.el.querySelector(".legend");
    const x = b.x[at], mean = (this.weight > 0 ? this.plot.data[4] : b.mean)[at];
    box.dataset.at = idx == null ? "last" : "cursor";
    const xText = this.axis === "ts" ? new Date(x * 1000).toLocaleTimeString() : fmt(x);
    box.replaceChildren(el("span", {className: "x"}, `${this.axis} ${xText}`),
      ...[["mean", mean], ["min", b.min[at]], ["max", b.max[at]]].map(([k, v]) =>
        el("span", {className: "entry"}, `${k} `, el("b", {className: "value"}, fmt(v)))),
      el("span", {className: "entry"}, `runs ${b.n[at]}`));
  }
}

// --- parallel coordinates of the selected runs (or the page's) ---------------------------------------

function parcoordsRuns() {
  const picked = table.runs.filter((r) => state.selected.has(r.run_id));
  return picked.length >= 2 ? picked : table.runs;
}

function axisOf(key, values) {
  // Numbers on a linear scale (logarithmic when all are positive and span two decades: a learning rate);
  // anything else as categories spread evenly. pos(v) is 0 at the bottom, 1 at the top, null if unknown.
  const known = values.filter((v) => v != null);
  if (known.length && known.every((v) => typeof v === "number" && Number.isFinite(v))) {
    let lo = Math.min(...known), hi = Math.max(...known);
    const log = lo > 0 && hi / lo >= 100;
    const f = log ? Math.log10 : (v) => v;
    const [a, b] = [f(lo), f(hi)];
    return {key, kind: log ? "log" : "linear", ticks: [fmtNum(lo), fmtNum(hi)],
            pos: (v) => v == null ? null : b > a ? (f(v) - a) / (b - a) : 0.5};
  }
  const cats = [...new Set(known.map(String))].sort();
  return {key, kind: "category", ticks: cats,
          pos: (v) => v == null ? null : cats.length > 1 ? cats.indexOf(String(v)) / (cats.length - 1) : 0.5};
}

function drawParcoords() {
  $("parcoords-view").hidden = !state.showParcoords;
  if (!state.showParcoords) { writeTableUrl(); return; }
  const f = table.field, pick = $("parcoords-metric");
  const options = shownMetrics().map((k) => `<option value="${escapeHtml(k)}">${escapeHtml(k + "." + f)}</option>`).join("");
  // Coloured by the metric the user picked, else the one the table is sorted by, else the first.
  const sortedBy = shownMetrics().find((k) => `${k}.${f}` === table.sort.replace(/^-/, ""));
  if (pick.innerHTML !== options) pick.innerHTML = options;
  pick.value = [state.parcoordsMetric, sortedBy, shownMetrics()[0]].find((k) => k && shownMetrics().includes(k)) || "";
  const key = pick.value, metric = key ? `${key}.${f}` : "", runs = parcoordsRuns();
  const metricOf = (r) => key ? ((r.named || {})[key] || {})[f] ?? null : null;
  const keys = differingParams(runs);
  const {axes, lines} = paintParcoords($("parcoords"), keys, runs, metric, metricOf);
  state.parcoords = {axes: axes.map(({key, kind, ticks}) => ({key, kind, ticks})), lines};
  $("parcoords-note").textContent = `${lines.length} runs${runs === table.runs ? " of this page (select two or more to narrow)" : " selected"}; ` +
    (metric ? `colour: ${metric}, low blue, high yellow` : "no metric to colour by");
  writeTableUrl();
}

// The parallel coordinates of runs ({run_id, name, config}) on a canvas: an axis per config key, then the metric
// (metricOf(run)); the runs' lines coloured by the metric. The runs table's and a sweep's page's.
function paintParcoords(canvas, keys, runs, metric, metricOf) {
  const axes = [...keys.map((k) => axisOf("config." + k, runs.map((r) => (r.config || {})[k] ?? null))),
                ...(metric ? [axisOf(metric, runs.map(metricOf))] : [])];
  const ctx = canvas.getContext("2d");
  const width = canvas.width = Math.max(600, canvas.parentElement.clientWidth - 16), height = canvas.height = 320;
  const top = 40, bottom = height - 40, left = 70, right = width - 150;
  const xOf = (i) => axes.length > 1 ? left + (right - left) * i / (axes.length - 1) : (left + right) / 2;
  const yOf = (p) => bottom - (bottom - top) * p;
  ctx.clearRect(0, 0, width, height);
  ctx.font = "12px system-ui, sans-serif";
  const colourAxis = axes[axes.length - 1];
  const lines = runs.map((r) => {
    const values = [...keys.map((k) => (r.config || {})[k] ?? null), ...(metric ? [metricOf(r)] : [])];
    const pts = axes.map((a, i) => { const p = a.pos(values[i]); return p == null ? null : [xOf(i), yOf(p)]; });
    const p = metric ? colourAxis.pos(values[values.length - 1]) : null;
    return {run: r.run_id, name: r.name || r.run_id, values, points: pts, colour: p == null ? "#7d8590" : gradient(p)};
  });
  for (const line of lines) {  // a run's line, broken where it has no value on an axis
    ctx.strokeStyle = line.colour; ctx.lineWidth = 2; ctx.beginPath();
    let pen = false;
    for (const pt of line.points) { if (!pt) { pen = false; continue; } pen ? ctx.lineTo(...pt) : ctx.moveTo(...pt); pen = true; }
    ctx.stroke();
  }
  if (lines.length <= 20) {  // each run named at its last axis (few enough to read)
    ctx.textAlign = "left";
    for (const line of lines) {
      const last = [...line.points].reverse().find(Boolean);
      if (last) { ctx.fillStyle = line.colour; ctx.fillText(line.name.slice(0, 20), last[0] + 8, last[1] + 4); }
    }
  }
  axes.forEach((a, i) => {
    const x = xOf(i);
    ctx.strokeStyle = "#7d8590"; ctx.lineWidth = 1; ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, bottom); ctx.stroke();
    ctx.fillStyle = "#d8dee4"; ctx.textAlign = "center";
    ctx.fillText(a.key + (a.kind === "log" ? " (log)" : ""), x, top - 18);
    ctx.fillStyle = "#7d8590";
    const ticks = a.kind === "category" ? a.ticks.map((t) => [t, a.pos(t)]) : [[a.ticks[0], 0], [a.ticks[1], 1]];
    for (const [t, p] of ticks.slice(0, 12)) ctx.fillText(String(t).slice(0, 16), x, yOf(p) + (p === 0 ? 16 : p === 1 ? -4 : 4));
  });
  canvas.dataset.axes = axes.map((a) => a.key).join(",");
  canvas.dataset.lines = String(lines.length);
  canvas.dataset.colour = metric;
  return {axes, lines};
}

function gradient(p) {  // blue (low) to yellow (high) through green: readable on the dark page
  const stops = [[64, 120, 255], [60, 200, 120], [240, 210, 60]];
  const at = Math.min(Math.max(p, 0), 1) * (stops.length - 1), i = Math.min(Math.floor(at), stops.length - 2), f = at - i;
  const c = stops[i].map((v, k) => Math.round(v + (stops[i + 1][k] - v) * f));
  return `rgb(${c.join(",")})`;
}
