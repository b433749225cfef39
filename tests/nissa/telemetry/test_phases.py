"""Phase timing: totals per phase since the last report, env-epochs/s, reset, on a scripted clock."""

from __future__ import annotations

import itertools

import pytest

from leyline import PhaseTiming, decode_event, encode_event, make_event
from nissa.telemetry import phases
from nissa.telemetry.phases import PHASES, PhaseTimer


@pytest.fixture
def clock(monkeypatch):
    """Wall advances 1.0 s and CPU 0.5 s per reading: every interval is a known number of readings."""
    wall = itertools.count(0.0, 1.0)
    cpu = itertools.count(0.0, 0.5)
    monkeypatch.setattr(phases.time, "perf_counter", lambda: next(wall))
    monkeypatch.setattr(phases.time, "process_time", lambda: next(cpu))


def test_phases_accumulate_and_report_resets(clock):
    timer = PhaseTimer()  # wall reading 0
    for _ in range(2):
        with timer.phase("train"):  # wall: enter, exit -> 1 s each; cpu 0.5 s each
            pass
    with timer.phase("ppo_update"):
        pass
    assert timer.totals() == {"train": (2.0, 1.0), "ppo_update": (1.0, 0.5)}
    report = timer.report(round_=3, env_epochs=4)  # 6 wall readings since construction, then this one
    assert isinstance(report, PhaseTiming) and report.round == 3
    assert [(p.phase, p.wall_ms, p.cpu_ms) for p in report.phases] == [("train", 2000.0, 1000.0),
                                                                      ("ppo_update", 1000.0, 500.0)]
    assert report.env_epochs_per_s == pytest.approx(4 / 7.0)
    assert timer.totals() == {}
    assert timer.report(round_=3, env_epochs=1) is None  # nothing ran since


def test_time_is_recorded_when_the_phase_raises(clock):
    timer = PhaseTimer()
    with pytest.raises(RuntimeError), timer.phase("validation"):
        raise RuntimeError("boom")
    assert timer.totals()["validation"][0] == 1.0


def test_real_clock_report_is_encodable():
    timer = PhaseTimer()
    for name in PHASES:
        with timer.phase(name):
            sum(range(1000))
    report = timer.report(round_=1, env_epochs=2)
    assert [p.phase for p in report.phases] == list(PHASES)
    assert all(p.wall_ms >= 0 and p.cpu_ms >= 0 for p in report.phases)
    assert decode_event(encode_event(make_event(report, run_id="r", seq=1, ts=0.0))).payload == report


def test_unknown_phase_and_bad_names():
    with pytest.raises(ValueError, match="unknown phase"):
        PhaseTimer().phase("lunch")
    with pytest.raises(ValueError):
        PhaseTimer(("a", "a"))


def test_phases_are_named_ranges_in_a_profile_window(tmp_path):
    import torch

    from nissa.telemetry.profiler import ProfileWindow

    timer = PhaseTimer()
    window = ProfileWindow("w", batches=1, trace_dir=tmp_path)
    window.start()
    for _ in range(2):
        with timer.phase("validation"):
            torch.randn(64, 64).matmul(torch.randn(64, 64))
        window.step()
    assert window.done
    assert "validation" in window.result.trace_path.read_text()
    assert "validation" not in [op.name for op in window.result.top_ops]  # a range, not an operator
    assert "aten::matmul" in [op.name for op in window.result.top_ops]
