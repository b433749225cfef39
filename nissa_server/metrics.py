"""Prometheus metrics on a registry of the app's own (several apps can live in one process).

Every label set is bounded: reasons, statuses and route templates, never a run id or a raw path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, PlatformCollector, ProcessCollector
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

# Seconds, from a fraction of a millisecond (a commit on a quiet server) to tens of seconds (a stalled one).
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Events in one transaction: one small frame up to the writer's cap (``Store.max_rows_per_commit``).
BATCH_BUCKETS = (1, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 16_000)


class _ByStatus(Collector):
    """A gauge family read from the database at scrape time: how many of something are in each status (none
    while ``errors``, the database being away, say they cannot be read)."""

    def __init__(self, name: str, documentation: str, read: Callable[[], dict[str, int]],
                 errors: tuple[type[Exception], ...]) -> None:
        self._name, self._doc, self._read, self._errors = name, documentation, read, errors

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self._name, self._doc, labels=["status"])
        try:
            counts = self._read()
        except self._errors:  # the database is away: no counts (the store's health says so, once)
            counts = {}
        for status, n in sorted(counts.items()):
            family.add_metric([status], n)
        yield family


class _Levels(Collector):
    """A gauge family read from live state at scrape time, one labelled value each: ``read`` gives them."""

    def __init__(self, name: str, documentation: str, label: str,
                 read: Callable[[], Iterable[tuple[str, float]]]) -> None:
        self._name, self._doc, self._label, self._read = name, documentation, label, read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self._name, self._doc, labels=[self._label])
        for value_label, value in self._read():
            family.add_metric([value_label], value)
        yield family


class Metrics:
    """Every series the server exports."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.ingested = Counter("nissa_events_ingested", "Events stored from ingest", registry=r)
        self.duplicates = Counter("nissa_events_duplicate", "Events received again and dropped", registry=r)
        self.rejected = Counter("nissa_frames_rejected", "Ingest frames refused, by reason", ["reason"],
                                registry=r)
        self.ingest_connections = Gauge("nissa_ingest_connections", "Open ingest connections", registry=r)
        self.watchers = Gauge("nissa_watchers", "Open watch connections", registry=r)
        self.watcher_queue = Gauge("nissa_watcher_queue_events", "Events queued for all watchers", registry=r)
        self.lagged = Counter("nissa_watchers_lagged", "Watchers closed for falling behind", registry=r)
        self.writer_queue = Gauge("nissa_writer_queue_batches", "Writes waiting for the store", registry=r)
        self.series_waiting = Gauge("nissa_series_waiting_events",
                                    "Events this server stored and the series pass has not charted yet", registry=r)
        self.commands_created = Counter("nissa_commands_created", "Commands queued by /escalate", registry=r)
        self.conflicts = Counter("nissa_events_conflicting", "Events re-sent with a stored seq but other content "
                                 "(their connection is closed with 4422)", registry=r)
        self.alerts_fired = Counter("nissa_alerts_fired", "Alerts opened by this server, by rule and condition",
                                    ["rule", "condition"], registry=r)
        self.alerts_resolved = Counter("nissa_alerts_resolved", "Alerts resolved by this server, by rule and "
                                       "condition", ["rule", "condition"], registry=r)
        self.alert_deliveries = Counter("nissa_alert_deliveries", "Notification attempts by this server, by "
                                        "destination and result (sent, retry, failed, rate_limited)",
                                        ["destination", "result"], registry=r)
        self.refused = Counter("nissa_connections_refused", "Connections refused or closed by a limit, by reason",
                               ["reason"], registry=r)
        self.ingest_commit = Histogram(
            "nissa_ingest_commit_seconds", "From an ingest frame's arrival to the durable commit of its events "
            "(its ack follows)", buckets=LATENCY_BUCKETS, registry=r)
        self.watch_send = Histogram(
            "nissa_watch_send_seconds", "From the publication of committed events (their commit on SQLite, its "
            "notification on PostgreSQL) to their send to a watcher, per watcher", buckets=LATENCY_BUCKETS,
            registry=r)
        self.http_request = Histogram(
            "nissa_http_request_seconds", "HTTP request latency, by route template, method and status class",
            ["route", "method", "status"], buckets=LATENCY_BUCKETS, registry=r)
        self.writer_batch = Histogram(
            "nissa_writer_batch_events", "Events in one writer transaction", buckets=BATCH_BUCKETS, registry=r)
        self.writer_commit = Histogram(
            "nissa_writer_commit_seconds", "One writer transaction, begin to durable commit",
            buckets=LATENCY_BUCKETS, registry=r)
        self.loop_lag = Histogram(
            "nissa_event_loop_lag_seconds", "How late the event loop runs a timer (its responsiveness)",
            buckets=LATENCY_BUCKETS, registry=r)
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)

    def connection_refused(self, reason: str) -> None:
        """Count a connection a limit refused or closed (called by the protocols, see ``protocols``)."""
        self.refused.labels(reason).inc()

    def committed(self, events: int, seconds: float) -> None:
        """One writer transaction of ``events`` events took ``seconds``."""
        if events:
            self.writer_batch.observe(events)
        self.writer_commit.observe(seconds)

    def bind(self, *, watchers: Callable[[], float], watcher_queue: Callable[[], float],
             writer_queue: Callable[[], float], series_waiting: Callable[[], float],
             by_status: dict[str, Callable[[], dict[str, int]]], errors: tuple[type[Exception], ...],
             degraded: Callable[[], Iterable[tuple[str, float]]]) -> None:
        """Attach the gauges that are read from live state at scrape time; ``by_status`` reads the counts of
        ``commands``, ``runs`` and ``ranks`` by status; ``degraded`` says which parts of the server work."""
        self.registry.register(_Levels(
            "nissa_degraded", "1 while a part of the server does not work (the database, or a background task: "
            "maintenance, alert-sweep, alert-delivery, series-pass …), else 0", "part", degraded))
        self.watchers.set_function(watchers)
        self.watcher_queue.set_function(watcher_queue)
        self.writer_queue.set_function(writer_queue)
        self.series_waiting.set_function(series_waiting)
        docs = {"commands": "Commands stored, by status", "runs": "Runs stored, by status",
                "ranks": "Ranks of runs stored, by status", "alerts": "Alerts stored, by status (firing, resolved)"}
        for what, read in by_status.items():
            self.registry.register(_ByStatus(f"nissa_{what}", docs[what], read, errors))

