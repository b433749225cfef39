"""The alert engine on snapshots it is handed, with the time it is told (no store, no sleeping): a rank's
hang clock runs only while its heartbeats go on."""

from __future__ import annotations

import pytest

from nissa_server.alerts.engine import AlertEngine, RankRow, Snapshot
from nissa_server.alerts.rules import AlertRules, Rule

pytestmark = pytest.mark.single_backend
T = 3.0


def _engine() -> AlertEngine:
    return AlertEngine(AlertRules(rules=(Rule(name="stuck", when="hang", after_s=T),)), silent_after_s=10.0)


def _snap(*ranks: tuple[int, float, int]) -> Snapshot:
    rows = [RankRow(run_key=1, run_id="r", name="r", rank=rank, seen_at=seen_at, step=step)
            for rank, seen_at, step in ranks]
    return Snapshot(ranks=rows, runs=[], anomalies=[], firing=[], last_id=0)


def _hung(engine: AlertEngine, now: float, *ranks: tuple[int, float, int]) -> list[str]:
    return [f.subject for f in engine.evaluate(_snap(*ranks), now).firing]


def test_a_rank_stuck_at_its_step_while_it_beats_is_hung_after_the_rules_time():
    engine = _engine()
    assert _hung(engine, 100.0, (0, 100.0, 7)) == []
    assert _hung(engine, 102.5, (0, 102.4, 7)) == []
    assert _hung(engine, 103.0, (0, 102.9, 7)) == ["rank 0"]
    assert _hung(engine, 104.0, (0, 103.9, 8)) == []  # it advanced: the clock starts over


def test_a_rank_resumed_after_a_silence_is_not_hung_for_the_time_it_was_silent():
    engine = _engine()
    # Rank 1 beats, then is stopped (SIGSTOP): silent, not hung; rank 0 waits for it in a collective.
    assert _hung(engine, 100.0, (0, 100.0, 7), (1, 100.0, 7)) == []
    for now in (101.0, 102.0, 103.0, 106.0, 110.0):
        assert _hung(engine, now, (0, now - 0.2, 7), (1, 100.0, 7)) == (["rank 0"] if now >= 103.0 else [])
    # Resumed (SIGCONT): its first heartbeat still carries the old step; that is not a hang of 10 s.
    assert _hung(engine, 110.5, (0, 110.3, 7), (1, 110.4, 7)) == ["rank 0"]
    assert _hung(engine, 111.0, (0, 110.8, 8), (1, 110.9, 7)) == []
    # A rank that stays at its step with heartbeats going on after it came back is hung again, after T.
    assert _hung(engine, 113.4, (0, 113.3, 8), (1, 113.3, 7)) == ["rank 1"]
