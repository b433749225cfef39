// Every view is a link. The runs table's filter, status, order, grouping, metric columns, field, page,
// selection and parallel coordinates live in the URL's hash (#q=…&sort=-val_loss.best&by=config.lr&col=…&sel=…),
// written in place (no history entry) as the table changes and read back when a link opens the table. A run's
// page writes its own (app.js writeUrl: runs, x axis, smoothing, charts, zoom, the distributions' filter and page).
"use strict";

function writeTableUrl() {
  if ($("runs-view").hidden) return;
  const hash = new URLSearchParams(), q = $("filter").value.trim();
  if (q) hash.set("q", q);
  if ($("status-filter").value) hash.set("status", $("status-filter").value);
  if (table.sort) hash.set("sort", table.sort);
  if (table.groupBy) hash.set("by", table.groupBy);
  if (table.field !== "best") hash.set("field", table.field);
  for (const key of table.metrics || []) hash.append("col", key);
  for (const run of state.selected) hash.append("sel", run);
  if (table.offset) hash.set("offset", String(table.offset));
  if (state.showParcoords) hash.set("parcoords", $("parcoords-metric").value || "");
  const text = hash.toString();
  if (text !== location.hash.slice(1)) history.replaceState(null, "", text ? "#" + text : location.pathname + location.search);
}

function readTableUrl(hash) {
  // What a link says of the table; anything it leaves out as a fresh table has it.
  $("filter").value = hash.get("q") || "";
  const status = hash.get("status") || "";
  $("status-filter").value = [...$("status-filter").options].some((o) => o.value === status) ? status : "";
  table.sort = hash.get("sort") || "";
  table.groupBy = hash.get("by") || "";
  table.field = hash.get("field") === "last" ? "last" : "best";
  $("field").value = table.field;
  const cols = hash.getAll("col");
  table.metrics = cols.length ? cols : null;
  state.selected = new Set(hash.getAll("sel"));
  const offset = Number(hash.get("offset"));
  table.offset = Number.isInteger(offset) && offset > 0 ? offset : 0;
  table.opened = new Set();
  state.showParcoords = hash.has("parcoords");
  state.parcoordsMetric = hash.get("parcoords") || null;
}

function distributionsOfUrl(hash) {  // a run page's distributions: their filter (dfilter=) and page (doffset=)
  const offset = Number(hash.get("doffset"));
  return {distQuery: (hash.get("dfilter") || "").trim(), distOffset: Number.isInteger(offset) && offset > 0 ? offset : 0};
}

function zoomOfUrl(hash) {  // a run page's x range (zoom=lo,hi), or null
  const parts = (hash.get("zoom") || "").split(",").map(Number);
  return parts.length === 2 && parts.every(Number.isFinite) && parts[0] < parts[1] ? parts : null;
}
