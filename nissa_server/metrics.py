"""Prometheus metrics on a registry of the app's own (several apps can live in one process)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)


class _CommandsByStatus(Collector):
    def __init__(self, read: Callable[[], dict[str, int]], errors: tuple[type[Exception], ...]) -> None:
        self._read = read
        self._errors = errors

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("nissa_commands", "Commands stored, by status", labels=["status"])
        try:
            counts = self._read()
        except self._errors as err:
            logger.warning("commands by status unavailable: %s", err)
            counts = {}
        for status, n in sorted(counts.items()):
            family.add_metric([status], n)
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

    def connection_refused(self, reason: str) -> None:
        """Count a connection a limit refused or closed (called by the protocols, see ``protocols``)."""
        self.refused.labels(reason).inc()

    def bind(self, *, watchers: Callable[[], float], watcher_queue: Callable[[], float],
             writer_queue: Callable[[], float], commands: Callable[[], dict[str, int]],
             errors: tuple[type[Exception], ...]) -> None:
        """Attach the gauges that are read from live state at scrape time."""
        self.watchers.set_function(watchers)
        self.watcher_queue.set_function(watcher_queue)
        self.writer_queue.set_function(writer_queue)
        self.registry.register(_CommandsByStatus(commands, errors))
