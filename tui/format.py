"""Pure text helpers: one line per event, sparklines, numbers, and the event-log filter."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

from leyline import (
    AlertChanged,
    AnomalyDetected,
    CommandStatusChanged,
    ConfigUpdated,
    DebugLayerStats,
    Event,
    EventKind,
    EventsDropped,
    GradientHealth,
    Heartbeat,
    Histograms,
    HubHealth,
    Metrics,
    Payload,
    PhaseTiming,
    ProfileCompleted,
    ProfileStarted,
    RunFinished,
    RunResumed,
    RunStarted,
    Severity,
    SummaryUpdated,
    SystemMetrics,
    TelemetryLevelChanged,
    TextLogged,
)
from leyline.enums import Kind
from leyline.esper import (
    EpochCompleted,
    EsperKind,
    LSTMHealth,
    PPOUpdate,
    SeedFossilized,
    SeedGateEvaluated,
    SeedGerminated,
    SeedPruned,
    SeedStageChanged,
)
from leyline.esper.panels import SeedPayload, seed_what

SPARK_CHARS = "▁▂▃▄▅▆▇"
"""No full block: a browser (``--web``) draws block glyphs to the cell's edges, so rows of sparklines with
full blocks touch and merge into one shape; the top eighth of every cell stays clear."""

# Seven characters of log prefix per kind: the text after it is what an operator reads.
SHORT_KIND: dict[Kind, str] = {
    EventKind.RUN_STARTED: "run", EventKind.RUN_FINISHED: "run", EsperKind.EPOCH_COMPLETED: "epoch",
    EsperKind.SEED_GERMINATED: "seed", EsperKind.SEED_STAGE_CHANGED: "seed", EsperKind.SEED_GATE_EVALUATED: "gate",
    EsperKind.SEED_FOSSILIZED: "seed", EsperKind.SEED_PRUNED: "seed", EsperKind.PPO_UPDATE: "ppo",
    EventKind.GRADIENT_HEALTH: "grad", EsperKind.LSTM_HEALTH: "lstm", EventKind.ANOMALY_DETECTED: "ANOMALY",
    EventKind.TELEMETRY_LEVEL_CHANGED: "level", EventKind.DEBUG_LAYER_STATS: "layers",
    EventKind.PROFILE_STARTED: "profile", EventKind.PROFILE_COMPLETED: "profile", EventKind.PHASE_TIMING: "timing",
    EventKind.COMMAND_STATUS: "command", EventKind.EVENTS_DROPPED: "DROPPED", EventKind.HUB_HEALTH: "hub",
    EventKind.HEARTBEAT: "beat", EventKind.RUN_RESUMED: "run", EventKind.ALERT: "ALERT", EventKind.METRICS: "metrics",
    EventKind.SUMMARY: "summary", EventKind.CONFIG: "config", EventKind.SYSTEM: "system", EventKind.TEXT: "text",
    EventKind.HISTOGRAM: "hist",
}


def num(value: float | None, digits: int = 3) -> str:
    """A measured number, or an em dash where it was not measured (``None`` is never 0.0)."""
    if value is None:
        return "—"
    if value != value:  # NaN: show it, it is the interesting case
        return "nan"
    if abs(value) >= 1e4 or (value != 0 and abs(value) < 10 ** -digits):
        return f"{value:.{max(digits - 1, 1)}e}"
    return f"{value:.{digits}f}"


def clock(ts: float, fmt: str) -> str:
    """A wall-clock time as ``fmt`` says, or ``?`` where no clock reaches it (a run's ``ts`` of 1e300: stored
    events keep what they were sent with)."""
    try:
        return time.strftime(fmt, time.localtime(ts))
    except (OverflowError, OSError, ValueError):
        return "?"


def pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:5.1f}%"


def short_id(command_id: str) -> str:
    """Enough of a command id to tell commands apart on screen (the filter still finds it)."""
    return command_id[:8]


def sparkline(values: Sequence[float | None], width: int) -> str:
    """The last ``width`` values as block characters scaled to their own min..max; gaps as spaces."""
    tail = list(values)[-width:] if width > 0 else []
    finite = [v for v in tail if v is not None and v == v]
    if not finite:
        return " " * len(tail)
    lo, hi = min(finite), max(finite)
    span = hi - lo
    top = len(SPARK_CHARS) - 1
    out = []
    for v in tail:
        if v is None or v != v:
            out.append(" ")
        elif span == 0:
            out.append(SPARK_CHARS[top // 2])
        else:
            out.append(SPARK_CHARS[round((v - lo) / span * top)])
    return "".join(out)


def _run_started(p: RunStarted) -> str:
    return f"run {p.name!r} started on {p.device}"


def _run_finished(p: RunFinished) -> str:
    return f"run {p.status} after {p.duration_s:.1f}s"


def _run_resumed(p: RunResumed) -> str:
    return f"run resumed from {p.checkpoint} (round {p.round}, step {p.checkpoint_step})"


def _epoch(p: EpochCompleted) -> str:
    action = f" action={p.action}" if p.action else ""
    return f"acc {pct(p.accuracy)} val_loss {num(p.val_loss)} reward {num(p.reward)}{action}"


def _ppo(p: PPOUpdate) -> str:
    return (f"round {p.round} pi {num(p.policy_loss)} v {num(p.value_loss)} kl {num(p.approx_kl, 4)} "
            f"clip {num(p.clip_fraction, 2)} ev {num(p.explained_variance, 2)}")


def _command(p: CommandStatusChanged) -> str:
    at = f" at step {p.applied_step}" if p.applied_step is not None else ""
    msg = f": {p.message}" if p.message else ""
    return f"{p.action.value} {short_id(p.command_id)} {p.status.value}{at}{msg}"


def _level(p: TelemetryLevelChanged) -> str:
    until = f" until epoch {p.until_epoch}" if p.until_epoch is not None else ""
    return f"telemetry {p.previous.value} → {p.level.value}{until} {p.reason}".rstrip()


def _hub(p: HubHealth) -> str:
    return (f"hub queue {p.queue_depth} sent {p.sent} acked {p.acked} "
            f"dropped {sum(p.dropped.values())} reconnects {p.reconnects}")


def _system(p: SystemMetrics) -> str:
    parts = []
    if p.cpu is not None:
        parts.append(f"cpu {num(p.cpu.percent, 1)}%")
    if p.memory is not None:
        parts.append(f"ram {num(p.memory.percent, 1)}%")
    parts.extend(f"gpu{g.name} {num(g.utilization, 0)}% {num(g.power_w, 0)} W" for g in p.gpu[:4])
    return "system " + (" ".join(parts) or "sampled")


def _seed(p: Payload) -> str:
    return f"{p.slot} {p.seed_id} {seed_what(p)}" if isinstance(p, SeedPayload) else ""


_P = TypeVar("_P", bound=Payload)


def _entry(kind: type[_P], fmt: Callable[[_P], str]) -> tuple[type[Payload], Callable[[Payload], str]]:
    """One row of the table below, ``fmt`` checked against ``kind``: ``describe`` calls it only with a ``kind``."""
    return kind, cast(Callable[[Payload], str], fmt)


_DESCRIBE: dict[type[Payload], Callable[[Payload], str]] = dict([
    _entry(RunStarted, _run_started),
    _entry(RunFinished, _run_finished),
    _entry(RunResumed, _run_resumed),
    _entry(EpochCompleted, _epoch),
    *((kind, _seed) for kind in (SeedGerminated, SeedStageChanged, SeedGateEvaluated, SeedFossilized, SeedPruned)),
    _entry(PPOUpdate, _ppo),
    _entry(GradientHealth, lambda p: f"{p.scope} grad norm {num(p.global_norm)} nonfinite {p.nonfinite}"),
    _entry(LSTMHealth, lambda p: f"lstm h {num(p.h_norm)} c {num(p.c_norm)}{' NONFINITE' if p.nonfinite else ''}"),
    _entry(AnomalyDetected, lambda p: f"{p.anomaly}: {p.detail}{' (auto-escalated)' if p.auto_escalated else ''}"),
    _entry(TelemetryLevelChanged, _level),
    _entry(DebugLayerStats, lambda p: f"{p.model} layer stats ({len(p.layers)} tensors)"),
    _entry(ProfileStarted, lambda p: (f"profile {p.window} started for the next PPO update" if p.target == "update"
                                      else f"profile {p.window} started for {p.batches} batches")),
    _entry(ProfileCompleted, lambda p: f"profile {p.window} done in {p.wall_s:.2f}s: {p.trace_path}"),
    _entry(PhaseTiming, lambda p: f"round {p.round} env-epochs/s {num(p.env_epochs_per_s, 1)}"),
    _entry(CommandStatusChanged, _command),
    _entry(EventsDropped, lambda p: f"hub dropped {p.total} events: {p.counts}"),
    _entry(HubHealth, _hub),
    _entry(Heartbeat, lambda p: f"alive {p.uptime_s:.0f}s"),
    _entry(AlertChanged, lambda p: f"{p.state} {p.rule}: {p.message}"),
    _entry(SystemMetrics, _system),
    _entry(Histograms, lambda p: f"{len(p.histograms)} histograms: "
                                 + ", ".join(h.name for h in p.histograms[:4])),
    _entry(TextLogged, lambda p: f"{p.tag}: {''.join(c if c.isprintable() else ' ' for c in p.text[:200])}"),
    _entry(Metrics, lambda p: " ".join(f"{k}={v if isinstance(v, str) else num(v, 4)}"
                                       for k, v in list(p.values.items())[:8])),
    _entry(ConfigUpdated, lambda p: " ".join(f"{k}={v}" for k, v in list(p.config.items())[:8])),
    _entry(SummaryUpdated, lambda p: " ".join([
        *(f"{k}={v if isinstance(v, str) else num(v, 4)}" for k, v in p.values.items()),
        *(f"{k} best at its {d}" for k, d in p.directions.items())][:8]) or "summary"),
])


def describe(event: Event) -> str:
    """A short human sentence for one event's payload."""
    fmt = _DESCRIBE.get(type(event.payload))
    return fmt(event.payload) if fmt else event.kind.value


@dataclass(frozen=True, slots=True)
class LogLine:
    """One event as the log shows it; kept instead of the event so the log's memory is small."""

    rank: int
    seq: int
    epoch: int
    env: int | None
    kind: Kind
    severity: Severity
    text: str

    @classmethod
    def of(cls, event: Event) -> LogLine:
        return cls(event.rank, event.seq, event.epoch, event.env, event.kind, event.severity,
                   describe(event))

    @property
    def plain(self) -> str:
        env = f"env{self.env}" if self.env is not None else ""
        return f"e{self.epoch:<3d} {env:<5} {SHORT_KIND.get(self.kind, self.kind.value):<7} {self.text}"


@dataclass(frozen=True)
class LogFilter:
    """Space-separated terms that must all match: ``word`` (substring), ``!word`` (absent),
    ``kind:ppo`` (kind contains), ``sev:warning`` (at least this severity), ``env:2``."""

    text: str = ""

    def matches(self, line: LogLine) -> bool:
        return all(_term_matches(term, line) for term in self.text.lower().split())


def _term_matches(term: str, line: LogLine) -> bool:
    if term.startswith("!") and len(term) > 1:
        return not _term_matches(term[1:], line)
    key, sep, value = term.partition(":")
    if sep and key == "kind":
        return value in line.kind.value or value in SHORT_KIND[line.kind]
    if sep and key == "sev":
        wanted = next((s for s in Severity if s.value.startswith(value)), None)
        return wanted is not None and line.severity.rank >= wanted.rank
    if sep and key == "env":
        return line.env is not None and str(line.env) == value
    return term in line.plain.lower() or term in line.kind.value


_SI = ("", "k", "M", "G", "T", "P")
_MOST_PLACES = 15


def _places(x: float) -> int:
    """The decimals ``x`` needs to be written exactly (give or take a float's rounding): a tick step's, so
    that ticks a step apart read apart."""
    return next((d for d in range(_MOST_PLACES) if abs(round(x, d) - x) <= abs(x) * 1e-6), _MOST_PLACES)


def _scientific(v: float, places: int | None = None) -> str:
    """``v`` as ``m e x`` with ``places`` decimals in the mantissa, else those it needs (``1e-3``, ``2.5e-4``)."""
    if v == 0:
        return "0"
    e = math.floor(math.log10(abs(v)))
    places = _places(v / 10 ** e) if places is None else places
    m = f"{v / 10 ** e:.{places}f}"
    if abs(float(m)) >= 10:  # rounded up to the next power
        e += 1
        m = f"{v / 10 ** e:.{places}f}"
    return f"{m}e{e}"


def _even_ticks(values: Sequence[float], step: float) -> list[str]:
    top = max(abs(v) for v in values)
    fixed = ["0" if v == 0 else f"{v:.{_places(step)}f}" for v in values]
    compact: list[str] | None = None
    if top >= 1e3:
        k = min(int(math.log10(top) // 3), len(_SI) - 1)
        unit = 1000.0 ** k
        compact = ["0" if v == 0 else f"{v / unit:.{_places(step / unit)}f}{_SI[k]}" for v in values]
    elif 0 < top < 1e-2:
        compact = [_scientific(v) for v in values]
    return compact if compact is not None and len("".join(compact)) < len("".join(fixed)) else fixed


def _fewest_digits(values: Sequence[float]) -> list[str]:
    labels: list[str] = []
    for digits in range(1, _MOST_PLACES + 1):
        labels = []
        for v in values:
            plain = "0" if v == 0 else f"{float(f'{v:.{digits}g}'):.{_MOST_PLACES}f}".rstrip("0").rstrip(".")
            sci = _scientific(v, digits - 1)
            labels.append(sci if len(sci) < len(plain) else plain)
        if all(a != b for a, b in zip(labels, labels[1:], strict=False)):
            break
    return labels


def tick_labels(values: Sequence[float]) -> list[str]:
    """An axis' tick labels, the console's one rule (the web page's is ``tickLabels`` in its chart.js): evenly
    spaced ticks get the decimals their step needs for neighbours to differ (``4.0365 4.0370``), or SI or
    scientific notation where the axis reads shorter so (``3.2k``, ``1e-3``); uneven ones (a log scale) the
    fewest significant digits that tell neighbours apart."""
    finite = [float(v) for v in values if math.isfinite(v)]
    if len(finite) != len(values) or not finite:
        return [num(v) for v in values]
    gaps = [b - a for a, b in zip(finite, finite[1:], strict=False) if b - a > 0]
    if not gaps:
        return _fewest_digits(finite)
    if max(gaps) <= 1.5 * min(gaps):
        return _even_ticks(finite, min(gaps))
    return _fewest_digits(finite)
