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
// The default charts none of the runs can have by its config (a heuristic run has no PPO update), and why, a
// line each: leyline.charts.hidden_charts, by the rules the definition serves ("unavailable").
function ruledOut(defs, configs) {
  const titles = new Set(), whys = [];
  for (const rule of defs.unavailable) {
    if (!configs.length || !configs.every((c) => c[rule.key] === rule.value)) continue;
    const out = defs.charts.filter((c) => c.names.every((p) => p.startsWith(rule.prefix))).map((c) => c.title);
    if (out.length) { out.forEach((t) => titles.add(t)); whys.push(rule.why); }
  }
  return {titles, whys};
}
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
  if (!res.ok) throw Object.assign(new Error(`${path.split("?")[0]}: ${res.status} ${(await res.json().catch(() => ({}))).detail || ""}`), {status: res.status});
  return res;
}

async function api(path, init) { return (await request(path, init)).json(); }

// Where the rest of a reply that holds a page starts (its Link: <…>; rel="next"), or null.
function nextPage(res) {
  const found = /<([^>]*)>;\s*rel="next"/.exec(res.headers.get("Link") || "");
  return found ? found[1] : null;
}

function showError(err) { $("error").textContent = err ? String(err.message || err) : ""; }

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}

// --- a run's page: its charts (chart.js), one x range, one smoothing, one cursor; its state in its URL ---

function savedSmoothing() {
  const v = Number(localStorage.getItem("nissa-smoothing"));
  return Number.isFinite(v) && v >= 0 && v < 1 ? v : 0;
}

class ChartsView {
  constructor(runs, {axis = "step", smoothing = 0, hide = [], add = []} = {}) {
    this.runs = runs; this.axis = axis; this.smoothing = smoothing; this.extra = add;
    this.charts = []; this.markers = []; this.starts = {}; this.removed = new Set(hide); this.labels = {};
    this.sinceStart = this.axis === "ts" && runs.length > 1;  // runs overlaid on wall time: from each one's start
    this.sockets = new Map(); this.dirty = new Set(); this.timer = null; this.closed = false; this.listed = 0; this.relist = false;
    this.zoomed = null;
  }

  async open() {
    $("charts").replaceChildren(el("p", {className: "placeholder", id: "charts-loading"}, "loading…"));
    $("charts-note").hidden = true;
    delete $("charts").dataset.ready;
    // Where each run stands first: what is stored after it and before the charts' first read comes again
    // over the watch, and a chart only takes the points past those it has.
    const infos = [];
    for (const run of this.runs) infos.push(await api(`/runs/${encodeURIComponent(run)}`));
    infos.forEach((info, i) => { this.starts[this.runs[i]] = info.started_at ?? info.created_at; });
    this.configs = infos.map((info) => info.config || {});
    this.labels = shortLabels(infos.map((info, i) => ({run_id: this.runs[i], name: info.name})));
    this.showRuns();
    await this.addDefaults();
    await this.loadMarkers(null);
    if (this.closed) return;  // the page moved on (another run, another x axis) while this one loaded
    this.redraw();
    const loading = $("charts-loading");
    if (loading) {  // gone once there are charts: an empty placeholder would take the grid's first cell
      loading.textContent = this.charts.length ? "" : "no series in this run yet";
      loading.hidden = this.charts.length > 0;
    }
    $("charts").dataset.ready = "1";
    infos.forEach((info, i) => { if (info.status === "live" || info.status === "degraded") this.watch(this.runs[i], info); });
    if (this.sockets.size) this.timer = setInterval(() => this.refresh(), LIVE_EVERY_MS);
  }

  runLabel(run) { return this.labels[run] || run; }

  showRuns() {  // the runs of the page, each in its colour (text only), and the marks' colours
    const parts = this.runs.length > 1 ? this.runs.map((r, i) => {
      const span = el("span", {className: "run"}, "━ " + this.runLabel(r));
      span.style.color = PALETTE[i % PALETTE.length]; span.dataset.run = r; span.title = r;
      return span;
    }) : [];
    // Only the kinds of mark the page's runs have (a plain loop has no seeds to fossilize or prune).
    const kinds = new Set(this.markers.map((m) => m.kind));
    const marks = Object.entries(MARK_COLORS).filter(([k]) => kinds.has(k))
      .map(([k, c]) => { const s = el("span", {}, "┆" + k); s.style.color = c; return s; });
    $("legend-runs").replaceChildren(...parts, ...(marks.length ? [" marks: ", ...marks] : []));
  }

  shift(run) { return this.sinceStart ? this.starts[run] || 0 : 0; }

  xRange() {  // one x range for every chart of the page: the zoomed one, or all their points'
    if (this.zoomed) return this.zoomed;
    const extents = this.charts.map((c) => c.xExtent?.()).filter(Boolean);
    return extents.length ? [Math.min(...extents.map((e) => e[0])), Math.max(...extents.map((e) => e[1]))] : null;
  }

  zoom(range) { this.zoomed = range; this.charts.forEach((c) => c.applyRange?.()); writeUrl(); }

  redraw() { this.charts.forEach((c) => c.render()); this.charts.forEach((c) => c.applyRange?.()); }

  setSmoothing(weight) { this.smoothing = weight; this.redraw(); writeUrl(); }

  async addDefaults() {
    // A chart of each of a loop's own metrics (run.log) first, then the default charts any run has series
    // for (the server's one definition), then those added by hand; a live run gains some as it goes:
    // asked again. What was removed stays so (the URL says which: hide=, and add= what was added).
    this.listed = Date.now();
    const listing = [];
    for (const run of this.runs) listing.push(...await api(`/runs/${encodeURIComponent(run)}/series`));
    const defs = await definitions(), ruled = ruledOut(defs, this.configs || []);
    $("charts-note").textContent = ruled.whys.join("; ");
    $("charts-note").hidden = !ruled.whys.length;
    const names = [...new Set(listing.map((s) => s.name))].sort();
    const own = [...new Set(listing.filter((s) => s.kind === "metrics" && !defs.hidden_metrics.some((h) => s.name.startsWith(h)))
      .map((s) => s.name))].sort();
    const charted = defs.charts.flatMap((c) => names.filter((n) => c.names.some((w) => nameMatches(w, n))));
    this.fillPicker([...own, ...charted.filter((n) => !own.includes(n)), ...names.filter((n) => !own.includes(n) && !charted.includes(n))]);
    const fresh = (n) => !this.removed.has(n) && !this.charts.some((c) => c.names.includes(n));
    const room = Math.max(defs.own_charts - this.charts.filter((c) => c.own).length, 0);
    for (const name of own.filter(fresh).slice(0, room)) await this.add(name, [name], true);
    for (const {title, names: wanted} of defs.charts) {
      if (this.removed.has(title) || ruled.titles.has(title) || this.charts.some((c) => c.title === title)) continue;
      const found = names.filter((n) => wanted.some((w) => nameMatches(w, n)));
      if (found.length) await this.add(title, found);
    }
    for (const name of this.extra) if (!this.charts.some((c) => c.title === name)) await this.add(name, [name]);
    await addDistributions(this, listing);  // distributions.js
  }

  fillPicker(names) {  // a loop's own metrics first, then what the default charts draw, then the rest
    const picker = $("picker");
    if (picker.dataset.names === names.join("\n")) return;
    const was = picker.value;
    picker.replaceChildren(...names.map((n) => el("option", {value: n}, n)));
    picker.dataset.names = names.join("\n");
    picker.value = was && names.includes(was) ? was : names[0] || "";
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
    chart.loaded = true;
    chart.render();
    this.charts.forEach((c) => c.applyRange?.());
  }

  addByHand(name) {  // from the picker (its URL says so: add=)
    this.removed.delete(name);
    if (!this.extra.includes(name)) this.extra.push(name);
    if (!this.charts.some((c) => c.title === name)) this.add(name, [name]).catch(showError);
    writeUrl();
  }

  drop(chart) {  // off the page (another page of distributions), not for good
    this.charts = this.charts.filter((c) => c !== chart);
    if (chart.full) chart.setFull(false);
    if (chart.plot) chart.plot.destroy();
    chart.el.remove();
  }

  remove(chart) {  // for good: a live run's next listing does not bring it back
    this.removed.add(chart.title);
    this.drop(chart);
    this.extra = this.extra.filter((n) => n !== chart.title);
    writeUrl();
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
      if (runs.length) this.charts.forEach((c) => c.applyRange?.());
      showError(null);
    } catch (err) { showError(err); }
  }

  async loadMarkersFor(run, after) {
    const params = new URLSearchParams({x: this.axis});
    if (after != null) params.set("after", String(after));
    const marks = await api(`/runs/${encodeURIComponent(run)}/markers?` + params);
    if (marks.length) {
      this.markers.push(...marks.map((m) => ({...m, run})));
      this.charts.forEach((c) => c.plot && c.plot.redraw());
      this.showRuns();
    }
  }

  close() {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.sockets.forEach((ws) => ws.close());
    this.charts.forEach((c) => { if (c.full) c.setFull(false); if (c.plot) c.plot.destroy(); });
  }
}

// The page's state in its URL (#run=A&overlay=B,C&x=epoch&smooth=0.6&hide=lr&add=grad_norm&dfilter=fc&doffset=12): a link opens
// the same view. Written in place (no new history entry, no reload).
function writeUrl() {
  const view = state.view;
  if (!view) return;
  const hash = new URLSearchParams({run: view.runs[0]});
  if (view.runs.length > 1) hash.set("overlay", view.runs.slice(1).join(","));
  if (view.axis !== "step") hash.set("x", view.axis);
  if (view.smoothing > 0) hash.set("smooth", String(view.smoothing));
  if (view.removed.size) hash.set("hide", [...view.removed].join(","));
  if (view.extra.length) hash.set("add", view.extra.join(","));
  if (view.zoomed) hash.set("zoom", view.zoomed.map((v) => Number(v.toPrecision(8))).join(","));
  if (view.distQuery) hash.set("dfilter", view.distQuery);  // distributions.js: the filter and page
  if (view.distOffset) hash.set("doffset", String(view.distOffset));
  history.replaceState(null, "", "#" + hash.toString());
}

// --- routing: #run=A&overlay=B,C, #diff=A,B,C, #group=LABEL&runs=A,B, #sweeps, #sweep=ID, or the runs table ---

async function route() {
  showError(null);
  if (state.view) { state.view.close(); state.view = null; }
  if (state.sweepPage) { state.sweepPage.close(); state.sweepPage = null; }
  closeSteering();  // steer.js
  const hash = new URLSearchParams(location.hash.slice(1));
  const run = hash.get("run"), diff = hash.get("diff"), group = hash.get("group");
  const sweep = hash.get("sweep"), sweeps = hash.has("sweeps");
  const view = run ? "charts-view" : diff ? "diff-view" : group != null ? "group-view" : sweep ? "sweep-view"
    : sweeps ? "sweeps-view" : "runs-view";
  for (const id of ["runs-view", "charts-view", "diff-view", "group-view", "sweeps-view", "sweep-view"]) $(id).hidden = id !== view;
  try {
    if (sweeps) { $("where").textContent = "sweeps"; await showSweeps(); return; }  // sweeps.js
    if (sweep) { state.sweepPage = new SweepPage(sweep); await state.sweepPage.open(); return; }
    if (diff) { $("where").textContent = "config diff"; await showDiff(diff.split(",").filter(Boolean)); return; }
    if (group != null) {
      $("where").textContent = "group " + group;
      await showGroup(group, (hash.get("runs") || "").split(",").filter(Boolean), (hash.get("metrics") || "").split(",").filter(Boolean), hash);
      return;
    }
    if (!run) { $("where").textContent = "runs"; readTableUrl(hash); await loadRuns(); return; }
    const runs = [run, ...(hash.get("overlay") || "").split(",").filter((r) => r && r !== run)];
    $("where").textContent = runs.join(" vs ");
    const axis = ["step", "epoch", "round", "ts"].includes(hash.get("x")) ? hash.get("x") : "step";
    const asked = Number(hash.get("smooth"));
    const smoothing = hash.has("smooth") && asked >= 0 && asked < 1 ? asked : savedSmoothing();
    $("axis").value = axis;
    $("smoothing").value = String(smoothing);
    $("smoothing-value").textContent = smoothing.toFixed(2);
    const list = (key) => (hash.get(key) || "").split(",").filter(Boolean);
    state.view = new ChartsView(runs, {axis, smoothing, hide: list("hide"), add: list("add")});
    state.view.zoomed = zoomOfUrl(hash);  // links.js
    Object.assign(state.view, distributionsOfUrl(hash));  // links.js
    openSteering(runs, state.view);  // steer.js: a live run's commands, beside its charts
    await state.view.open();
  } catch (err) { showError(err); }
}

function main() {
  $("auth").addEventListener("submit", (e) => {
    e.preventDefault(); sessionStorage.setItem("nissa-token", $("token").value); $("auth").hidden = true; route();
  });
  setupRuns();
  setupTrouble();  // trouble.js: runs with an alert firing, marked in the table
  $("axis").addEventListener("change", () => {
    if (!state.view) return;
    state.view.axis = $("axis").value;  // the URL says it, and the page opens again on it
    state.view.zoomed = null;  // a range of the other axis
    writeUrl();
    route();
  });
  $("smoothing").addEventListener("input", () => {
    const weight = Number($("smoothing").value);
    $("smoothing-value").textContent = weight.toFixed(2);
    localStorage.setItem("nissa-smoothing", String(weight));
    if (state.view) state.view.setSmoothing(weight);
  });
  $("add-chart").addEventListener("click", () => {
    const name = $("picker").value;
    if (name && state.view) state.view.addByHand(name);
  });
  window.addEventListener("hashchange", route);
  route();
}

main();
