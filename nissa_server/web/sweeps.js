// Sweeps: the list (#sweeps) and a sweep's page (#sweep=ID): its trials (status, values, metric, best), the
// population's curves of the sweep's metric coloured by trial with each exploit marked at its step (chart.js's
// Chart), the lineage (which trial copied which, when, with what values), the parallel coordinates of values →
// metric (compare.js's painter), and stopping a trial or the whole sweep, each after a confirmation. What the page
// shows is the server's one definition (GET /sweeps/{id}/view, leyline.sweep_view); the page renders it, its text
// only as text. Hooks for tests and scripts: tr[data-trial], button[data-action=stop-trial|stop-sweep],
// #sweep-lineage tr[data-trial][data-source], #sweep-view[data-ready], the chart's data-marks.
"use strict";

const SWEEP_EVERY_MS = 2000;

async function showSweeps() {
  const sweeps = await api("/sweeps");
  const rows = sweeps.map((s) => {
    const tr = el("tr", {});
    tr.dataset.sweep = s.sweep_id;
    const link = el("a", {href: "#sweep=" + encodeURIComponent(s.sweep_id)}, s.name);
    const running = s.trials.filter((t) => t.status === "running").length;
    tr.append(el("td", {}, link), el("td", {}, s.sweep_id), el("td", {className: "status-" + s.status}, s.status),
      el("td", {}, s.method), el("td", {}, `${s.metric.goal} ${s.metric.name}`),
      el("td", {className: "num"}, `${s.trials.length} (${running} running)`),
      el("td", {}, s.best_trial == null ? "—" : "t" + s.best_trial), el("td", {}, fmtTime(s.created_at)));
    return tr;
  });
  const head = el("tr", {}, ...["sweep", "id", "status", "method", "metric", "trials", "best", "created"].map((h) => el("th", {}, h)));
  $("sweeps-list").replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows));
  $("sweeps-note").textContent = sweeps.length ? "" : "no sweep yet: nissa sweep create SPEC.toml --server URL";
  $("sweeps-view").dataset.ready = "1";
}

// The curves: one Chart (chart.js) of the sweep's metric over every trial's run; this object is the view the
// Chart asks (runs, axis, marks, labels), with the exploits as its marks.
class SweepCurves {
  constructor(page) {
    this.page = page; this.runs = []; this.axis = "step"; this.smoothing = 0; this.sinceStart = false;
    this.markers = []; this.labels = {}; this.chart = null; this.zoomed = null;
  }
  shift() { return 0; }
  runLabel(run) { return this.labels[run] || run; }
  xRange() { return this.zoomed || (this.chart && this.chart.xExtent()); }
  zoom(range) { this.zoomed = range; if (this.chart) this.chart.applyRange?.(); }
  remove() {}

  async update(v) {
    this.markers = v.marks.map((m) => ({kind: "exploit", step: m.step, label: m.label, run: m.run_id}));
    v.trials.forEach((t) => { if (t.run_id) this.labels[t.run_id] = "t" + t.trial_id; });
    if (!this.chart || this.runs.join() !== v.runs.join()) {  // a new trial: the chart again, with it
      this.runs = [...v.runs];
      if (this.chart && this.chart.plot) this.chart.plot.destroy();
      this.chart = new Chart(this, v.metric.name, [v.metric.name]);
      $("sweep-curves").replaceChildren(this.chart.el);
    }
    for (const run of this.runs) {
      try { await this.chart.load(run, this.chart.lastX(run)); } catch (err) {
        if (err.status !== 404) throw err;  // a trial leased whose process has not started its run yet
      }
    }
    this.chart.loaded = true;
    this.chart.render();
    this.chart.applyRange?.();
    $("sweep-legend").replaceChildren(...this.runs.map((r, i) => {
      const span = el("span", {className: "run"}, "━ " + this.runLabel(r));
      span.style.color = PALETTE[i % PALETTE.length]; span.dataset.run = r;
      return span;
    }));
  }

  close() { if (this.chart && this.chart.plot) this.chart.plot.destroy(); }
}

class SweepPage {
  constructor(sweepId) { this.id = sweepId; this.closed = false; this.timer = null; this.curves = new SweepCurves(this); }

  async open() {
    delete $("sweep-view").dataset.ready;
    $("sweep-stop").onclick = () => this.confirmStop(null);
    await this.load();
    this.timer = setInterval(() => this.load().catch(showError), SWEEP_EVERY_MS);
  }

  async load() {
    const v = await api(`/sweeps/${encodeURIComponent(this.id)}/view`);
    if (this.closed) return;
    this.v = v; state.sweep = v;
    $("where").textContent = "sweep " + v.name;
    $("sweep-title").textContent = `${v.name} · ${v.sweep_id} · ${v.method}, ${v.metric.goal} ${v.metric.name}`;
    $("sweep-status").textContent = v.status + (v.message ? ": " + v.message : "");
    $("sweep-status").className = "status-" + v.status;
    $("sweep-stop").hidden = !v.live;
    this.trials(v);
    this.lineage(v);
    this.parcoords(v);
    await this.curves.update(v);
    const runs = v.runs.slice(0, OVERLAY_MAX);  // compare.js
    $("sweep-runs").href = runs.length ? `#run=${encodeURIComponent(runs[0])}&overlay=${runs.slice(1).map(encodeURIComponent).join(",")}` : "#";
    $("sweep-view").dataset.ready = "1";
    $("sweep-view").dataset.status = v.status;
    if (!v.live && this.timer) { clearInterval(this.timer); this.timer = null; }
  }

  trials(v) {
    const head = el("tr", {}, ...["trial", "status", ...v.columns, v.metric.name, "best", "step", "exploits", "run", ""]
      .map((h) => el("th", {}, h)));
    const rows = v.trials.map((t) => {
      const tr = el("tr", {className: t.is_best ? "best" : ""});
      tr.dataset.trial = String(t.trial_id); tr.dataset.status = t.status;
      const run = t.run_id ? el("a", {href: "#run=" + encodeURIComponent(t.run_id)}, t.run_id) : "";
      const stop = el("button", {className: "danger", hidden: !t.stoppable || !t.run_id}, "stop");
      stop.dataset.action = "stop-trial";
      stop.addEventListener("click", () => this.confirmStop(t));
      const status = el("td", {className: "status-" + t.status, title: t.message}, t.status + (t.is_best ? " ★" : ""));
      tr.append(el("td", {}, "t" + t.trial_id), status, ...t.values.map((x) => el("td", {className: "num"}, x)),
        el("td", {className: "num"}, t.metric), el("td", {className: "num"}, t.best), el("td", {className: "num"}, t.step),
        el("td", {className: "num"}, String(t.exploits)), el("td", {}, run), el("td", {}, stop));
      return tr;
    });
    $("sweep-trials").replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows));
  }

  lineage(v) {
    $("sweep-lineage-note").textContent = v.lineage.length ? "" : v.method === "pbt" ? "no exploit yet" : "no lineage: only pbt copies trials";
    const head = el("tr", {}, ...["step", "trial", "copied", "values", "status", "exploit"].map((h) => el("th", {}, h)));
    const rows = v.lineage.map((e) => {
      const tr = el("tr", {className: "status-" + e.status});
      tr.dataset.trial = String(e.trial_id); tr.dataset.source = String(e.source_trial); tr.dataset.step = String(e.step);
      tr.append(el("td", {className: "num"}, String(e.step)), el("td", {}, "t" + e.trial_id), el("td", {}, "t" + e.source_trial),
        el("td", {}, e.change), el("td", {title: e.message}, e.status + (e.message ? ": " + e.message : "")),
        el("td", {className: "num"}, e.exploit_ms));
      return tr;
    });
    $("sweep-lineage").replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows));
  }

  parcoords(v) {
    const runs = v.trials.map((t) => ({run_id: t.run_id || "t" + t.trial_id, name: "t" + t.trial_id, config: t.params, best: t.best_value}));
    const drawn = paintParcoords($("sweep-parcoords"), v.columns, runs, v.metric.name + " (best)", (r) => r.best);  // compare.js
    $("sweep-parcoords").dataset.ready = String(drawn.lines.length);
  }

  confirmStop(trial) {  // a trial through its run's stop command; the sweep through POST /sweeps/{id}/stop
    const dialog = el("dialog", {id: "sweep-confirm"});
    const yes = el("button", {type: "button", className: "danger"}, trial ? `Stop trial t${trial.trial_id}` : "Stop the sweep");
    const no = el("button", {type: "button"}, "Keep it running");
    yes.dataset.answer = "yes"; no.dataset.answer = "no";
    const what = trial ? `Its run ${trial.run_id} is asked to stop at its next step boundary; the sweep goes on without it.`
      : "Queued trials are dropped and every running trial's run is asked to stop; no trial starts after.";
    dialog.append(el("h3", {}, trial ? `Stop trial t${trial.trial_id}?` : `Stop sweep ${this.v.name}?`), el("p", {}, what), yes, " ", no);
    yes.addEventListener("click", () => { dialog.close(); dialog.remove(); this.stop(trial).catch(showError); });
    no.addEventListener("click", () => { dialog.close(); dialog.remove(); });
    document.body.append(dialog);
    dialog.showModal();
  }

  async stop(trial) {
    const reason = "stopped from the sweep's page";
    if (trial) await api("/escalate", {method: "POST", body: JSON.stringify({run_id: trial.run_id, action: "stop", reason})});
    else await api(`/sweeps/${encodeURIComponent(this.id)}/stop`, {method: "POST"});
    $("sweep-said").textContent = trial ? `trial t${trial.trial_id}: stop sent` : "sweep stopped";
    await this.load();
  }

  close() {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.curves.close();
    delete $("sweep-view").dataset.ready;
    $("sweep-said").textContent = "";
  }
}
