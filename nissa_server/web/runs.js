// The runs table: a page of runs from the server in its order and filter (sort=, q=: never every run), with
// the metrics they share (best or last), the config values that tell them apart, project, group and tags;
// or rows of groups (GET /run-groups: count, mean ± SD of each metric) that open into their runs. What a
// run wrote is always text (textContent or escapeHtml), never markup. Which metrics and config keys a page shows
// by default, and what each series is called in the filter language (a metric column is a series by that name:
// val_loss, rank 0's in a run of several ranks too), the server says with the page (GET /runs-table:
// leyline.runs_table, the console's rule too); a group's runs are its row's filter away.
"use strict";

const PAGE = 100;
const REFRESH_MS = 3000;  // the table asks again (a run's status, its summaries as the server's pass writes them)
const GROUP_PAGE = 50;
const table = {offset: 0, total: 0, q: "", sort: "", field: "best", metrics: null, groupBy: "", opened: new Set(),
               runs: [], groups: null, members: {}, params: [], seq: 0, pageMetrics: [], knownMetrics: []};

function fmtTime(t) {
  // A ts is what the run sent: one past what a Date holds (8.64e12 s) shows "?" instead of stopping the table.
  const d = !t ? null : new Date(typeof t === "string" ? t : t * 1000);
  return d === null ? "" : Number.isNaN(d.getTime()) ? "?" : d.toISOString().replace("T", " ").slice(0, 19);
}
function fmtDur(s) {
  if (s == null) return "";
  const h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60, sec = Math.floor(s % 60);
  return h ? `${h}h${String(m).padStart(2, "0")}m` : m ? `${m}m${String(sec).padStart(2, "0")}s` : `${sec}s`;
}
function fmtNum(v) { return v == null ? "" : typeof v === "number" ? (Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4)))) : String(v); }
function fmtStats(s) { return !s || s.mean == null ? "" : s.sd == null ? fmtNum(s.mean) : `${fmtNum(s.mean)} ± ${s.sd.toPrecision(2)}`; }
function valueId(v) { return JSON.stringify(v); }

function differingParams(runs, limit = chartDefs.param_columns) {
  // leyline.charts.differing_params, by the rule the server serves (GET /ui/charts.json: which keys never tell
  // runs apart, how many at most): config values set differently in the runs that have them first, then those
  // some runs lack.
  const keys = [...new Set(runs.flatMap((r) => Object.keys(r.config || {})))]
    .filter((k) => !chartDefs.hidden_params.some((h) => k.endsWith(h))).sort();
  const has = (k) => runs.filter((r) => k in (r.config || {}));
  const valued = keys.filter((k) => new Set(has(k).map((r) => JSON.stringify(r.config[k]))).size > 1);
  const absent = keys.filter((k) => !valued.includes(k) && has(k).length < runs.length);
  const out = runs.length < 2 ? [] : [...valued, ...absent];
  return limit == null ? out : out.slice(0, limit);
}

function shownMetrics() { return table.metrics || table.pageMetrics; }

async function runsPage(q, limit, offset) {
  // {runs, total, columns: {metrics, params, names}}: a page of runs and what a table shows of it (the metric
  // columns picked, by name, or the default ones). Each run gets `named`: its summaries by the column that shows
  // them, as the server names its series (val_loss{rank=0} of a run of several ranks is val_loss).
  const params = new URLSearchParams({limit: String(limit), offset: String(offset)});
  if (q) params.set("q", q);
  if (table.sort) params.set("sort", table.sort);
  if (table.metrics) params.set("columns", table.metrics.join(","));
  const page = await api("/runs-table?" + params), names = page.columns.names;
  for (const r of page.runs) r.named = Object.fromEntries(Object.entries(r.metrics || {}).map(([k, s]) => [names[k] ?? k, s]));
  return page;
}

function query() { return [$("filter").value.trim(), $("status-filter").value ? "status:" + $("status-filter").value : ""].filter(Boolean).join(" "); }

async function loadRuns() {
  await definitions();  // app.js: the one definition (hidden metrics, the differing-config rule)
  const seq = ++table.seq, q = query();
  table.q = q;
  if (!table.groupBy) {
    const page = await runsPage(q, PAGE, table.offset);
    if (seq !== table.seq) return;
    const {metrics, params, names} = page.columns;
    Object.assign(table, {runs: page.runs, total: page.total, groups: null, members: {}, params,
                          knownMetrics: [...new Set(Object.values(names))].sort()});
    pickedColumns(metrics);
  } else {
    const metrics = shownMetrics().map((k) => `${k}.${table.field}`);
    const params = new URLSearchParams({by: table.groupBy, metrics: metrics.join(",")});
    if (q) params.set("q", q);
    const groups = await api("/run-groups?" + params), members = {};
    let named = null;
    for (const g of groups.groups) {
      if (!table.opened.has(valueId(g.value)) || !g.filter) continue;
      const page = await runsPage([q, g.filter].filter(Boolean).join(" "), GROUP_PAGE, 0);
      members[valueId(g.value)] = page.runs;
      named = page.columns.metrics;
    }
    if (seq !== table.seq) return;
    if (named) pickedColumns(named);
    Object.assign(table, {groups, members, total: groups.runs, runs: Object.values(members).flat()});
  }
  showError(null);
  renderRuns();
}

function pickedColumns(metrics) {
  // The server's metric columns: those picked, by name (a link's val_loss{rank=0} is val_loss), or the default ones.
  if (table.metrics) table.metrics = metrics;
  else table.pageMetrics = metrics;
}

function runColumns() {
  // {title, key: what the server sorts by ("" where it cannot), cell(run): text, num, group(row): text}:
  // who a run is, what it achieved, the config values that tell the runs apart, where it belongs, when it ran.
  const f = table.field;
  return [
    {title: "name", key: "name", cell: (r) => r.name || r.run_id, group: (g) => g.value == null ? "(none)" : String(g.value)},
    {title: "status", key: "status", cell: (r) => r.status, group: (g) => `${g.count} run${g.count === 1 ? "" : "s"}`},
    ...shownMetrics().map((k) => ({title: `${k}.${f}`, key: `${k}.${f}`, num: true,
                                   cell: (r) => fmtNum(((r.named || {})[k] || {})[f]),
                                   group: (g) => fmtStats(g.metrics[`${k}.${f}`])})),
    ...table.params.map((k) => ({title: k, key: "config." + k, cell: (r) => fmtNum((r.config || {})[k])})),
    {title: "project", key: "project", cell: (r) => r.project || ""},
    {title: "group", key: "group", cell: (r) => r.group || ""},
    {title: "tags", key: "tag", cell: (r) => (r.tags || []).join(" ")},
    {title: "started", key: "started", cell: (r) => fmtTime(r.started_at || r.created_at)},
    {title: "duration", key: "", cell: (r) => fmtDur(r.duration_s), num: true},
  ];
}

function renderRuns() {
  const cols = runColumns();
  const arrow = (c) => !c.key ? "" : table.sort === c.key ? " ▲" : table.sort === "-" + c.key ? " ▼" : "";
  $("runs").tHead.innerHTML = "<tr><th></th>" + cols.map((c, i) => `<th data-col="${i}" data-key="${escapeHtml(c.key)}">` +
    `${escapeHtml(c.title)}${arrow(c)}</th>`).join("") + "</tr>";
  $("runs").tHead.querySelectorAll("th[data-col]").forEach((th) => th.addEventListener("click", () => {
    const key = th.dataset.key;
    if (!key) return;  // the server does not sort by it
    table.sort = table.sort === key ? "-" + key : key;
    table.offset = 0;
    loadRuns().catch(showError);
  }));
  const body = $("runs").tBodies[0];
  body.innerHTML = "";
  if (table.groups) {
    for (const g of sortedGroups(table.groups.groups)) {
      body.appendChild(groupRow(g, cols));
      for (const r of table.members[valueId(g.value)] || []) body.appendChild(runRow(r, cols, true));
    }
  } else table.runs.forEach((r) => body.appendChild(runRow(r, cols, false)));
  const first = table.runs.length ? table.offset + 1 : 0;
  $("page").textContent = table.groups ? `${table.groups.groups.length} groups of ${table.total} runs`
    : `${first}–${table.offset + table.runs.length} of ${table.total}`;
  $("prev").disabled = !!table.groups || table.offset === 0;
  $("next").disabled = !!table.groups || table.offset + PAGE >= table.total;
  if (!$("metric-picker").open) $("metric-columns").innerHTML = table.knownMetrics.map((k) =>
    `<label><input type="checkbox" value="${escapeHtml(k)}"${shownMetrics().includes(k) ? " checked" : ""}> ${escapeHtml(k)}</label>`).join("");
  const groupOptions = ["", "group", "project", ...table.params.map((k) => "config." + k)];
  if (table.groupBy && !groupOptions.includes(table.groupBy)) groupOptions.push(table.groupBy);
  $("group-by").innerHTML = groupOptions.map((k) => `<option value="${escapeHtml(k)}">${k ? "group by " + escapeHtml(k) : "no grouping"}</option>`).join("");
  $("group-by").value = table.groupBy;
  updateButtons();
  if (state.showParcoords) drawParcoords();
  $("runs").dataset.ready = String(table.seq);
}

function sortedGroups(groups) {
  // Groups are few: sorted here, by a metric's mean when the table is sorted by that metric.
  const key = table.sort.replace(/^-/, ""), dir = table.sort.startsWith("-") ? -1 : 1;
  if (!groups.length || !(key in groups[0].metrics)) return groups;
  const mean = (g) => g.metrics[key].mean;
  return [...groups].sort((a, b) => (mean(a) == null) - (mean(b) == null) || dir * (mean(a) - mean(b)));
}

function runRow(r, cols, member) {
  const tr = document.createElement("tr");
  tr.dataset.runId = r.run_id;
  if (member) tr.className = "member";
  tr.innerHTML = `<td><input type="checkbox"></td>` + cols.map((c, i) => i === 0
    ? `<td><a href="#run=${encodeURIComponent(r.run_id)}">${escapeHtml(c.cell(r))}</a> <button class="edit" title="edit group, tags, notes">✎</button></td>`
    : `<td class="${c.num ? "num" : ""}${c.key === "status" ? " status-" + escapeHtml(r.status) : ""}">${escapeHtml(c.cell(r))}</td>`).join("");
  if (r.notes) tr.title = r.notes;
  const box = tr.querySelector("input");
  box.checked = state.selected.has(r.run_id);
  box.addEventListener("change", () => {
    box.checked ? state.selected.add(r.run_id) : state.selected.delete(r.run_id);
    updateButtons();
    if (state.showParcoords) drawParcoords();
  });
  tr.querySelector("button.edit").addEventListener("click", () => openEditor(r));
  return tr;
}

function groupRow(g, cols) {
  const tr = document.createElement("tr"), vid = valueId(g.value), open = table.opened.has(vid);
  tr.className = "group";
  tr.dataset.group = vid;
  tr.innerHTML = `<td><button class="toggle" title="its runs">${open ? "▾" : "▸"}</button></td>` + cols.map((c, i) =>
    `<td class="${c.num ? "num" : ""}">${c.group ? escapeHtml(c.group(g)) : ""}${i === 0 ? ' <a class="bands" href="#">chart</a>' : ""}</td>`).join("");
  tr.querySelector("button.toggle").addEventListener("click", () => {
    open ? table.opened.delete(vid) : table.opened.add(vid);
    loadRuns().catch(showError);
  });
  tr.querySelector("a.bands").addEventListener("click", (e) => {
    e.preventDefault();
    location.hash = new URLSearchParams({group: `${table.groupBy}=${g.value == null ? "(none)" : g.value}`,
                                         runs: g.run_ids.join(","), metrics: [...new Set(shownMetrics().map((k) => k.replace(/\{.*\}$/, "")))].join(",")}).toString();
  });
  return tr;
}

function updateButtons() {
  $("overlay").disabled = state.selected.size < 2;
  $("diff").disabled = state.selected.size < 2;
  writeTableUrl();  // links.js: the table's view in the URL
}

function openEditor(r) {
  const dialog = $("editor");
  dialog.dataset.runId = r.run_id;
  $("editor-title").textContent = "edit " + (r.name || r.run_id);
  $("edit-group").value = r.group || "";
  $("edit-tags").value = (r.tags || []).join(" ");
  $("edit-notes").value = r.notes || "";
  $("editor-error").textContent = "";
  dialog.showModal();
}

async function saveEditor() {
  const runId = $("editor").dataset.runId;
  const body = {group: $("edit-group").value.trim(), notes: $("edit-notes").value,
                tags: [...new Set($("edit-tags").value.split(/[\s,]+/).filter(Boolean))]};
  try {
    await api(`/runs/${encodeURIComponent(runId)}`, {method: "PATCH", body: JSON.stringify(body)});
    $("editor").close();
    await loadRuns();
  } catch (err) {
    $("editor-error").textContent = String(err.message || err);
    if (err.status === 401) { $("editor").close(); showError(err); }  // the token form is behind the dialog
  }
}

function setupRuns() {
  state.table = table;  // for tests and the curious
  let timer = null;
  setInterval(() => {  // only the table in view, not while a run is being edited or the tab is hidden
    if (!$("runs-view").hidden && !$("editor").open && document.visibilityState === "visible") loadRuns().catch(showError);
  }, REFRESH_MS);
  const reload = () => { table.offset = 0; table.opened.clear(); loadRuns().catch(showError); };
  $("filter").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(reload, 400); });
  $("filter").addEventListener("keydown", (e) => { if (e.key === "Enter") { clearTimeout(timer); reload(); } });
  $("status-filter").addEventListener("change", reload);
  $("group-by").addEventListener("change", () => { table.groupBy = $("group-by").value; reload(); });
  $("field").addEventListener("change", () => {
    table.field = $("field").value;
    table.sort = table.sort.replace(/\.(best|last)$/, "." + table.field);
    loadRuns().catch(showError);
  });
  $("metric-columns").addEventListener("change", () => {
    const picked = [...$("metric-columns").querySelectorAll("input:checked")].map((i) => i.value);
    table.metrics = picked.length ? picked : null;
    loadRuns().catch(showError);
  });
  $("prev").addEventListener("click", () => { table.offset = Math.max(0, table.offset - PAGE); loadRuns().catch(showError); });
  $("next").addEventListener("click", () => { table.offset += PAGE; loadRuns().catch(showError); });
  $("overlay").addEventListener("click", () => {
    const [first, ...rest] = [...state.selected];
    location.hash = `run=${encodeURIComponent(first)}&overlay=${rest.map(encodeURIComponent).join(",")}`;
  });
  $("diff").addEventListener("click", () => { location.hash = "diff=" + [...state.selected].map(encodeURIComponent).join(","); });
  $("show-parcoords").addEventListener("click", () => { state.showParcoords = !state.showParcoords; drawParcoords(); });
  $("parcoords-metric").addEventListener("change", () => { state.parcoordsMetric = $("parcoords-metric").value; drawParcoords(); });
  $("editor-form").addEventListener("submit", (e) => { e.preventDefault(); saveEditor(); });
  $("editor-cancel").addEventListener("click", () => $("editor").close());
}
