// What a run's commands brought back, opened from their entries: a profile window's top operators (the
// console's table, served by GET /runs/{run_id}/profiles) and its trace to download with the one command that
// opens it; every thread's stack of every rank, the frame each is blocked in first, the file a link to its
// artifact; a debug window's per-layer charts. And the run's open alerts, at the top of its page.
"use strict";

const ALERTS_EVERY_MS = 5000;
const PROFILES_EVERY_MS = 3000;

function runPath(runId, rest) { return `/runs/${encodeURIComponent(runId)}/${rest}`; }

// A link to an artifact of the run: a plain link, fetched with the token where the server wants one.
function artifactLink(runId, name, text = name) {
  const href = runPath(runId, "artifacts/" + encodeURIComponent(name));
  const a = el("a", {href, className: "artifact"}, text);
  a.dataset.artifact = name;
  a.addEventListener("click", async (e) => {
    if (!token()) return;  // the browser downloads it itself
    e.preventDefault();
    const res = await fetch(href, {headers: authHeaders()});
    if (!res.ok) { showError(`${name}: ${res.status}`); return; }
    const url = URL.createObjectURL(await res.blob());
    download(name, url);
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  });
  return a;
}

// One rank's stack text (nissa.diagnostics.stacks) as threads: {title, blocked, text}, in the order written.
function threadsOf(text) {
  const parts = String(text).split(/\n(?=Thread 0x)/).filter((p) => p.startsWith("Thread "));
  return parts.map((part) => {
    const lines = part.split("\n");
    const frames = lines.map((l, i) => [l, i]).filter(([l]) => /^\s*File "/.test(l));
    const last = frames.length ? frames[frames.length - 1] : null;
    const blocked = last ? `${last[0].trim()}${lines[last[1] + 1] ? " — " + lines[last[1] + 1].trim() : ""}` : "no Python frame";
    return {title: lines[0].replace(/ \(most recent call last\):$/, ""), blocked, text: part};
  });
}

class Results {
  constructor(steering) {
    this.steering = steering; this.profiles = new Map(); this.open = null; this.profilesRead = 0;
    this.el = el("div", {id: "results"});
    this.alerts = el("div", {id: "run-alerts"});
    this.alertTimer = setInterval(() => this.loadAlerts().catch(showError), ALERTS_EVERY_MS);
    this.loadAlerts().catch(showError);
  }

  stop() { clearInterval(this.alertTimer); this.alerts.remove(); }

  async loadAlerts() {
    const firing = await api(runPath(this.steering.runId, "alerts?status=firing"));
    if (!this.alerts.isConnected) $("steer").prepend(this.alerts);
    this.alerts.replaceChildren(...firing.map((a) => {
      const p = el("p", {className: "alert"}, el("strong", {}, `${a.rule} firing`), ` since step ${a.step ?? "?"}: ${a.message}`);
      p.dataset.alert = a.alert_id;
      if (a.command_id) {
        const b = el("button", {type: "button"}, "its stacks");
        b.addEventListener("click", () => this.steering.history.pick(a.command_id));
        p.append(" ", b);
      }
      return p;
    }));
  }

  async refresh(records) {  // profile windows closed since the last look: their tables
    const wanted = records.filter((c) => c.action === "profile" && c.status === "completed" && !this.profiles.has(c.command_id));
    if (wanted.length && Date.now() - this.profilesRead > PROFILES_EVERY_MS) {  // a window may close after its command
      this.profilesRead = Date.now();
      for (const w of await api(runPath(this.steering.runId, "profiles"))) {
        if (w.command_id && !this.profiles.has(w.command_id)) this.profiles.set(w.command_id, w);
      }
      if (wanted.some((c) => this.profiles.has(c.command_id))) this.steering.history.render();
    }
    if (this.open) {
      const c = records.find((r) => r.command_id === this.open.command_id);
      if (c && c.updated_at !== this.open.updated_at && c.action !== "debug") await this.show(c);
    }
  }

  buttons(c) {  // what a command's entry opens
    const out = [];
    const add = (text) => {
      const b = el("button", {type: "button", className: "open-result"}, text);
      b.addEventListener("click", () => { this.steering.history.pick(c.command_id, false); this.show(c).catch(showError); });
      out.push(b);
    };
    if (c.action === "profile" && this.profiles.has(c.command_id)) add("top operators");
    if (c.action === "stacks" && (c.result || (c.ranks || []).some((r) => r.result))) add("stacks");
    if (c.action === "debug" && c.applied_step != null) add("layer charts");
    return out;
  }

  async show(c) {
    this.open = c;
    const view = c.action === "profile" ? this.profileView(this.profiles.get(c.command_id))
      : c.action === "stacks" ? this.stacksView(c) : await this.debugView(c);
    view.dataset.result = c.action;
    view.dataset.commandId = c.command_id;
    this.el.replaceChildren(view);
    view.scrollIntoView({block: "nearest"});
  }

  profileView(w) {
    const span = w.target === "update" ? "the update" : `${w.batches} batches`;
    const table = el("table", {className: "ops"}, el("thead", {}, el("tr", {}, ...w.ops.columns.map((h) => el("th", {}, h)))),
      el("tbody", {}, ...w.ops.rows.map((r) => el("tr", {}, ...r.map((cell, i) => el("td", {className: i ? "num" : ""}, cell))))));
    const trace = el("p", {}, "trace ");
    if (w.artifact) trace.append(artifactLink(this.steering.runId, w.artifact, "download " + w.artifact));
    else trace.append(el("code", {}, w.trace_path), " (on the trainer's machine; not uploaded)");
    const opener = el("p", {className: "note"}, "open it in Perfetto: ", el("code", {className: "open-with"}, w.open_with));
    return el("section", {className: "result"}, el("h4", {}, `profile window ${w.window}: ${span} in ${w.wall_s.toFixed(2)} s (rank ${w.rank})`),
      trace, opener, table);
  }

  stacksView(c) {
    const answers = (c.ranks || []).filter((r) => r.result).map((r) => [r.rank, r.result]);
    if (!answers.length && c.result) answers.push([c.result.rank ?? 0, c.result]);
    const waiting = (c.ranks || []).filter((r) => !r.result).map((r) => r.rank);
    const out = el("section", {className: "result"}, el("h4", {}, `stacks at step ${c.applied_step ?? "?"}` +
      (waiting.length ? `; no answer yet from rank ${waiting.join(", ")}` : "")));
    for (const [rank, r] of answers) {
      const head = el("h5", {}, `rank ${rank}: ${r.threads} threads`);
      if (r.artifact) head.append(" ", artifactLink(this.steering.runId, r.artifact));
      else if (r.path) head.append(" ", el("code", {}, r.path));
      if (r.truncated) head.append(el("span", {className: "note"}, " (cut here; the file has all of it)"));
      const rankEl = el("div", {className: "rank"}, head);
      rankEl.dataset.rank = String(rank);
      for (const t of threadsOf(r.stacks || "")) {
        const summary = el("summary", {}, el("span", {className: "thread"}, t.title), el("br"), el("code", {className: "blocked"}, t.blocked));
        rankEl.append(el("details", {className: "thread"}, summary, el("pre", {}, t.text)));
      }
      out.append(rankEl);
    }
    return out;
  }

  async debugView(c) {  // the window's per-layer series, charted beside the others
    const listing = await api(runPath(this.steering.runId, "series"));
    const names = [...new Set(listing.map((s) => s.name))];
    const shown = names.filter((n) => n.startsWith("debug_layer_stats.") && /\.(grad_norm|weight_norm)$/.test(n));
    for (const name of shown) this.steering.view.addByHand(name);
    const end = (c.history || []).filter((h) => h.step != null).map((h) => h.step).pop();
    const out = el("section", {className: "result"}, el("h4", {}, `debug window from step ${c.applied_step}` +
      (c.status === "completed" && end != null ? ` to step ${end}` : " (open)")));
    out.append(el("p", {}, shown.length ? `per-layer charts added below: ${shown.join(", ")}` : "no per-layer series yet: they come as the window runs"));
    return out;
  }
}
