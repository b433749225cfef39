// A run's commands followed live on its page: each one's way (queued → delivered → applied at step N →
// completed with its result, or failed / rejected / expired with its reason), every command of the run (those the
// anomaly detector opened itself, those from the console or curl), each one's mark on the charts linked to its
// entry, and what it brought back (results.js). Run-written text is only ever textContent.
"use strict";

const COMMANDS_EVERY_MS = 1000;
const TERMINAL = new Set(["completed", "failed", "rejected", "expired"]);

// Who asked for a command: the server's ids are hex; a run's own carry a prefix (leyline.commands).
function commandSource(id) {
  if (id.startsWith("auto-")) return "anomaly detector";
  if (id.startsWith("local-")) return "the run itself";
  return "sent";
}

// A command in a few words: its action and what its request asked for (a record's `request`: null only for a
// run's own command an earlier version recorded without it).
function commandWords(c) {
  const r = c.request || {};
  if (c.action === "call") return `${r.name}(${Object.entries(r.args || {}).map(([k, v]) => `${k}=${v}`).join(", ")})`;
  if (c.action === "debug") return "debug" + (r.epochs ? ` ${r.epochs} epochs` : "") + (r.through_update ? " through the update" : "");
  if (c.action === "profile") return r.target === "update" ? `profile the next '${r.phase || "update"}'` : `profile ${r.batches || "?"} batches`;
  return c.action;
}

// Its way so far: "queued › delivered › applied @ step 120 › completed".
function commandPath(c) {
  const steps = (c.history || []).map((h) => h.status + (h.status === "applied" && h.step != null ? ` @ step ${h.step}` : ""));
  return steps.length ? steps.join(" › ") : c.status;
}

class CommandHistory {
  constructor(steering) {
    this.steering = steering; this.records = new Map(); this.timer = null; this.picked = null;
    this.results = new Results(steering);  // results.js
    this.body = el("tbody");
    const head = el("tr", {}, ...["command", "asked by", "status", "result", ""].map((h) => el("th", {}, h)));
    this.el = el("div", {id: "command-history"}, el("h4", {}, "commands"),
      el("table", {id: "commands"}, el("thead", {}, head), this.body), this.results.el);
    this.onChartClick = (e) => this.chartClicked(e);
  }

  async start(live) {  // a run that is over has its commands as they ended: read once
    $("charts").addEventListener("click", this.onChartClick);
    await this.poll();
    if (live) this.timer = setInterval(() => this.poll().catch(showError), COMMANDS_EVERY_MS);
  }

  stop() {
    if (this.timer) clearInterval(this.timer);
    $("charts").removeEventListener("click", this.onChartClick);
    this.results.stop();
  }

  sent(commandId, body) {  // queued by this page: shown at once, followed by the next polls
    if (!this.records.has(commandId)) {
      this.records.set(commandId, {command_id: commandId, action: body.action, request: body, status: "queued",
        history: [{status: "queued"}]});
      this.render();
    }
  }

  async poll() {
    const records = await api(`/runs/${encodeURIComponent(this.steering.runId)}/commands`);
    let changed = false;
    for (const r of records) {
      const was = this.records.get(r.command_id);
      if (!was || was.status !== r.status || (was.history || []).length !== r.history.length) changed = true;
      this.records.set(r.command_id, r);
    }
    if (changed) this.render();
    await this.results.refresh([...this.records.values()]);
  }

  render() {
    const rows = [...this.records.values()].sort((a, b) => (b.created_at || Infinity) - (a.created_at || Infinity));
    this.body.replaceChildren(...rows.map((c) => this.row(c)));
    if (this.picked) this.pick(this.picked, false);
  }

  row(c) {
    const tr = el("tr", {className: "status-" + c.status});
    tr.dataset.commandId = c.command_id;
    tr.dataset.status = c.status;
    tr.dataset.action = c.action;
    const asked = (c.request || {}).reason;
    const reason = asked ? el("span", {className: "note"}, ` (${asked})`) : "";
    const detail = TERMINAL.has(c.status) && c.status !== "completed" ? c.message : resultWords(c);
    tr.append(el("td", {title: c.command_id}, commandWords(c), reason), el("td", {}, commandSource(c.command_id)),
      el("td", {className: "path"}, commandPath(c)), el("td", {className: "result"}, detail || ""),
      el("td", {}, ...this.results.buttons(c)));
    return tr;
  }

  pick(commandId, scroll = true) {  // the entry of a command: marked, and in view
    this.picked = commandId;
    this.body.querySelectorAll("tr.picked").forEach((tr) => tr.classList.remove("picked"));
    const tr = this.body.querySelector(`tr[data-command-id="${CSS.escape(commandId)}"]`);
    if (tr) { tr.classList.add("picked"); if (scroll) tr.scrollIntoView({block: "nearest"}); }
  }

  chartClicked(e) {  // a click on a chart near a command's mark opens that command's entry
    const box = e.target.closest(".chart");
    const chart = box && this.steering.view.charts.find((c) => c.el === box);
    if (!chart || !chart.plot) return;
    const u = chart.plot, view = this.steering.view, left = u.cursor.left;
    if (left == null || left < 0) return;
    let best = null;
    for (const m of view.markers) {
      if (m.kind !== "command" || !m.command_id || m[view.axis] == null) continue;
      const px = u.valToPos(m[view.axis] - view.shift(m.run), "x");
      if (Math.abs(px - left) <= 6 && (!best || Math.abs(px - left) < best.d)) best = {d: Math.abs(px - left), m};
    }
    if (best) this.pick(best.m.command_id);
  }
}

// A completed command's result in words (a call's return value, a checkpoint's path and size).
function resultWords(c) {
  const r = c.result;
  if (!r || c.status !== "completed") return "";
  if (c.action === "checkpoint" || c.action === "stop") {
    return [r.path, r.bytes != null ? fmtBytes(r.bytes) : null].filter(Boolean).join(", ") || JSON.stringify(r);
  }
  if (c.action === "stacks" || c.action === "profile") return "";  // their own view (results.js)
  return Object.entries(r).map(([k, v]) => `${k}=${typeof v === "number" ? fmt(v) : v}`).join(" ");
}

function fmtBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}
