"""The ranks of a multi-rank run in the console: step rate, lag, queue, heartbeat, the straggler marked, and
each rank's trace of a profile window; a run of one rank shows no ranks panel."""

from __future__ import annotations

from pathlib import Path

from leyline import AnomalyDetected, Heartbeat, HubHealth, ProfileCompleted, RunStarted, encode_event, make_event
from leyline.esper import EpochCompleted
from tui.app import build_app
from tui.config import WatchConfig
from tui.ranks import RankTracker
from tui.state import RunState
from tui.widgets.lifecycle import ProfilePanel
from tui.widgets.ranks import RanksPanel

T0 = 1.7e9


def two_rank_run() -> list:
    """Two ranks: rank 1 falls behind (slower steps), rank 0 reports it as a straggler; one profile window
    completed on both, rank 1's slower."""
    events = []
    seqs = {0: 0, 1: 0}

    def add(rank: int, payload, *, t: float, step: int, epoch: int, env: int | None = None) -> None:
        seqs[rank] += 1
        events.append(make_event(payload, run_id="two", seq=seqs[rank], ts=T0 + t, rank=rank, step=step, epoch=epoch,
                                 env=env))

    for rank in (0, 1):
        add(rank, RunStarted(name="two", config={}, world_size=2), t=0, step=0, epoch=0)
    for epoch in range(1, 5):
        for rank, pace in ((0, 1.0), (1, 2.0)):  # rank 1 takes twice as long a step
            step = epoch * 16
            add(rank, EpochCompleted(round=1, accuracy=0.5, val_loss=1.0), t=epoch * pace, step=step,
                epoch=epoch, env=rank)
            add(rank, Heartbeat(uptime_s=epoch), t=epoch * pace, step=step, epoch=epoch)
    add(0, HubHealth(queue_depth=3, logged=10, sent=10, acked=10, dropped={}, reconnects=0, connected=True),
        t=4, step=64, epoch=4)
    add(1, HubHealth(queue_depth=40, logged=10, sent=9, acked=9, dropped={"epoch_completed": 2}, reconnects=0,
                     connected=True), t=8, step=64, epoch=4)
    add(0, EpochCompleted(round=1, accuracy=0.5, val_loss=1.0), t=5, step=80, epoch=5, env=0)
    add(0, AnomalyDetected(anomaly="straggler", rank=1, detail="rank 1 is a straggler",
                           evidence={"rank": 1.0, "step_ms": 20.0, "median_ms": 10.0, "threshold": 1.5}),
        t=5, step=80, epoch=5)
    for rank, wall in ((0, 0.5), (1, 1.25)):
        add(rank, ProfileCompleted(window="w1-step16", batches=2, trace_path=f"/runs/two/profiles/w1-step16/rank{rank}."
                                   f"node_1{rank}.w1-step16.pt.trace.json", wall_s=wall, top_ops=[]),
            t=6 + 2 * rank, step=80 - 16 * rank, epoch=5 - rank)
    return events


def test_ranks_are_folded_with_lag_rate_queue_and_the_straggler():
    tracker = RankTracker()
    for event in two_rank_run():
        tracker.apply(event)
    assert tracker.several and tracker.world_size == 2
    rows = {r.rank: r for r in tracker.rows(now=T0 + 9)}
    assert (rows[0].lag, rows[1].lag) == (0, 16)
    assert rows[0].steps_per_s > 12 > 8 == rows[1].steps_per_s
    assert (rows[0].queue_depth, rows[1].queue_depth) == (3, 40)
    assert rows[0].straggler == "" and rows[1].straggler == "2.0× median"
    assert rows[1].heartbeat_age_s == 9 - 8
    name, per_rank = tracker.last_window()
    assert name == "w1-step16" and sorted(per_rank) == [0, 1]


def test_a_run_of_one_rank_is_not_several():
    state = RunState("one")
    state.apply(make_event(RunStarted(name="one", config={}), run_id="one", seq=1, ts=T0))
    assert not state.ranks.several


async def test_the_console_shows_the_ranks_panel_and_each_ranks_trace(tmp_path: Path):
    log = tmp_path / "two" / "events.jsonl"
    log.parent.mkdir()
    log.write_bytes(b"".join(encode_event(e) + b"\n" for e in two_rank_run()))
    app = build_app(WatchConfig(client=None, replay_file=log))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(RanksPanel)
        assert panel.has_class("-shown") and panel.display
        assert [r.rank for r in panel.rows] == [0, 1] and panel.rows[1].straggler
        profile = app.screen.query_one(ProfilePanel).view
        assert [r[0] for r in profile.ranks] == [0, 1] and profile.ranks[1][2].startswith("rank1.")


async def test_the_ranks_panel_stays_hidden_for_one_rank(replay_app):
    async with replay_app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        panel = replay_app.screen.query_one(RanksPanel)
        assert not panel.has_class("-shown") and not panel.rows
