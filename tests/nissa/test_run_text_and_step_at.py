"""``run.step(at=…)`` (a loop that reaches boundaries now and then, in its own count) and ``run.text``."""

from __future__ import annotations

import pytest

import nissa
from leyline import EventKind, decode_event


def test_step_at_goes_forward_only_and_text_is_an_event(tmp_path):
    run = nissa.init(run_name="t", log_dir=tmp_path, system_metrics=False)
    run.step(at=50)
    assert run.step_count == 50
    with pytest.raises(ValueError, match="at must be an int past the current step 50"):
        run.step(at=50)
    run.step()
    assert run.step_count == 51
    run.text("notes", "hello")
    with pytest.raises(ValueError, match="bad metric name"):
        run.text("no spaces", "x")
    run.finish()
    events = [decode_event(line) for line in run.log_path.read_bytes().splitlines()]
    (text,) = [e for e in events if e.kind is EventKind.TEXT]
    assert (text.step, text.payload.tag, text.payload.text) == (51, "notes", "hello")
