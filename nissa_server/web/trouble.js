// Runs in trouble flagged in the runs table: a run with an alert firing (GET /alerts?status=firing: the server's
// rules, the built-in "run in trouble" and "hung" among them) gets a mark naming the rule, its message on hover.
// The table is runs.js's; this only marks its rows (tr[data-run-id]) as they are drawn.
"use strict";

const TROUBLE_EVERY_MS = 3000;
const firingByRun = new Map();

function flagTrouble() {
  for (const tr of $("runs").tBodies[0].rows) {
    const alerts = firingByRun.get(tr.dataset.runId) || [];
    tr.classList.toggle("trouble", alerts.length > 0);
    const cell = tr.cells[1];
    let mark = cell && cell.querySelector("span.trouble");
    if (!alerts.length) { if (mark) mark.remove(); continue; }
    if (!cell) continue;
    if (!mark) { mark = el("span", {className: "trouble"}); cell.prepend(mark); }
    mark.textContent = "⚠ " + [...new Set(alerts.map((a) => a.rule))].join(", ") + " ";
    mark.title = alerts.map((a) => a.message).join("\n");
  }
}

async function loadTrouble() {
  const firing = await api("/alerts?status=firing&limit=1000");
  firingByRun.clear();
  for (const a of firing) firingByRun.set(a.run_id, [...(firingByRun.get(a.run_id) || []), a]);
  flagTrouble();
  $("runs").dataset.trouble = String(firing.length);
}

function setupTrouble() {
  new MutationObserver(flagTrouble).observe($("runs").tBodies[0], {childList: true});
  const tick = () => { if (!$("runs-view").hidden && document.visibilityState === "visible") loadTrouble().catch(showError); };
  setInterval(tick, TROUBLE_EVERY_MS);
  tick();
}
