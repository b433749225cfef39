"""NissaHub without a server: the run log is gap-free, overload drops only metrics, lifecycle is safe."""

from __future__ import annotations

import os
import time

import pytest

from leyline import EventKind, Heartbeat, RunFinished, RunStarted
from leyline.esper import EpochCompleted, EsperKind, SeedGerminated
from nissa.hub import HubConfig, NissaHub

from .helpers import dropped_reported, kinds, read_log


def _config(tmp_path, **kw) -> HubConfig:
    return HubConfig(run_id=kw.pop("run_id", "run-a"), log_dir=tmp_path, **kw)


def _metric(i: int) -> EpochCompleted:
    return EpochCompleted(accuracy=i / 1000, val_loss=1.0)


def _critical(i: int) -> SeedGerminated:
    return SeedGerminated(slot="r0c0", seed_id=f"s{i}", blueprint="conv", params=10)


def test_events_are_logged_in_order_with_contiguous_seq_and_stamps(tmp_path):
    hub = NissaHub(_config(tmp_path)).start()
    hub.emit(RunStarted(name="t", config={"lr": 0.1}), step=0, epoch=0)
    for i in range(300):
        hub.emit(_metric(i), step=i + 1, epoch=1 + i // 100, env=i % 2)
    hub.emit(RunFinished(status="completed", duration_s=1.0), step=300, epoch=3)
    report = hub.close(timeout=10)
    events = read_log(hub.log_path)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert report.logged == len(events) == 302 and report.complete
    assert events[0].kind is EventKind.RUN_STARTED and events[-1].kind is EventKind.RUN_FINISHED
    assert [e.step for e in events[1:301]] == list(range(1, 301))
    assert events[150].epoch == 2 and events[150].env == 1 and events[150].run_id == "run-a"


def test_full_queue_drops_metrics_only_and_every_drop_is_reported(tmp_path):
    # Emitting before start() fills the queue deterministically: nothing drains it yet.
    hub = NissaHub(_config(tmp_path, queue_size=20))
    for i in range(200):
        hub.emit(_metric(i), step=i, epoch=0)
        if i % 10 == 0:
            hub.emit(_critical(i), step=i, epoch=0)
    hub.start()
    report = hub.close(timeout=10)
    events = read_log(hub.log_path)
    assert kinds(events).count(EsperKind.SEED_GERMINATED) == 20
    logged_metrics = kinds(events).count(EsperKind.EPOCH_COMPLETED)
    assert logged_metrics == 18  # the queue held 20: 18 metrics and 2 critical events filled it
    assert dropped_reported(events) == {"epoch_completed": 200 - logged_metrics} == report.dropped
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_storm_from_a_busy_thread_loses_no_critical_event(tmp_path):
    hub = NissaHub(_config(tmp_path, queue_size=50)).start()
    n = 30_000
    for i in range(n):
        hub.emit(_metric(i), step=i, epoch=0)
        if i % 100 == 0:
            hub.emit(_critical(i), step=i, epoch=0)
    hub.close(timeout=20)
    events = read_log(hub.log_path)
    seeds = [e.payload.seed_id for e in events if e.kind is EsperKind.SEED_GERMINATED]
    assert seeds == [f"s{i}" for i in range(0, n, 100)]
    missing = n - kinds(events).count(EsperKind.EPOCH_COMPLETED)
    assert missing > 0, "the storm should have overrun a 50-event queue"
    assert dropped_reported(events) == {"epoch_completed": missing}


def test_invalid_event_is_refused_alone_and_leaves_no_gap(tmp_path):
    hub = NissaHub(_config(tmp_path)).start()
    hub.emit(_critical(1), step=1, epoch=0)
    hub.emit(EpochCompleted(accuracy="not a number", val_loss=1.0), step=2, epoch=0)  # type: ignore[arg-type]
    hub.emit(_critical(2), step=-5, epoch=0)  # a negative step breaks the envelope's contract
    hub.emit(_critical(3), step=3, epoch=0)
    report = hub.close(timeout=10)
    events = read_log(hub.log_path)
    assert [e.payload.seed_id for e in events] == ["s1", "s3"]
    assert [e.seq for e in events] == [1, 2]
    assert report.lost == 2 and hub.stats.invalid == 2


def test_flush_close_and_late_emit_never_raise(tmp_path):
    hub = NissaHub(_config(tmp_path)).start()
    hub.emit(_critical(1), step=1, epoch=0)
    flushed = hub.flush(timeout=10)
    events = read_log(hub.log_path)
    assert kinds(events) == [EsperKind.SEED_GERMINATED, EventKind.HUB_HEALTH]  # a flush snapshots health
    assert flushed.logged == 2 and events[1].payload.logged == 1
    first = hub.close(timeout=10)
    hub.emit(_critical(2), step=2, epoch=0)
    assert hub.close(timeout=1) is first
    assert hub.flush(timeout=1).logged == first.logged
    assert [e.payload.seed_id for e in read_log(hub.log_path) if e.kind is EsperKind.SEED_GERMINATED] == ["s1"]


def test_heartbeat_and_health_are_emitted_periodically(tmp_path):
    hub = NissaHub(_config(tmp_path, heartbeat_s=0.05, health_s=0.05)).start()
    hub.mark_position(7, 2)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        hub.flush(timeout=5)
        seen = set(kinds(read_log(hub.log_path)))
        if {EventKind.HEARTBEAT, EventKind.HUB_HEALTH} <= seen:
            break
        time.sleep(0.05)
    hub.close(timeout=10)
    events = read_log(hub.log_path)
    health = [e for e in events if e.kind is EventKind.HUB_HEALTH]
    assert health and health[-1].payload.connected is False and health[-1].payload.logged >= 1
    beats = [e for e in events if e.kind is EventKind.HEARTBEAT]
    assert beats and beats[-1].step == 7 and beats[-1].epoch == 2


def test_a_second_hub_on_the_same_log_continues_its_seq(tmp_path):
    first = NissaHub(_config(tmp_path)).start()
    for i in range(3):
        first.emit(_critical(i), step=i, epoch=0)
    first.close(timeout=10)
    with open(first.log_path, "ab") as f:
        f.write(b'{"run_id":"run-a","rank":0,"se')  # a crash mid-line
    second = NissaHub(_config(tmp_path)).start()
    second.emit(_critical(9), step=9, epoch=0)
    second.close(timeout=10)
    events = read_log(second.log_path)
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert events[-1].payload.seed_id == "s9"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_hub_survives_fork_and_the_child_never_writes_the_parents_log(tmp_path):
    hub = NissaHub(_config(tmp_path)).start()
    hub.emit(_critical(1), step=1, epoch=0)
    hub.flush(timeout=10)
    pid = os.fork()
    if pid == 0:  # the child: emit, flush and close must return at once, without raising
        code = 0
        try:
            hub.emit(_critical(666), step=2, epoch=0)
            hub.emit(Heartbeat(uptime_s=1.0), step=2, epoch=0)
            hub.flush(timeout=5)
            hub.close(timeout=5)
        except BaseException:  # noqa: BLE001 - any failure in the child becomes its exit code
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    hub.emit(_critical(2), step=3, epoch=0)
    hub.close(timeout=10)
    seeds = [e.payload.seed_id for e in read_log(hub.log_path) if e.kind is EsperKind.SEED_GERMINATED]
    assert seeds == ["s1", "s2"]


def test_closing_a_hub_that_never_started_still_logs_what_was_emitted(tmp_path):
    hub = NissaHub(_config(tmp_path))
    hub.emit(_critical(1), step=1, epoch=0)
    report = hub.close(timeout=10)
    assert report.logged == 1 and [e.payload.seed_id for e in read_log(hub.log_path)] == ["s1"]


def test_flush_and_close_cut_the_workers_linger_short(tmp_path):
    # The longest linger allowed: a flush or close that sat it out would find nothing logged by its deadline.
    hub = NissaHub(_config(tmp_path, linger_s=1.0)).start()
    hub.emit(_metric(0), step=1, epoch=1)
    deadline = time.monotonic() + 30
    while hub._queue and time.monotonic() < deadline:  # the worker has taken it and lingers
        time.sleep(0.01)
    hub.emit(_metric(1), step=2, epoch=1)
    report = hub.flush(timeout=0.5)
    assert report.logged == 3 and report.pending == 0  # the two events and the flush's hub_health
    hub.emit(_metric(2), step=3, epoch=1)
    report = hub.close(timeout=0.5)
    assert report.logged >= 4 and report.complete
    assert [e.step for e in read_log(hub.log_path) if e.kind is EsperKind.EPOCH_COMPLETED] == [1, 2, 3]
