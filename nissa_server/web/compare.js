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

// --- a group's charts: #group=LABEL&runs=a,b&metrics=m1,m2 ----------------------------------------------

async function showGroup(label, runs, metrics) {
  $("group-title").textContent = `${label}: ${runs.length} runs, each metric's mean (line) and min–max (band)`;
  const expand = runs.slice(0, OVERLAY_MAX);
  $("group-runs").href = `#run=${encodeURIComponent(expand[0])}&overlay=${expand.slice(1).map(encodeURIComponent).join(",")}`;
  const box = $("group-charts");
  box.innerHTML = "";
  delete box.dataset.ready;
  if (!metrics.length) {
    const listing = await api(`/runs/${encodeURIComponent(runs[0])}/series`);
    metrics = [...new Set(listing.filter((s) => s.kind === "metrics" && !s.name.startsWith("system.")).map((s) => s.name))].sort().slice(0, 8);
  }
  for (const name of metrics) {
    const reply = await api(`/run-groups/series/${encodeURIComponent(name)}?` +
      new URLSearchParams({runs: runs.join(","), x: "step", max_points: String(BAND_POINTS)}));
    reply.bands.filter((b) => b.x.length).forEach((b, i) => box.appendChild(bandChart(name, b, i)));
  }
  box.dataset.ready = "1";
}

function bandChart(name, band, i) {
  const el = document.createElement("div");
  const labels = Object.entries(band.labels).filter(([k, v]) => !(k === "rank" && v === "0")).map(([k, v]) => `${k}=${v}`).join(" ");
  el.className = "chart";
  el.dataset.title = name;
  el.dataset.points = String(band.x.length);
  el.dataset.runs = String(Math.max(...band.n));
  el.innerHTML = `<h3><span>${escapeHtml(name)} <small>${escapeHtml(labels)}</small></span></h3><div class="plot"></div>`;
  const colour = PALETTE[i % PALETTE.length];
  const opts = {
    width: 560, height: 240, scales: {x: {time: false}},
    series: [{label: "step"},
             {label: "min", stroke: colour + "55", width: 1, points: {show: false}},
             {label: "max", stroke: colour + "55", width: 1, points: {show: false}},
             {label: "mean", stroke: colour, width: 2, points: {show: false}}],
    bands: [{series: [2, 1], fill: colour + "33"}],
    axes: chartAxes(),
  };
  requestAnimationFrame(() => { opts.width = Math.max(300, el.clientWidth - 16); new uPlot(opts, [band.x, band.min, band.max, band.mean], el.querySelector(".plot")); });
  return el;
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
  const options = shownMetrics().map((k) => `<option value="${escapeHtml(k)}">${escapeHtml(metricName(k) + "." + f)}</option>`).join("");
  // Coloured by the metric the user picked, else the one the table is sorted by, else the first.
  const sortedBy = shownMetrics().find((k) => `${metricName(k)}.${f}` === table.sort.replace(/^-/, ""));
  if (pick.innerHTML !== options) pick.innerHTML = options;
  pick.value = [state.parcoordsMetric, sortedBy, shownMetrics()[0]].find((k) => k && shownMetrics().includes(k)) || "";
  const key = pick.value, metric = key ? `${metricName(key)}.${f}` : "", runs = parcoordsRuns();
  const metricOf = (r) => key ? ((r.metrics || {})[key] || {})[f] ?? null : null;
  const keys = differingParams(runs);
  const axes = [...keys.map((k) => axisOf("config." + k, runs.map((r) => (r.config || {})[k] ?? null))),
                ...(metric ? [axisOf(metric, runs.map(metricOf))] : [])];
  const canvas = $("parcoords"), ctx = canvas.getContext("2d");
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
  state.parcoords = {axes: axes.map(({key, kind, ticks}) => ({key, kind, ticks})), lines};
  canvas.dataset.axes = axes.map((a) => a.key).join(",");
  canvas.dataset.lines = String(lines.length);
  canvas.dataset.colour = metric;
  $("parcoords-note").textContent = `${lines.length} runs${runs === table.runs ? " of this page (select two or more to narrow)" : " selected"}; ` +
    (metric ? `colour: ${metric}, low blue, high yellow` : "no metric to colour by");
  writeTableUrl();
}

function gradient(p) {  // blue (low) to yellow (high) through green: readable on the dark page
  const stops = [[64, 120, 255], [60, 200, 120], [240, 210, 60]];
  const at = Math.min(Math.max(p, 0), 1) * (stops.length - 1), i = Math.min(Math.floor(at), stops.length - 2), f = at - i;
  const c = stops[i].map((v, k) => Math.round(v + (stops[i + 1][k] - v) * f));
  return `rgb(${c.join(",")})`;
}
