// Distributions (run.log of nissa.Histogram, run.watch(model, histograms=…)), TensorBoard's way: bands over
// steps between the 0/7/16/31/50/69/84/93/100th percentiles of each step's histogram (computed by the server),
// and under them the histogram at one step, the latest unless the slider picks another. Only the first run of
// an overlay is drawn; a name is data, shown as text. On the page's x axis (step, epoch or time).
"use strict";

const DISTRIBUTION_PAGE = 12;  // distributions charted a page at a time, in the server's order
const BAND_FILLS = ["rgba(79,179,255,0.12)", "rgba(79,179,255,0.2)", "rgba(79,179,255,0.3)", "rgba(79,179,255,0.42)"];

function distributionBox(view) {
  // Under the charts: a filter by name, the page's place among the run's distributions, ‹ and ›; both in the
  // page's URL (dfilter=, doffset=: app.js writeUrl), so a link opens the same page of the same distributions.
  let box = $("distributions");
  if (!box) {
    box = el("section", {id: "distributions"});
    const filter = el("input", {id: "distribution-filter", type: "search", size: 32, placeholder: "filter distributions by name"});
    const prev = el("button", {id: "distribution-prev", title: "previous page"}, "‹");
    const next = el("button", {id: "distribution-next", title: "next page"}, "›");
    box.append(el("div", {className: "toolbar"}, el("b", {}, "distributions "), filter, " ", prev, " ",
                  el("span", {id: "distribution-page"}), " ", next), el("div", {id: "distribution-charts"}));
    $("charts").after(box);
    let timer = null;
    const go = (offset) => {
      const v = state.view;
      if (!v) return;
      Object.assign(v, {distQuery: filter.value.trim(), distOffset: offset});
      writeUrl();
      showDistributions(v).catch(showError);
    };
    filter.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => go(0), 300); });
    prev.addEventListener("click", () => go(Math.max(0, (state.view?.distOffset || 0) - DISTRIBUTION_PAGE)));
    next.addEventListener("click", () => go((state.view?.distOffset || 0) + DISTRIBUTION_PAGE));
  }
  if (box.view !== view) {  // another run's page: its own distributions, filtered as its URL says
    box.view = view;
    $("distribution-filter").value = view.distQuery || "";
    $("distribution-charts").replaceChildren();
  }
  return box;
}

async function addDistributions(view) {
  // The first run's distributions, a page of them, in the server's one order (a loop's own before a debug
  // window's, each by name: the console's order too), those whose name holds the filter's text.
  const box = distributionBox(view);
  const offset = view.distOffset || 0, q = view.distQuery || "";
  const params = new URLSearchParams({q, offset: String(offset), limit: String(DISTRIBUTION_PAGE)});
  const page = await api(`/runs/${encodeURIComponent(view.runs[0])}/histograms?` + params);
  if (view.closed || view !== state.view) return;
  box.hidden = !page.total && !q;
  box.dataset.total = String(page.total);
  box.dataset.names = page.names.join("\n");  // with the total: the page these charts are of
  $("distribution-page").textContent = page.total ? `${offset + 1}–${offset + page.names.length} of ${page.total}` : "none";
  $("distribution-prev").disabled = offset === 0;
  $("distribution-next").disabled = offset + DISTRIBUTION_PAGE >= page.total;
  const titles = page.names.map((n) => "distribution · " + n);
  for (const chart of view.charts.filter((c) => c instanceof DistributionChart && !titles.includes(c.title))) view.drop(chart);
  for (const name of page.names) {
    const title = "distribution · " + name;
    if (view.removed.has(title) || view.charts.some((c) => c.title === title)) continue;
    const chart = new DistributionChart(view, title, name);
    view.charts.push(chart);
    $("distribution-charts").appendChild(chart.el);
    await chart.load(view.runs[0], null);
    chart.render();
  }
}

async function showDistributions(view) { await addDistributions(view); }

class DistributionChart {
  constructor(view, title, name) {
    this.view = view; this.title = title; this.name = name; this.names = []; this.own = false;
    this.reply = null; this.plot = null; this.pick = null;  // pick: the step's index the slider chose (null: latest)
    this.el = document.createElement("div");
    this.el.className = "chart distribution";
    this.el.dataset.title = title;
    this.el.innerHTML = `<h3><span class="title"></span> <small class="note"></small><button title="remove">×</button></h3>` +
      `<div class="plot"></div><label>step <input type="range" min="0" value="0"> <output></output></label>` +
      `<canvas class="bars" height="120"></canvas>`;
    this.el.querySelector(".title").textContent = title;
    this.el.querySelector("button").addEventListener("click", () => view.remove(this));
    this.el.querySelector("input").addEventListener("input", (e) => { this.pick = Number(e.target.value); this.drawBars(); });
  }

  lastX() { return null; }  // read whole again: at most 300 steps, spread over the run

  xAxis() { return ["epoch", "ts"].includes(this.view.axis) ? this.view.axis : "step"; }  // a histogram has no round

  async load(run, after) {
    if (run !== this.view.runs[0]) return;
    const path = `/runs/${encodeURIComponent(run)}/histograms/${encodeURIComponent(this.name)}?max_steps=300`;
    this.reply = await api(path);
  }

  steps() {  // rank 0's (or the first rank's) distributions that hold a finite value, in step order
    const all = (this.reply?.histograms || []).filter((h) => h.quantiles);
    const rank = all.length ? Math.min(...all.map((h) => h.rank)) : 0;
    return all.filter((h) => h.rank === rank);
  }

  render() {
    const steps = this.steps();
    this.el.dataset.points = String(steps.length);
    this.el.hidden = !steps.length;
    if (!steps.length) return;
    const qs = this.reply.quantiles, axis = this.xAxis();
    const data = [steps.map((h) => h[axis]), ...qs.map((_, k) => steps.map((h) => h.quantiles[k]))];
    const series = [{label: axis}, ...qs.map((q, k) => ({
      label: `${Math.round(q * 100)}%`, stroke: k === 4 ? "#4fb3ff" : "rgba(79,179,255,0.35)", width: k === 4 ? 1.5 : 1,
      points: {show: false}}))];
    const bands = [0, 1, 2, 3].map((k) => ({series: [qs.length - 1 - k, k + 1], fill: BAND_FILLS[k]}));
    const width = Math.max(300, this.el.clientWidth - 16);
    if (this.plot) this.plot.setData(data);
    else this.plot = new uPlot({width, height: 200, series, bands, legend: {show: false},
      scales: {x: {time: axis === "ts"}}, axes: chartAxes(axis === "ts")}, data, this.el.querySelector(".plot"));
    const slider = this.el.querySelector("input");
    slider.max = String(steps.length - 1);
    if (this.pick == null) slider.value = String(steps.length - 1);
    this.drawBars();
  }

  drawBars() {
    // The histogram at the chosen step: a bar per bin, min and max under it.
    const steps = this.steps();
    if (!steps.length) return;
    const h = steps[Math.min(this.pick ?? steps.length - 1, steps.length - 1)];
    this.el.dataset.step = String(h.step);
    this.el.querySelector("output").textContent = `${h.step}: ${h.count} values from ${h.min.toPrecision(4)} to ` +
      `${h.max.toPrecision(4)}` + (h.nonfinite ? `, ${h.nonfinite} NaN/inf` : "");
    const canvas = this.el.querySelector(".bars");
    canvas.width = Math.max(300, this.el.clientWidth - 16);
    const ctx = canvas.getContext("2d"), top = Math.max(...h.bins, 1), w = canvas.width / h.bins.length;
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    ctx.fillStyle = "#4fb3ff";
    h.bins.forEach((n, i) => { const bar = (n / top) * (canvas.height - 4); ctx.fillRect(i * w, canvas.height - bar, Math.max(1, w - 1), bar); });
  }
}
