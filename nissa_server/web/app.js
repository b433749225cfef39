// nissa web page: a run's charts with markers, live updates over /ws/watch, overlays, routing (the runs
// table is runs.js, diffs, group charts and parallel coordinates compare.js). Every request goes to this
// server (no CDN, no outside fonts); the only write is a run's group, tags and notes (PATCH). With --read-auth the
// token is asked for once and kept for the tab (sessionStorage).
"use strict";

// What to chart (default charts, their titles and groups, how many of a loop's own metrics) is the server's
// one definition, the console's too: GET /ui/charts.json, read once.
let chartDefs = null;
async function definitions() {
  if (!chartDefs) chartDefs = await api("/ui/charts.json");
  return chartDefs;
}
// A chart's series pattern: "*" matches any characters, nothing else is special (leyline.charts.name_matches).
function nameMatches(pattern, name) {
  const parts = pattern.split("*");
  if (parts.length === 1) return pattern === name;
  if (!name.startsWith(parts[0]) || !name.endsWith(parts[parts.length - 1])) return false;
  let at = parts[0].length;
  const end = name.length - parts[parts.length - 1].length;
  for (const part of parts.slice(1, -1)) {
    const found = name.indexOf(part, at);
    if (found < 0 || found + part.length > end) return false;
    at = found + part.length;
  }
  return at <= end;
}
const PALETTE = ["#4fb3ff", "#f78166", "#3fb950", "#d2a8ff", "#e3b341", "#56d4dd", "#ff9bce", "#a5d6ff"];
const MARK_COLORS = {command: "#e3b341", anomaly: "#ff7b72", fossilized: "#3fb950", pruned: "#d2a8ff",
                     resumed: "#56d4dd", end: "#7d8590"};
const LIVE_EVERY_MS = 1000;
const LIST_EVERY_MS = 2000;

const $ = (id) => document.getElementById(id);
const state = {runs: [], selected: new Set(), view: null};
window.nissa = state;  // for tests and the curious: what the page shows

function token() { return sessionStorage.getItem("nissa-token"); }

async function request(path, init = {}) {
  const headers = {...(token() ? {Authorization: "Bearer " + token()} : {}), ...(init.body ? {"Content-Type": "application/json"} : {})};
  const res = await fetch(path, {...init, headers});
  if (res.status === 401) {
    $("auth").hidden = false;
    throw Object.assign(new Error("this server needs its token (above)"), {status: 401});
  }
  if (!res.ok) throw new Error(`${path.split("?")[0]}: ${res.status} ${(await res.json().catch(() => ({}))).detail || ""}`);
  $("auth").hidden = true;
  return res;
}

async function api(path, init) { return (await request(path, init)).json(); }

// Where the rest of a reply that holds a page starts (its Link: <…>; rel="next"), or null.
function nextPage(res) {
  const found = /<([^>]*)>;\s*rel="next"/.exec(res.headers.get("Link") || "");
  return found ? found[1] : null;
}

async function apiPage(path) {  // a page of a list and how many items match in all (X-Total-Count)
  const res = await request(path), items = await res.json();
  return {items, total: Number(res.headers.get("X-Total-Count") ?? items.length)};
}

function showError(err) { $("error").textContent = err ? String(err.message || err) : ""; }

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}

// --- charts ----------------------------------------------------------------------------------------

class Chart {
  constructor(view, title, names) {
    this.view = view; this.title = title; this.names = names;
    this.lines = new Map();  // "run_id key" -> {run, key, labels, x: [], y: []}
    this.el = document.createElement("div");
    this.el.className = "chart";
    this.el.dataset.title = title;
    this.el.innerHTML = `<h3><span>${escapeHtml(title)} <small class="note"></small></span><button title="remove">×</button></h3>` +
      `<div class="plot"></div>`;
    this.el.querySelector("button").addEventListener("click", () => view.remove(this));
    this.plot = null;
  }

  async load(run, after) {
    for (const name of this.names) {
      const params = new URLSearchParams({x: this.view.axis, max_points: "2000"});
      if (after != null) params.set("after", String(after));
      let page = `/runs/${encodeURIComponent(run)}/series/${encodeURIComponent(name)}?` + params;
      while (page) {
        const res = await request(page);
        const reply = await res.json();
        for (const s of reply.series) {
          const id = s.run_id + " " + s.key;
          let line = this.lines.get(id);
          if (!line) this.lines.set(id, line = {run: s.run_id, key: s.key, labels: s.labels, x: [], y: []});
          const last = line.x.length ? line.x[line.x.length - 1] : -Infinity;
          s.x.forEach((x, i) => { if (x > last || after == null) { line.x.push(x); line.y.push(s.y[i]); } });
        }
        page = nextPage(res);
      }
    }
  }

  lastX(run) {
    let last = null;
    for (const line of this.lines.values()) {
      if (line.run === run && line.x.length) last = Math.max(last ?? -Infinity, line.x[line.x.length - 1]);
    }
    return last;
  }

  note(lines, drawn) {
    // What the lines do not show: runs of the view without this series, an x axis its points lack, NaN/inf.
    const notes = [];
    if (!drawn.length) notes.push(`no point of this series has a ${this.view.axis}`);
    const missing = this.view.runs.filter((r) => drawn.length && !drawn.includes(r));
    if (missing.length) notes.push("not in " + missing.join(", "));
    const bad = lines.reduce((n, l) => n + l.y.filter((y) => y == null).length, 0);
    if (bad) notes.push(`${bad} NaN/inf`);
    this.el.dataset.note = notes.join("; ");
    return notes.join(" · ");
  }

  render() {
    const lines = [...this.lines.values()].sort((a, b) => (a.run + a.key).localeCompare(b.run + b.key));
    this.el.dataset.points = String(lines.reduce((n, l) => n + l.x.length, 0));
    const drawn = [...new Set(lines.filter((l) => l.x.length).map((l) => l.run))];
    this.el.dataset.runs = drawn.join(",");
    if (!lines.length) { this.el.hidden = true; return; }
    this.el.hidden = false;
    this.el.querySelector(".note").textContent = this.note(lines, drawn);
    const data = uPlot.join(lines.map((l) => [l.x.map((x) => x - this.view.shift(l.run)), l.y]));
    const runs = this.view.runs;
    const series = [{label: this.view.sinceStart ? "s since start" : this.view.axis}, ...lines.map((l, i) => ({
      label: labelOf(l, runs.length > 1, this.names.length > 1 || this.names[0] !== this.title),
      stroke: PALETTE[(runs.length > 1 ? runs.indexOf(l.run) * 3 + lines.filter((m, j) => j < i && m.run === l.run).length
                                       : i) % PALETTE.length],
      dash: runs.length > 1 && runs.indexOf(l.run) > 0 ? [6, 3] : undefined,
      width: 1.5, spanGaps: false, points: {show: false},  // NaN and inf (null here) leave a gap
    }))];
    const width = Math.max(300, this.el.clientWidth - 16);
    if (this.plot && this.plot.series.length === series.length) { this.plot.setData(data); return; }
    if (this.plot) this.plot.destroy();
    this.plot = new uPlot({
      width, height: 240, series, scales: {x: {time: this.view.axis === "ts" && !this.view.sinceStart}},
      axes: [{stroke: "#7d8590", grid: {stroke: "#2a3038"}}, {stroke: "#7d8590", grid: {stroke: "#2a3038"}, size: 60}],
      hooks: {draw: [(u) => drawMarkers(u, this.view, this.el.dataset.runs.split(","))]},
    }, data, this.el.querySelector(".plot"));
  }
}

function labelOf(line, withRun, withName) {
  const labels = Object.entries(line.labels).filter(([k, v]) => !(k === "rank" && v === "0"))
    .map(([k, v]) => `${k}=${v}`).join(" ");
  const name = withName ? line.key.split("{")[0].split(".").slice(-1)[0] + " " : "";
  return ((withRun ? line.run + " " : "") + name + labels).trim() || line.key;
}

function drawMarkers(u, view, runs) {
  // A thin line per marker of the runs this chart draws; a label only where it does not run into the previous one.
  const ctx = u.ctx;
  ctx.save();
  ctx.font = "11px system-ui, sans-serif";
  ctx.textAlign = "left";  // uPlot leaves the y axis' right alignment set: a label would run left over its line
  ctx.globalAlpha = 0.7;
  let free = -Infinity, drawn = 0;
  const marks = view.markers.filter((m) => m[view.axis] != null && runs.includes(m.run)).sort((a, b) => a[view.axis] - b[view.axis]);
  for (const m of marks) {
    const px = Math.round(u.valToPos(m[view.axis] - view.shift(m.run), "x", true));
    if (px < u.bbox.left || px > u.bbox.left + u.bbox.width) continue;
    ctx.strokeStyle = ctx.fillStyle = MARK_COLORS[m.kind] || "#7d8590";
    ctx.setLineDash([2, 4]);
    ctx.beginPath(); ctx.moveTo(px, u.bbox.top); ctx.lineTo(px, u.bbox.top + u.bbox.height); ctx.stroke();
    const text = view.runs.length > 1 ? `${m.label} (${m.run})` : m.label;
    const w = ctx.measureText(text).width, right = u.bbox.left + u.bbox.width;
    // Right of its line, or left of it where it would run off the plot; only where the previous one ended.
    const at = px + 3 + w <= right ? px + 3 : Math.max(u.bbox.left, px - 3 - w);
    if (at >= free) {
      ctx.fillText(text, at, u.bbox.top + 12);
      free = at + w + 12;
    }
    drawn++;
  }
  ctx.restore();
  u.root.closest(".chart").dataset.marks = String(drawn);
}

class ChartsView {
  constructor(runs) {
    this.runs = runs; this.axis = $("axis").value; this.charts = []; this.markers = []; this.starts = {}; this.removed = new Set();
    this.sinceStart = this.axis === "ts" && runs.length > 1;  // runs overlaid on wall time: from each one's start
    this.sockets = new Map(); this.dirty = new Set(); this.timer = null; this.closed = false; this.listed = 0; this.relist = false;
  }

  async open() {
    $("charts").innerHTML = "";
    delete $("charts").dataset.ready;
    // Where each run stands first: what is stored after it and before the charts' first read comes again
    // over the watch, and a chart only takes the points past those it has.
    const infos = [];
    for (const run of this.runs) infos.push(await api(`/runs/${encodeURIComponent(run)}`));
    infos.forEach((info, i) => { this.starts[this.runs[i]] = info.started_at ?? info.created_at; });
    await this.addDefaults();
    await this.loadMarkers(null);
    if (this.closed) return;  // the page moved on (another run, another x axis) while this one loaded
    this.charts.forEach((c) => c.render());
    $("charts").dataset.ready = "1";
    infos.forEach((info, i) => { if (info.status === "live" || info.status === "degraded") this.watch(this.runs[i], info); });
    if (this.sockets.size) this.timer = setInterval(() => this.refresh(), LIVE_EVERY_MS);
  }

  shift(run) { return this.sinceStart ? this.starts[run] || 0 : 0; }

  async addDefaults() {
    // A chart of each of a loop's own metrics (run.log) first, then the default charts any run has series
    // for; a live run gains some as it goes: asked again.
    this.listed = Date.now();
    const listing = [];
    for (const run of this.runs) listing.push(...await api(`/runs/${encodeURIComponent(run)}/series`));
    const names = [...new Set(listing.map((s) => s.name))].sort();
    const defs = await definitions();
    const own = [...new Set(listing.filter((s) => s.kind === "metrics" && !defs.hidden_metrics.some((h) => s.name.startsWith(h)))
      .map((s) => s.name))].sort();
    const room = Math.max(defs.own_charts - this.charts.filter((c) => c.own).length, 0);
    const fresh = (n) => !this.removed.has(n) && !this.charts.some((c) => c.names.includes(n));
    for (const name of own.filter(fresh).slice(0, room)) {
      await this.add(name, [name], true);
    }
    const options = [...own, ...names.filter((n) => !own.includes(n))]  // the picker: a loop's own first too
      .map((n) => `<option>${escapeHtml(n)}</option>`).join("");
    if ($("picker").innerHTML !== options) { const was = $("picker").value; $("picker").innerHTML = options; $("picker").value = was || own[0] || names[0] || ""; }
    for (const {title, names: wanted} of defs.charts) {
      if (this.removed.has(title) || this.charts.some((c) => c.title === title)) continue;
      const found = names.filter((n) => wanted.some((w) => nameMatches(w, n)));
      if (found.length) await this.add(title, found);
    }
  }

  async add(title, names, own = false) {
    if (this.closed) return;
    const chart = new Chart(this, title, names);
    chart.own = own;
    const after = this.charts.filter((c) => c.own).pop();  // a loop's own metrics stay first, in order
    this.charts.push(chart);
    if (own) $("charts").insertBefore(chart.el, after ? after.el.nextSibling : $("charts").firstChild);
    else $("charts").appendChild(chart.el);
    for (const run of this.runs) await chart.load(run, null);
    chart.render();
  }

  remove(chart) {  // for good: a live run's next listing does not bring it back
    this.removed.add(chart.title);
    this.charts = this.charts.filter((c) => c !== chart);
    chart.el.remove();
  }

  async loadMarkers(after) {
    for (const run of this.runs) await this.loadMarkersFor(run, after);
  }

  watch(run, info) {
    // Live: the watch stream says new events are stored; each chart then asks for the run's points after
    // the last x it has (never the history again), at most once a second.
    const seqs = Object.entries(info.last_seq || {}).filter(([r]) => Number(r) >= 0).map(([, s]) => s);
    const params = new URLSearchParams({run_id: run, after_seq: String(seqs.length ? Math.min(...seqs) : 0)});
    const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/watch?${params}`;
    const protocols = token() ? ["nissa", "nissa.bearer." + btoa(token()).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")] : [];
    const ws = new WebSocket(url, protocols);
    this.sockets.set(run, ws);
    ws.onopen = () => { $("live").hidden = false; };
    ws.onmessage = () => { this.dirty.add(run); };
    ws.onclose = () => {
      this.sockets.delete(run);
      $("live").hidden = this.sockets.size === 0;
      if (!this.closed) setTimeout(() => this.closed || this.watch(run, info), 3000);
    };
  }

  async refresh() {
    try {
      if (this.dirty.size) this.relist = true;
      if (this.relist && Date.now() - this.listed > LIST_EVERY_MS) { this.relist = false; await this.addDefaults(); }
      const runs = [...this.dirty];
      this.dirty.clear();
      for (const run of runs) {
        for (const chart of this.charts) { await chart.load(run, chart.lastX(run)); chart.render(); }
        const own = this.markers.filter((m) => m.run === run && m[this.axis] != null);
        await this.loadMarkersFor(run, own.length ? Math.max(...own.map((m) => m[this.axis])) : null);
      }
      showError(null);
    } catch (err) { showError(err); }
  }

  async loadMarkersFor(run, after) {
    const params = new URLSearchParams({x: this.axis});
    if (after != null) params.set("after", String(after));
    const marks = await api(`/runs/${encodeURIComponent(run)}/markers?` + params);
    if (marks.length) { this.markers.push(...marks.map((m) => ({...m, run}))); this.charts.forEach((c) => c.plot && c.plot.redraw()); }
  }

  close() {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.sockets.forEach((ws) => ws.close());
    this.charts.forEach((c) => c.plot && c.plot.destroy());
  }
}

// --- routing: #run=A&overlay=B,C, #diff=A,B,C, #group=LABEL&runs=A,B, or the runs table ---------------

async function route() {
  showError(null);
  if (state.view) { state.view.close(); state.view = null; }
  const hash = new URLSearchParams(location.hash.slice(1));
  const run = hash.get("run"), diff = hash.get("diff"), group = hash.get("group");
  const view = run ? "charts-view" : diff ? "diff-view" : group != null ? "group-view" : "runs-view";
  for (const id of ["runs-view", "charts-view", "diff-view", "group-view"]) $(id).hidden = id !== view;
  try {
    if (diff) { $("where").textContent = "config diff"; await showDiff(diff.split(",").filter(Boolean)); return; }
    if (group != null) {
      $("where").textContent = "group " + group;
      await showGroup(group, (hash.get("runs") || "").split(",").filter(Boolean), (hash.get("metrics") || "").split(",").filter(Boolean));
      return;
    }
    if (!run) { $("where").textContent = "runs"; await loadRuns(); return; }
    const runs = [run, ...(hash.get("overlay") || "").split(",").filter((r) => r && r !== run)];
    $("where").textContent = runs.join(" vs ");
    $("legend-runs").innerHTML = (runs.length > 1 ? runs.map((r, i) =>
      `<span style="color:${PALETTE[(i * 3) % PALETTE.length]}">${i ? "- - " : "—— "}${escapeHtml(r)}</span>`).join(" ") : "") +
      " &nbsp; marks: " + Object.entries(MARK_COLORS).map(([k, c]) => `<span style="color:${c}">┆${k}</span>`).join(" ");
    state.view = new ChartsView(runs);
    await state.view.open();
  } catch (err) { showError(err); }
}

function main() {
  $("auth").addEventListener("submit", (e) => { e.preventDefault(); sessionStorage.setItem("nissa-token", $("token").value); route(); });
  setupRuns();
  $("axis").addEventListener("change", () => route());
  $("add-chart").addEventListener("click", () => {
    const name = $("picker").value;
    if (name && state.view) state.view.add(name, [name]).catch(showError);
  });
  window.addEventListener("hashchange", route);
  route();
}

main();
