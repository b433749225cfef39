"""``NissaHub``: the training loop's line to its operators.

``emit`` only appends to a bounded deque (no lock, no I/O, no serialization) and never
raises. One named daemon worker thread assigns ``seq`` after every drop decision, so the
log has no gaps, builds each envelope, encodes it and appends it to the run's local log.
A sender thread (see ``sender.py``) streams that log to the server. Commands from the
server land in an inbox that the training thread polls at step boundaries.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from leyline import (
    METRIC_KINDS,
    PAYLOAD_TYPES,
    AnyPayload,
    Command,
    CommandStatus,
    CommandStatusChanged,
    EscalateRequest,
    EventsDropped,
    Heartbeat,
    HubHealth,
    Severity,
)
from nissa.hub.config import HubConfig
from nissa.hub.ratelog import RateLimitedLog
from nissa.hub.runlog import RunLog
from nissa.hub.secret import run_secret
from nissa.hub.sender import Sender
from nissa.hub.stats import DeliveryReport, HubStats
from nissa.hub.worker import EventWriter

logger = logging.getLogger(__name__)

_METRIC_TYPES: frozenset[type] = frozenset(PAYLOAD_TYPES[k] for k in METRIC_KINDS)
_MAX_TAKE = 4096
_IDLE_TICK_S = 0.5
_FIRST_POLL_S = 0.02


@dataclass(eq=False)
class _Flush:
    """A marker in the queue: the worker signals it once everything before it is logged."""

    done: threading.Event = field(default_factory=threading.Event)
    logged_seq: int = 0


_STOP = object()


class NissaHub:
    """Bounded, non-blocking event hub for one run and rank; see the module docstring."""

    def __init__(self, config: HubConfig) -> None:
        self.config = config
        self._queue: deque = deque()
        self._capacity = config.queue_size
        self._drops: defaultdict[type[AnyPayload], int] = defaultdict(int)
        self._late = 0
        self._closed = False
        """Closed (or a forked child's copy): ``emit`` only counts what comes late."""
        self._idle = False
        self._wake = threading.Event()
        self._cv = threading.Condition()
        self._log = RunLog(config.log_path)
        self.stats = HubStats(logged=self._log.last_seq)
        self._ratelog = RateLimitedLog(logger)
        self._writer = EventWriter(config, self._log, self.stats, self._ratelog)
        self._inbox: deque[Command] = deque()
        self._at_once: dict[type, Callable[[Command], None]] = {}
        self._seen_commands: set[str] = set()
        self._position = (0, 0)
        self._started_at = time.monotonic()
        self._worker = threading.Thread(target=self._work, name=f"nissa-hub-worker-r{config.rank}", daemon=True)
        secret = run_secret(config.run_dir)  # created with the run, so that a later upload has it too
        self._sender = (Sender(config, self._log, self.stats, self._cv, self._on_command, secret=secret)
                        if config.server is not None else None)
        self._final: DeliveryReport | None = None
        self._forked = False

    def start(self) -> NissaHub:
        """Start the worker (and the sender when there is a server); returns the hub."""
        _track_for_fork(self)
        self._worker.start()
        if self._sender is not None:
            self._sender.start()
        return self

    @property
    def log_path(self) -> os.PathLike[str]:
        return self._log.path

    # --- the training thread's side ---------------------------------------------------------------

    def emit(self, payload: AnyPayload, *, step: int, epoch: int, env: int | None = None,
             severity: Severity | None = None) -> None:
        """Queue one event; drops it (counted) only if it is a metric kind and the queue is full.

        Critical kinds are queued even past ``queue_size``: they are rare by nature (lifecycle,
        commands, anomalies), and losing one is worse than a little memory.
        """
        if self._closed:
            self._late += 1
            return
        queue = self._queue
        if len(queue) >= self._capacity and type(payload) in _METRIC_TYPES:
            self._drops[type(payload)] += 1
            return
        queue.append((payload, step, epoch, env, severity, time.time()))
        if self._idle:
            self._idle = False  # one wake-up per idle period, not one lock round-trip per event
            self._wake.set()

    def mark_position(self, step: int, epoch: int) -> None:
        """Where training is: stamps the events the hub authors itself (heartbeats, deliveries)."""
        self._position = (step, epoch)

    def answer_at_once(self, kind: type[EscalateRequest], answer: Callable[[Command], None]) -> None:
        """Commands of request type ``kind`` are answered by ``answer`` on the thread that receives them, never
        queued for the training thread (which may be the one that is stuck)."""
        self._at_once[kind] = answer

    def poll_commands(self) -> list[Command]:
        """Commands received since the last poll, oldest first."""
        inbox = self._inbox
        out: list[Command] = []
        while inbox:
            out.append(inbox.popleft())
        return out

    def dropped(self) -> dict[str, int]:
        """Metric events dropped so far, per kind."""
        return {t.KIND.value: n for t, n in dict(self._drops).items()}

    def report(self) -> DeliveryReport:
        pending = sum(1 for item in list(self._queue) if type(item) is tuple)
        return DeliveryReport(logged=self.stats.logged, acked=self.stats.acked, pending=pending,
                              dropped=self.dropped(), lost=self.stats.unlogged + self.stats.invalid,
                              server=self._sender is not None,
                              refused=self._sender.refused if self._sender is not None else None)

    def first_refusal(self, timeout: float = 5.0) -> str | None:
        """Wait for the first connection to the server to end: why the server refused it (its close code and
        reason: a wrong token), or None (taken, failed otherwise, or nothing heard within ``timeout``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.stats.connected:
                return None
            if self.stats.last_error is not None:
                time.sleep(_FIRST_POLL_S)  # the sender records the error first, then whether it was a refusal
                return self.report().refused
            time.sleep(_FIRST_POLL_S)
        return None

    def flush(self, timeout: float = 5.0, *, delivered: bool = True) -> DeliveryReport:
        """Wait until everything emitted so far is logged and, if ``delivered``, stored by the server."""
        if self._forked or self._final is not None:
            return self._final or self.report()
        deadline = time.monotonic() + timeout
        marker = _Flush()
        self._queue.append(marker)
        self._wake.set()
        if marker.done.wait(timeout) and delivered and self._sender is not None:
            self._sender.wait_acked(marker.logged_seq, deadline - time.monotonic())
        return self.report()

    def close(self, timeout: float = 10.0) -> DeliveryReport:
        """Log what is queued, deliver what the time allows, stop the threads; says what is left."""
        if self._final is not None:
            return self._final
        if self._forked:
            return self.report()
        deadline = time.monotonic() + timeout
        if self._worker.ident is None:
            self.start()  # never started: what was emitted still belongs in the log
        self._closed = True
        self._queue.append(_STOP)
        self._wake.set()
        self._worker.join(max(0.0, deadline - time.monotonic()))
        if self._sender is not None:
            self._sender.drain(self.stats.logged, deadline - time.monotonic(), self.config.offline_grace_s)
            self._sender.stop(max(0.5, deadline - time.monotonic()))
        report = self.report()
        if not self._worker.is_alive():
            self._log.close()
        self._final = report
        if self._late:
            logger.warning("%d events were emitted after the hub closed and were not recorded", self._late)
        return report

    # --- the receiver thread's side ---------------------------------------------------------------

    def _on_command(self, command: Command) -> None:
        if command.command_id in self._seen_commands:
            return  # re-delivered after a reconnect: already in hand
        self._seen_commands.add(command.command_id)
        if type(command.request) not in self._at_once:
            self._inbox.append(command)
        step, epoch = self._position
        self.emit(CommandStatusChanged(command_id=command.command_id, action=command.action,
                                       status=CommandStatus.DELIVERED), step=step, epoch=epoch)
        answer = self._at_once.get(type(command.request))
        if answer is not None:
            try:
                answer(command)
            except Exception as err:  # an answer is a plugin: its failure is the command's, never the hub's
                logger.exception("command %s (%s) failed", command.command_id, command.action.value)
                self.emit(CommandStatusChanged(command_id=command.command_id, action=command.action,
                                               status=CommandStatus.FAILED, message=f"{type(err).__name__}: {err}"),
                          step=step, epoch=epoch)

    # --- the worker thread ------------------------------------------------------------------------

    def _work(self) -> None:
        cfg = self.config
        now = time.monotonic()
        due = {"drops": now + cfg.drop_report_s, "heartbeat": now + cfg.heartbeat_s, "health": now + cfg.health_s}
        linger = cfg.linger_s
        while True:
            items = self._dequeue_batch()
            if items and self._process(items):
                return
            now = time.monotonic()
            self._periodic(now, due)
            if not items:
                if self._sleep(min(min(due.values()) - now, _IDLE_TICK_S)) and linger:
                    self._linger(linger)  # let a burst gather: one write, one GIL stint
            elif len(items) < _MAX_TAKE and linger:
                self._linger(linger)

    def _dequeue_batch(self) -> list:
        queue = self._queue
        items: list = []
        while queue and len(items) < _MAX_TAKE:
            items.append(queue.popleft())
        return items

    def _linger(self, linger: float) -> None:
        """Let events gather for ``linger``; a flush or close (which set the wake event whatever the
        worker's state, where emits do not while it is busy) cuts it short."""
        self._wake.wait(linger)
        self._wake.clear()

    def _sleep(self, timeout: float) -> bool:
        """Wait for work; True when woken by an emit. emit() sets the event only while the
        worker says it is idle, so the hot path takes no lock."""
        self._idle = True
        woken = bool(self._queue) or self._wake.wait(max(0.0, timeout))
        self._idle = False
        self._wake.clear()
        return woken

    def _process(self, items: list) -> bool:
        """Log a batch; handle markers in order. True when the stop marker was reached."""
        run: list = []
        for item in items:
            if type(item) is tuple:
                run.append(item)
                continue
            self._commit(run)
            run = []
            self._report_drops()
            if item is _STOP:
                return True
            self._own(self._health())  # a flush is a moment worth a snapshot (the run's end, say)
            item.logged_seq = self.stats.logged
            item.done.set()
        self._commit(run)
        return False

    def _commit(self, items: list) -> None:
        if items and self._writer.write(items):
            with self._cv:
                self._cv.notify_all()

    def _own(self, payload: AnyPayload) -> None:
        step, epoch = self._position
        self._commit([(payload, step, epoch, None, None, time.time())])

    def _periodic(self, now: float, due: dict[str, float]) -> None:
        cfg = self.config
        if now >= due["drops"]:
            self._report_drops()
            due["drops"] = now + cfg.drop_report_s
        if now >= due["heartbeat"]:
            self._own(Heartbeat(uptime_s=now - self._started_at))
            due["heartbeat"] = now + cfg.heartbeat_s
        if now >= due["health"]:
            self._own(self._health())
            due["health"] = now + cfg.health_s

    def _report_drops(self) -> None:
        delta = self._writer.drop_delta(self.dropped())
        if delta:
            self._own(EventsDropped(counts=delta, total=sum(delta.values())))

    def _health(self) -> HubHealth:
        s = self.stats
        return HubHealth(queue_depth=len(self._queue), logged=s.logged, sent=s.sent, acked=s.acked,
                         dropped=self.dropped(), reconnects=s.reconnects, connected=s.connected,
                         last_error=s.last_error)

    # --- fork -------------------------------------------------------------------------------------

    def _after_fork_in_child(self) -> None:
        """The child has none of the parent's threads: it must not touch the parent's log or seq."""
        self._forked = True
        self._closed = True
        self._queue = deque()
        self._wake = threading.Event()
        self._cv = threading.Condition()
        self._ratelog.reset_after_fork()


_hubs: weakref.WeakSet[NissaHub] = weakref.WeakSet()
_fork_hook_installed = False


def _after_fork_in_child() -> None:
    for hub in list(_hubs):
        hub._after_fork_in_child()


def _track_for_fork(hub: NissaHub) -> None:
    global _fork_hook_installed
    if not _fork_hook_installed and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _fork_hook_installed = True
    _hubs.add(hub)

