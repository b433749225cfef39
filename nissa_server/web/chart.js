// nissa web page: one chart of a run's page (or of several runs overlaid). Its lines read from
// /runs/{id}/series, smoothed as the console smooths (TensorBoard's debiased moving average, the raw line
// kept dim), one colour per run where runs are overlaid (a run's envs and labels as dashes of its colour),
// a legend with each line's value at the cursor (its last value when the cursor is elsewhere), the cursor
// synced with every chart of the page, one x range for the page, marks of what happened to the run, a log
// scale, full screen (Esc closes) and PNG/CSV downloads. Run-written text reaches the page only through textContent.
"use strict";

const PALETTE = ["#4fb3ff", "#f78166", "#3fb950", "#d2a8ff", "#e3b341", "#56d4dd", "#ff9bce", "#a5d6ff"];
const DASHES = [undefined, [8, 4], [2, 3], [10, 3, 2, 3], [4, 4], [1, 5]];
const MARK_COLORS = {command: "#e3b341", anomaly: "#ff7b72", fossilized: "#3fb950", pruned: "#d2a8ff",
                     resumed: "#56d4dd", end: "#7d8590", exploit: "#ff9bce"};
const SYNC_KEY = "nissa-page";

// TensorBoard's debiased exponential moving average (tui/chart_data.py's smooth): null (NaN, inf) skipped.
function smooth(ys, weight) {
  if (!(weight > 0)) return ys;
  let last = 0, count = 0;
  return ys.map((v) => {
    if (v == null || !Number.isFinite(v)) return v;
    last = last * weight + (1 - weight) * v;
    count += 1;
    return last / (1 - weight ** count);
  });
}

function fmt(v) {
  if (v == null || !Number.isFinite(v)) return "—";
  const m = Math.abs(v);
  return m && (m >= 1e5 || m < 1e-3) ? v.toExponential(2) : String(Number(v.toPrecision(4)));
}

// Tick labels of an axis, the page's one rule (tui/format.py's tick_labels is the console's): evenly spaced
// ticks get the decimals their step needs for neighbours to differ (4.0365 4.0370), or SI or scientific
// notation where the axis reads shorter so (3.2k, 1e-3); uneven ones (a log scale) the fewest significant
// digits that tell neighbours apart.
const SI = ["", "k", "M", "G", "T", "P"];
function places(x) {  // the decimals x needs to be written exactly (give or take a float's rounding)
  for (let d = 0; d < 15; d++) if (Math.abs(Number(x.toFixed(d)) - x) <= Math.abs(x) * 1e-6) return d;
  return 15;
}
function scientific(v, digits) {
  if (v === 0) return "0";
  let e = Math.floor(Math.log10(Math.abs(v)));
  const mantissa = () => (v / 10 ** e).toFixed(digits ?? places(Math.abs(v / 10 ** e)));
  if (Math.abs(Number(mantissa())) >= 10) e += 1;  // rounded up to the next power
  return `${mantissa()}e${e}`;
}
function evenTicks(vs, step) {
  const top = Math.max(...vs.map(Math.abs)), len = (ls) => ls.join("").length;
  const fixed = vs.map((v) => v === 0 ? "0" : v.toFixed(places(step)));
  let compact = null;
  if (top >= 1e3) {
    const k = Math.min(Math.floor(Math.log10(top) / 3), SI.length - 1), unit = 1000 ** k;
    compact = vs.map((v) => v === 0 ? "0" : (v / unit).toFixed(places(step / unit)) + SI[k]);
  } else if (top > 0 && top < 1e-2) compact = vs.map((v) => scientific(v));
  return compact && len(compact) < len(fixed) ? compact : fixed;
}
function fewestDigits(vs) {
  let labels = [];
  for (let digits = 1; digits <= 15; digits++) {
    labels = vs.map((v) => {
      const plain = v === 0 ? "0" : String(Number(v.toPrecision(digits))), sci = scientific(v, digits - 1);
      return sci.length < plain.length ? sci : plain;
    });
    if (labels.every((l, i) => i === 0 || l !== labels[i - 1])) break;
  }
  return labels;
}
function tickLabels(splits) {
  const vs = splits.map(Number);
  if (!vs.length || !vs.every(Number.isFinite)) return vs.map(fmt);
  const gaps = vs.slice(1).map((v, i) => v - vs[i]).filter((g) => g > 0);
  return gaps.length && Math.max(...gaps) <= 1.5 * Math.min(...gaps) ? evenTicks(vs, Math.min(...gaps)) : fewestDigits(vs);
}

// The axes of every chart of the page: tick labels by the one rule (a clock's on a time axis), each axis'
// labels on its chart's box for tests and the curious (data-xticks, data-yticks).
function chartAxes(time = false) {
  const values = (which) => (u, splits) => {
    const labels = tickLabels(splits), box = u.root.closest(".chart");
    if (box) box.dataset[which] = labels.join(" ");
    return labels;
  };
  return [{stroke: "#7d8590", grid: {stroke: "#2a3038"}, ...(time ? {} : {values: values("xticks")})},
          {stroke: "#7d8590", grid: {stroke: "#2a3038"}, size: 60, values: values("yticks")}];
}

function el(tag, props = {}, ...children) {  // text only ever as textContent
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

function download(name, href) {
  const a = el("a", {href, download: name});
  document.body.append(a); a.click(); a.remove();
}

class Chart {
  constructor(view, title, names) {
    this.view = view; this.title = title; this.names = names;
    this.lines = new Map();  // "run_id key" -> {run, key, labels, x: [], y: []}
    this.log = false; this.loaded = false; this.plot = null; this.signature = null; this.shown = [];
    this.el = el("div", {className: "chart"});
    this.el.dataset.title = title;
    this.el.dataset.state = "loading";
    const button = (text, tip, fn) => { const b = el("button", {title: tip}, text); b.addEventListener("click", fn); return b; };
    this.logButton = button("log", "log scale", () => { this.log = !this.log; this.logButton.classList.toggle("on", this.log); this.render(); });
    this.fullButton = button("full", "full screen: this chart enlarged to the page (Esc or this button again closes)", () => this.setFull(!this.full));
    this.el.append(
      el("h3", {}, el("span", {}, el("span", {className: "title"}, title), " ", el("small", {className: "note"})),
        el("span", {className: "tools"}, this.logButton, this.fullButton, button("png", "download this chart as an image", () => this.png()),
          button("csv", "download this chart's points", () => this.csv()), button("×", "remove", () => view.remove(this)))),
      el("div", {className: "plot"}, el("p", {className: "placeholder"}, "loading…")),
      el("div", {className: "legend"}));
  }

  async load(run, after) {
    for (const name of this.names) {
      const params = new URLSearchParams({x: this.view.axis, max_points: "2000"});
      if (after != null) params.set("after", String(after));
      let page = `/runs/${encodeURIComponent(run)}/series/${encodeURIComponent(name)}?` + params;
      while (page) {
        const res = await request(page);
        const reply = await res.json();
        for (const s of reply.series) {
          const id = s.run_id + " " + s.key;
          let line = this.lines.get(id);
          if (!line) this.lines.set(id, line = {run: s.run_id, key: s.key, labels: s.labels, x: [], y: []});
          const last = line.x.length ? line.x[line.x.length - 1] : -Infinity;
          s.x.forEach((x, i) => { if (x > last || after == null) { line.x.push(x); line.y.push(s.y[i]); } });
        }
        page = nextPage(res);
      }
    }
  }

  lastX(run) {
    let last = null;
    for (const line of this.lines.values()) {
      if (line.run === run && line.x.length) last = Math.max(last ?? -Infinity, line.x[line.x.length - 1]);
    }
    return last;
  }

  xExtent() {  // [min, max] of the chart's x (after each run's shift), or null
    let lo = Infinity, hi = -Infinity;
    for (const l of this.lines.values()) {
      if (!l.x.length) continue;
      lo = Math.min(lo, l.x[0] - this.view.shift(l.run)); hi = Math.max(hi, l.x[l.x.length - 1] - this.view.shift(l.run));
    }
    return lo <= hi ? [lo, hi] : null;
  }

  note(lines, drawn) {
    // What the lines do not show: runs of the view without this series, an x axis its points lack, NaN/inf.
    const notes = [];
    if (!drawn.length) notes.push(`no point of this series has a ${this.view.axis}`);
    const missing = this.view.runs.filter((r) => drawn.length && !drawn.includes(r)).map((r) => this.view.runLabel(r));
    if (missing.length) notes.push("not in " + missing.join(", "));
    const bad = lines.reduce((n, l) => n + l.y.filter((y) => y == null).length, 0);
    if (bad) notes.push(`${bad} NaN/inf`);
    this.el.dataset.note = notes.join("; ");
    return notes.join(" · ");
  }

  styleOf(lines, i) {  // one colour per run where runs are overlaid (its lines dashed apart), else per line
    const l = lines[i], runs = this.view.runs;
    if (runs.length < 2) return {stroke: PALETTE[i % PALETTE.length]};
    const nth = lines.filter((m, j) => j < i && m.run === l.run).length;
    return {stroke: PALETTE[runs.indexOf(l.run) % PALETTE.length], dash: DASHES[nth % DASHES.length]};
  }

  labelOf(line) {
    // As the console names a line (tui/widgets/chart.py, ChartPanel._short): its labels, else its series as the
    // chart names it: what a "*" pattern leaves (entropy's "op"), nothing where the chart is of that one series
    // (its title says it: a line of "accuracy" is "env=0", never "epoch_completed.accuracy env=0").
    const labels = Object.entries(line.labels).map(([k, v]) => `${k}=${v}`);  // the server shows a rank only where a run has several
    const series = line.key.split("{")[0];
    const def = ((typeof chartDefs !== "undefined" && chartDefs) ? chartDefs.charts : []).find((c) => c.title === this.title);
    const patterns = def ? def.names : this.names;
    const head = (p) => p.split("*")[0];
    const star = patterns.find((p) => p.includes("*") && series.startsWith(head(p)) && series.length > head(p).length);
    const name = star ? series.slice(head(star).length) : patterns.length === 1 && patterns[0] === series ? "" : series;
    const own = [name, ...labels].join(" ").trim();
    return this.view.runs.length > 1 ? `${this.view.runLabel(line.run)} ${own}`.trim() : own || this.title;
  }

  render() {
    const lines = [...this.lines.values()].sort((a, b) =>
      (this.view.runs.indexOf(a.run) - this.view.runs.indexOf(b.run)) || a.key.localeCompare(b.key));
    this.el.dataset.points = String(lines.reduce((n, l) => n + l.x.length, 0));
    const drawn = [...new Set(lines.filter((l) => l.x.length).map((l) => l.run))];
    this.el.dataset.runs = [...drawn].sort().join(",");
    if (!lines.length) {
      this.el.dataset.state = this.loaded ? "empty" : "loading";
      this.el.querySelector(".placeholder").textContent = this.loaded ? "no such series in these runs (yet)" : "loading…";
      return;
    }
    this.el.hidden = false;
    this.el.dataset.state = "ready";
    this.el.querySelector(".note").textContent = this.note(lines, drawn);
    const weight = this.view.smoothing, log = this.log;
    const clean = (ys) => log ? ys.map((y) => (y != null && y > 0 ? y : null)) : ys;
    const cols = [];
    const series = [{label: this.view.sinceStart ? "s since start" : this.view.axis}];
    this.shown = [];
    lines.forEach((l, i) => {
      const x = l.x.map((v) => v - this.view.shift(l.run)), style = this.styleOf(lines, i);
      const finite = l.y.filter((y) => y != null).length;
      const single = {show: finite === 1, size: 7, fill: style.stroke};  // one point: a dot, not nothing
      if (weight > 0) {
        cols.push([x, clean(l.y)]);
        series.push({...style, width: 1, alpha: 0.25, spanGaps: false, points: single});
      }
      cols.push([x, clean(smooth(l.y, weight))]);
      series.push({...style, width: 1.75, spanGaps: false, points: single});
      this.shown.push({label: this.labelOf(l), run: l.run, colour: style.stroke, dash: style.dash, index: series.length - 1,
                       last: smooth(l.y, weight).filter((y) => y != null).pop()});
    });
    const data = uPlot.join(cols);
    const signature = JSON.stringify([series.map((s) => [s.stroke, s.dash, s.alpha, s.points && s.points.show]), log, this.view.axis]);
    if (this.plot && this.signature === signature) {
      this.plot.setData(data, false);
      this.applyRange();
      this.legend(this.plot.cursor.idx);
      return;
    }
    this.signature = signature;
    if (this.plot) this.plot.destroy();
    this.el.querySelector(".plot").textContent = "";
    this.plot = new uPlot({
      ...this.plotSize(), series, legend: {show: false},
      scales: {x: {time: this.view.axis === "ts" && !this.view.sinceStart, auto: false}, y: log ? {distr: 3} : {}},
      axes: chartAxes(this.view.axis === "ts" && !this.view.sinceStart),
      cursor: {y: false, sync: {key: SYNC_KEY, setSeries: false, scales: ["x", null]}, drag: {x: true, y: false, setScale: false}, bind: {dblclick: () => null}},
      hooks: {
        draw: [(u) => drawMarkers(u, this.view, drawn)],
        setCursor: [(u) => this.legend(u.cursor.idx)],
        setSelect: [(u) => {
          if (u.select.width > 4) this.view.zoom([u.posToVal(u.select.left, "x"), u.posToVal(u.select.left + u.select.width, "x")]);
          u.setSelect({left: 0, top: 0, width: 0, height: 0}, false);
        }],
      },
    }, data, this.el.querySelector(".plot"));
    this.plot.over.addEventListener("dblclick", () => this.view.zoom(null));
    this.applyRange();
    this.legend(null);
  }

  plotSize() {  // the page's width in a column of charts, or the whole window while full screen
    if (this.full) return {width: Math.max(300, window.innerWidth - 48), height: Math.max(240, window.innerHeight - 130)};
    return {width: Math.max(300, this.el.clientWidth - 16), height: 240};
  }

  setFull(on) {  // one chart at a time enlarged to the page; the others stay as they were beneath it
    if (on && fullChart && fullChart !== this) fullChart.setFull(false);
    this.full = on;
    fullChart = on ? this : fullChart === this ? null : fullChart;
    this.el.classList.toggle("full", on);
    this.el.dataset.full = on ? "1" : "";
    this.fullButton.classList.toggle("on", on);
    document.body.classList.toggle("has-full", on);
    if (this.plot) this.plot.setSize(this.plotSize());
  }

  applyRange() {
    const range = this.view.xRange();
    if (this.plot && range) this.plot.setScale("x", {min: range[0], max: range[1] > range[0] ? range[1] : range[0] + 1});
  }

  legend(idx) {
    // Each line: its colour, its name, its value at the cursor; its last value while the cursor is elsewhere.
    const box = this.el.querySelector(".legend");
    box.dataset.at = idx == null ? "last" : "cursor";
    const rows = this.shown.map((s) => {
      const v = idx == null ? s.last : this.plot.data[s.index][idx];
      const swatch = el("span", {className: "swatch"});
      swatch.style.borderTop = `3px ${s.dash ? "dashed" : "solid"} ${s.colour}`;
      const row = el("span", {className: "entry"}, swatch, el("span", {className: "name"}, s.label), " ", el("b", {className: "value"}, fmt(v)));
      row.dataset.run = s.run; row.dataset.colour = s.colour;
      return row;
    });
    if (idx != null && this.plot) {
      const x = this.plot.data[0][idx];
      rows.unshift(el("span", {className: "x"}, `${this.view.sinceStart ? "s" : this.view.axis} ${this.view.axis === "ts" && !this.view.sinceStart ? new Date(x * 1000).toLocaleTimeString() : fmt(x)}`));
    }
    box.replaceChildren(...rows);
  }

  png() {
    if (this.plot) download(`${this.title}.png`, this.plot.ctx.canvas.toDataURL("image/png"));
  }

  csv() {
    if (!this.plot) return;
    const head = [this.view.axis, ...this.shown.map((s) => s.label)].map(csvCell);  // a label is a run's text
    const rows = this.plot.data[0].map((x, i) => [x, ...this.shown.map((s) => this.plot.data[s.index][i] ?? "")]
      .map(csvCell).join(","));
    download(`${this.title}.csv`, URL.createObjectURL(new Blob([[head.join(","), ...rows].join("\n") + "\n"], {type: "text/csv"})));
  }
}

// The chart shown full screen, if any: Escape puts it back, a resized window resizes it.
let fullChart = null;
document.addEventListener("keydown", (e) => { if (e.key === "Escape" && fullChart) fullChart.setFull(false); });
window.addEventListener("resize", () => { if (fullChart && fullChart.plot) fullChart.plot.setSize(fullChart.plotSize()); });

function drawMarkers(u, view, runs) {
  // A thin line per marker of the runs this chart draws; a label only where it does not run into the previous one.
  const ctx = u.ctx;
  ctx.save();
  ctx.font = "11px system-ui, sans-serif";
  ctx.textAlign = "left";  // uPlot leaves the y axis' right alignment set: a label would run left over its line
  ctx.globalAlpha = 0.7;
  let free = -Infinity, drawn = 0;
  const marks = view.markers.filter((m) => m[view.axis] != null && runs.includes(m.run)).sort((a, b) => a[view.axis] - b[view.axis]);
  for (const m of marks) {
    const px = Math.round(u.valToPos(m[view.axis] - view.shift(m.run), "x", true));
    if (px < u.bbox.left || px > u.bbox.left + u.bbox.width) continue;
    ctx.strokeStyle = ctx.fillStyle = MARK_COLORS[m.kind] || "#7d8590";
    ctx.setLineDash([2, 4]);
    ctx.beginPath(); ctx.moveTo(px, u.bbox.top); ctx.lineTo(px, u.bbox.top + u.bbox.height); ctx.stroke();
    const text = view.runs.length > 1 ? `${m.label} (${view.runLabel(m.run)})` : m.label;
    const w = ctx.measureText(text).width, right = u.bbox.left + u.bbox.width;
    // Right of its line, or left of it where it would run off the plot; only where the previous one ended.
    const at = px + 3 + w <= right ? px + 3 : Math.max(u.bbox.left, px - 3 - w);
    if (at >= free) {
      ctx.fillText(text, at, u.bbox.top + 12);
      free = at + w + 12;
    }
    drawn++;
  }
  ctx.restore();
  const box = u.root.closest(".chart");
  if (box) box.dataset.marks = String(drawn);
}

// Short labels for runs: each one's name, with the shortest suffix of its id that tells it from the others.
function shortLabels(runs) {
  const out = {};
  const name = (r) => r.name || r.run_id;
  for (const r of runs) {
    const same = runs.filter((o) => name(o) === name(r));
    if (same.length === 1) { out[r.run_id] = name(r); continue; }
    let n = 1;
    while (n < r.run_id.length && same.some((o) => o !== r && o.run_id.slice(-n) === r.run_id.slice(-n))) n++;
    out[r.run_id] = `${name(r)} ·${r.run_id.slice(-n)}`;
  }
  return out;
}
