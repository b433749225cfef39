// Steering a live run from its page: a form per command, built from the one command definition (the
// EscalateRequest schema of /openapi.json, and the commands the run declared in GET /runs/{run_id}), the schema's
// rules checked before sending and the server's own refusal shown as it said it. Hooks for tests and scripts:
// form[data-action=<action>], form[data-command=<name>], fields named as the request's fields, a submit button.
"use strict";

let steerSchema = null;  // {components, mapping}: /openapi.json's commands, read once
let steerTexts = null;   // GET /ui/steer.json: what the console says too (stopping a run)
const HIDDEN_FIELDS = new Set(["action", "run_id", "name", "args"]);  // the form itself says these
const PANELS_EVERY_MS = 3000;  // a live run that has no client panels yet: how often the server is asked again

async function commandSchema() {
  if (!steerSchema) {
    const doc = await (await fetch("/openapi.json")).json();
    const components = doc.components.schemas;
    steerSchema = {components, mapping: components.EscalateRequest.discriminator.mapping};
    steerTexts = await (await fetch("/ui/steer.json")).json();
  }
  return steerSchema;
}

function componentOf(action) {
  return steerSchema.components[steerSchema.mapping[action].split("/").pop()];
}

function authHeaders() {
  return token() ? {Authorization: "Bearer " + token()} : {};
}

// What this page may do with the token it has (GET /auth answers without one): {write, read, why}.
async function access() {
  const res = await fetch("/auth", {headers: authHeaders()});
  const can = await res.json();
  if (can.write) return {...can, why: ""};
  const why = token() ? "the token this page was given is not this server's: it watches, and steers once it has the right one (above)"
    : "this server steers only with its token: enter it above to steer; until then the page watches";
  return {...can, why};
}

class Steering {
  constructor(runId, view) {
    this.runId = runId; this.view = view; this.info = null; this.phases = null; this.closed = false;
    this.root = $("steer");
    this.history = new CommandHistory(this);  // commands.js
  }

  async open() {
    await commandSchema();
    this.info = await api(`/runs/${encodeURIComponent(this.runId)}`);
    this.esper = (this.info.panels || []).includes("esper");
    this.phases = await this.declaredPhases();
    this.can = await access();
    if (this.closed) return;
    if (!this.can.write) $("auth").hidden = false;  // where the token goes
    const live = this.info.status === "live" || this.info.status === "degraded";
    const note = el("p", {id: "steer-note", className: "note"});
    note.textContent = !live ? `This run is ${this.info.status}: nothing to steer; its commands stay below.`
      : this.can.why;
    note.hidden = !note.textContent;
    const forms = el("div", {id: "steer-forms"});
    if (live) forms.append(...this.forms());
    forms.querySelectorAll("button[type=submit]").forEach((b) => { b.disabled = !this.can.write; });
    this.root.replaceChildren(el("h3", {}, "steer"), note, forms, this.history.el);
    this.root.hidden = false;
    this.root.dataset.ready = "1";
    this.panels = [];
    await this.startPanels(live);
    if (this.closed) return;
    if (live && !(this.info.panels || []).length) this.askLater();
    await this.history.start(live);
  }

  // Which client's own panels the run has is the server's to say (RunDetail.panels, leyline.panels.client_panels),
  // the page shows them as given; an Esper run's also has a PPO update to wait for and stops through a checkpoint.
  async startPanels(live) {
    this.esper = (this.info.panels || []).includes("esper");
    this.panels = (this.info.panels || []).filter((name) => CLIENT_PANELS[name])  // esper.js
      .map((name) => new CLIENT_PANELS[name](this.runId, name));
    for (const panels of this.panels) {
      if (this.closed) return;
      await panels.start(live);
      if (this.closed) panels.stop();  // closed while it started: close() may have stopped it before it began
    }
  }

  // A live run's page opened before the run made any event of its client's kinds (an Esper run in its first
  // epoch): the server is asked again until it names panels, which then come with the forms they change (those
  // being filled in are left as they are).
  askLater() {
    const again = () => this.askAgain().catch((err) => { showError(err); if (!this.closed) this.askLater(); });
    this.asking = setTimeout(again, PANELS_EVERY_MS);
  }

  async askAgain() {
    const info = await api(`/runs/${encodeURIComponent(this.runId)}`);
    if (this.closed || !(info.status === "live" || info.status === "degraded")) return;
    if (!(info.panels || []).length) { this.askLater(); return; }
    this.info = {...this.info, panels: info.panels};
    await this.startPanels(true);
    for (const old of this.root.querySelectorAll("#steer-forms form[data-action]")) {
      const fresh = this.actionForm(old.dataset.action);
      const names = (f) => [...f.querySelectorAll("[name]")].map((e) => e.name).join();
      if (names(fresh) === names(old) || old.contains(document.activeElement)) continue;
      fresh.querySelectorAll("button[type=submit]").forEach((b) => { b.disabled = !this.can.write; });
      old.replaceWith(fresh);
    }
  }

  async declaredPhases() {  // the run's run_started says its phases (null: it did not say)
    const started = await api(`/runs/${encodeURIComponent(this.runId)}/events?kind=run_started&rank=0&limit=1`);
    return started.length && started[0].payload.phases != null ? started[0].payload.phases : null;
  }

  // The phases a profile window of target "update" may name; an Esper run's update is its own (phase empty).
  phaseChoices() {
    if (this.phases == null) return null;
    return this.phases.filter((p) => p !== steerTexts.update_phase);
  }

  hasUpdate() {
    return this.esper || (this.phases || []).includes(steerTexts.update_phase);
  }

  forms() {
    const out = [];
    for (const action of Object.keys(steerSchema.mapping)) {
      if (action !== "call") out.push(this.actionForm(action));
    }
    for (const spec of this.info.commands || []) out.push(this.callForm(spec));
    return out;
  }

  actionForm(action) {
    const schema = componentOf(action);
    const form = el("form", {className: "steer"});
    form.dataset.action = action;
    form.append(el("strong", {title: schema.description || ""}, action));
    for (const [name, prop] of Object.entries(schema.properties)) {
      if (HIDDEN_FIELDS.has(name) || !this.offers(action, name)) continue;
      form.append(schemaField(name, prop, {choices: name === "phase" ? this.phaseChoices() : null}));
    }
    return this.finish(form, () => ({action, run_id: this.runId}), schema);
  }

  offers(action, field) {  // a field only where this run can take it (a loop of its own has no PPO update)
    if (field === "through_update") return this.hasUpdate();
    if (field === "target") return this.hasUpdate() || !!(this.phases && this.phases.length);
    if (field === "phase") return !!(this.phaseChoices() && this.phaseChoices().length);
    return true;
  }

  callForm(spec) {
    const schema = componentOf("call");
    const form = el("form", {className: "steer"});
    form.dataset.command = spec.name;
    form.append(el("strong", {title: spec.help}, spec.name));
    if (spec.help) form.append(el("span", {className: "help"}, spec.help));
    const argsField = el("span", {className: "args"});
    for (const arg of spec.args) {
      const prop = {type: {int: "integer", float: "number", bool: "boolean", str: "string"}[arg.type]};
      const field = schemaField(arg.name, arg.required ? prop : {anyOf: [prop, {type: "null"}]}, {help: arg.help});
      if (!arg.required && arg.default != null) field.querySelector("input").placeholder = `default ${arg.default}`;
      argsField.append(field);
    }
    form.append(argsField);
    form.append(schemaField("reason", schema.properties.reason));
    return this.finish(form, () => ({action: "call", run_id: this.runId, name: spec.name, args: this.args(argsField)}), schema);
  }

  args(argsField) {
    const args = {};
    for (const input of argsField.querySelectorAll("input, select")) {
      const v = input.type === "checkbox" ? input.checked : fieldValue(input);
      if (v !== undefined) args[input.name] = v;
    }
    return args;
  }

  finish(form, base, schema) {
    const refusal = el("span", {className: "refusal", role: "alert"});
    form.append(el("button", {type: "submit"}, "send"), refusal);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const body = base();
      for (const input of form.querySelectorAll(":scope > label input, :scope > label select")) {
        const v = fieldValue(input);
        if (v !== undefined) body[input.name] = v;
      }
      const why = schemaRefusal(schema, body);
      refusal.textContent = why ? `not sent: ${form.dataset.action || form.dataset.command} ${why}` : "";
      if (!why) this.confirmThenSend(form, body, refusal);
    });
    return form;
  }

  confirmThenSend(form, body, refusal) {
    if (body.action !== "stop") { this.send(body, refusal); return; }
    const dialog = el("dialog", {id: "stop-confirm"});
    const yes = el("button", {type: "button", className: "danger"}, "Stop the run");
    const no = el("button", {type: "button"}, "Keep it running");
    yes.dataset.answer = "yes"; no.dataset.answer = "no";
    dialog.append(el("h3", {}, `Stop run ${this.info.name || this.runId}?`),
      el("p", {}, this.esper ? steerTexts.stop_esper : steerTexts.stop_loop), yes, " ", no);
    yes.addEventListener("click", () => { dialog.close(); dialog.remove(); this.send(body, refusal); });
    no.addEventListener("click", () => { dialog.close(); dialog.remove(); });
    document.body.append(dialog);
    dialog.showModal();
  }

  async send(body, refusal) {
    const res = await fetch("/escalate", {method: "POST", body: JSON.stringify(body),
      headers: {...authHeaders(), "Content-Type": "application/json"}});
    const reply = await res.json().catch(() => ({}));
    if (res.status === 401 || res.status === 403) {
      $("auth").hidden = false;
      refusal.textContent = `refused (${res.status}): ${reply.detail || "this server needs its token"}; ` +
        "the page watches until it has the server's token (above)";
      return;
    }
    if (!res.ok) { refusal.textContent = `the server refused (${res.status}): ${reply.detail || res.statusText}`; return; }
    refusal.textContent = "";
    this.history.sent(reply.command_id, body);
  }

  close() {
    this.closed = true; this.history.stop();
    clearTimeout(this.asking);
    for (const panels of this.panels || []) panels.stop();
    this.root.hidden = true; this.root.replaceChildren(); delete this.root.dataset.ready;
  }
}

let steering = null;
function openSteering(runs, view) {  // app.js: a run's page (one run, not an overlay) can be steered
  if (steering) { steering.close(); steering = null; }
  if (runs.length !== 1) return;
  steering = new Steering(runs[0], view);
  steering.open().catch(showError);
}
function closeSteering() { if (steering) { steering.close(); steering = null; } }
