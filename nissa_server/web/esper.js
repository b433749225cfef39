// An Esper run's panels on its page, the console's own (GET /runs/{run_id}/esper, folded by leyline.esper.panels
// on the server): each env's accuracy and the seed in each of its slots with its stage, the seed lifecycle log with
// each decision's contribution, PPO health, and the telemetry level and windows in force. Text only.
"use strict";

const ESPER_EVERY_MS = 2000;
const STAGE_COLORS = {FOSSILIZED: "#3fb950", PRUNED: "#d2a8ff", EMBARGOED: "#7d8590", BLENDING: "#e3b341",
  TRAINING: "#4fb3ff", GERMINATED: "#56d4dd", HOLDING: "#ff9bce"};

function pp(v) { return v == null ? "—" : `${(v * 100).toFixed(1)} pp`; }
function pct(v) { return v == null ? "—" : `${(v * 100).toFixed(1)}%`; }

class EsperPanels {
  constructor(runId, name) {  // name: where the server serves them (GET /runs/{run_id}/<name>)
    this.runId = runId; this.name = name; this.timer = null; this.last = "";
    this.el = el("section", {id: "esper"});
  }

  async start(live) {  // a run that is over: its panels as it ended, read once
    $("steer").after(this.el);
    await this.load();
    if (live) this.timer = setInterval(() => this.load().catch(showError), ESPER_EVERY_MS);
  }

  stop() { if (this.timer) clearInterval(this.timer); this.el.remove(); }

  async load() {
    const panels = await api(runPath(this.runId, this.name));
    const seen = JSON.stringify(panels);
    if (seen === this.last) return;
    this.last = seen;
    this.el.replaceChildren(this.level(panels), el("div", {className: "esper-row"}, this.grid(panels), this.ppo(panels)),
      this.seedLog(panels));
    this.el.dataset.ready = "1";
  }

  level(p) {
    const parts = [`telemetry ${p.level || "—"}`];
    if (p.level_until != null) parts.push(`until epoch ${p.level_until}`);
    if (p.profiling) parts.push(`profiling ${p.profiling}`);
    const line = el("p", {id: "esper-level"}, parts.join(" · "));
    return line;
  }

  grid(p) {
    const slots = [...new Set(p.envs.flatMap((e) => e.seeds.map((s) => s.slot)))];
    const head = el("tr", {}, ...["env", "epoch", "accuracy", "val loss", "reward", "action", ...slots].map((h) => el("th", {}, h)));
    const rows = p.envs.map((e) => {
      const tr = el("tr", {}, el("td", {}, String(e.env)), el("td", {className: "num"}, String(e.epoch)),
        el("td", {className: "num"}, pct(e.accuracy)), el("td", {className: "num"}, fmt(e.val_loss)),
        el("td", {className: "num"}, fmt(e.reward)), el("td", {}, e.action || "—"));
      tr.dataset.env = String(e.env);
      for (const slot of slots) {
        const s = e.seeds.find((x) => x.slot === slot);
        const td = el("td", {className: "slot"}, s && s.stage ? `${s.stage} ${s.seed_id || ""} ${s.blueprint || ""}` : "·");
        if (s && s.stage) { td.style.color = STAGE_COLORS[s.stage] || ""; td.dataset.stage = s.stage; td.title = `contribution ${pp(s.contribution)}`; }
        tr.append(td);
      }
      return tr;
    });
    return el("div", {className: "panel"}, el("h4", {}, "envs"), el("table", {id: "env-grid"}, el("thead", {}, head), el("tbody", {}, ...rows)));
  }

  ppo(p) {
    const box = el("div", {className: "panel", id: "ppo-health"}, el("h4", {}, p.ppo ? `PPO health, round ${p.ppo.round}` : "PPO health"));
    if (!p.ppo) { box.append(el("p", {className: "note"}, "no PPO update yet")); return box; }
    const rows = p.ppo.figures.map(([name, v]) => el("tr", {}, el("td", {}, name), el("td", {className: "num"}, fmt(v))));
    rows.push(...p.ppo.heads.map(([head, v]) => el("tr", {}, el("td", {}, `entropy ${head}`), el("td", {className: "num"}, fmt(v)))));
    box.append(el("table", {}, el("tbody", {}, ...rows)));
    if (p.ppo.early_stopped) box.append(el("p", {className: "note"}, "stopped early (KL)"));
    return box;
  }

  seedLog(p) {
    const head = el("tr", {}, ...["epoch", "env", "slot", "seed", "what", "contribution"].map((h) => el("th", {}, h)));
    const rows = p.seed_log.map((r) => el("tr", {}, el("td", {className: "num"}, String(r.epoch)),
      el("td", {}, r.env == null ? "—" : String(r.env)), el("td", {}, r.slot), el("td", {}, r.seed_id), el("td", {}, r.what),
      el("td", {className: "num"}, r.contribution == null ? "" : pp(r.contribution))));
    return el("div", {className: "panel seed-log"}, el("h4", {}, "seed lifecycle"),
      rows.length ? el("table", {id: "seed-log"}, el("thead", {}, head), el("tbody", {}, ...rows)) : el("p", {className: "note"}, "no seed activity yet"));
  }
}

// Each client's panels a run's page can show, by the name the server gives in the run's data (RunDetail.panels).
const CLIENT_PANELS = {esper: EsperPanels};
