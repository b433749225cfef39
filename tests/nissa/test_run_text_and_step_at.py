"""``run.step(at=…)`` (a loop that reaches boundaries now and then, in its own count) and ``run.text``."""

from __future__ import annotations

import pytest

import nissa
from leyline import EventKind, decode_event


def test_step_at_goes_forward_only_and_text_is_an_event(tmp_path):
    run = nissa.init(run_name="t", log_dir=tmp_path, system_metrics=False)
    assert run.current_step is None
    with pytest.raises(ValueError, match="at must be the next step 0 or later"):
        run.step(at=-1)
    with pytest.raises(ValueError, match=r"from 0 to 2\^53 \(9,007,199,254,740,992\); got 9007199254740993"):
        run.step(at=2**53 + 1)
    run.step(at=50)
    assert run.current_step == 50
    with pytest.raises(ValueError, match="at must be the next step 51 or later"):
        run.step(at=50)
    run.step()
    assert run.current_step == 51
    run.text("notes", "hello")
    with pytest.raises(ValueError, match="bad metric name"):
        run.text("no spaces", "x")
    run.finish()
    events = [decode_event(line) for line in run.log_path.read_bytes().splitlines()]
    (text,) = [e for e in events if e.kind is EventKind.TEXT]
    assert (text.step, text.payload.tag, text.payload.text) == (51, "notes", "hello")


def test_a_loop_that_counts_from_0_sees_its_own_steps_and_epochs_end_after_theirs(tmp_path):
    run = nissa.init(run_name="c", log_dir=tmp_path, system_metrics=False, steps_per_epoch=4)
    run.log({"x": -1.0})  # before the first step: stamped 0, the step to come
    for step in range(10):
        run.step()
        assert run.current_step == step
        run.log({"x": float(step)})
    run.finish()
    events = [decode_event(line) for line in run.log_path.read_bytes().splitlines()]
    metrics = [e for e in events if e.kind is EventKind.METRICS]
    assert [(e.step, e.payload.values["x"]) for e in metrics] == [(0, -1.0), *((s, float(s)) for s in range(10))]
    assert [e.epoch for e in metrics[1:]] == [0] * 4 + [1] * 4 + [2] * 2  # steps 0-3, 4-7, 8-9
    assert run.epoch_count == 2


def test_a_loop_that_steps_now_and_then_ends_its_epochs_as_the_steps_pass_them(tmp_path):
    run = nissa.init(run_name="j", log_dir=tmp_path, system_metrics=False, steps_per_epoch=10)
    for at in range(0, 100, 10):  # a logger called every 10 steps, in the loop's own count
        run.step(at=at)
        assert run.epoch_count == at // 10
    run.finish()
