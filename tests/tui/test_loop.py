"""The console's view of a plain loop's run: its metrics and the commands it declared, and calling one."""

import pytest

from leyline import Metrics, RunStarted, make_event
from leyline.calls import ArgSpec, CommandSpec
from tui.loop import parse_call
from tui.state import RunState

DECLARED = [CommandSpec(name="set_lr", help="Set the learning rate", args=[ArgSpec(name="value", type="float")]),
            CommandSpec(name="tag", args=[ArgSpec(name="text", type="str"), ArgSpec(name="n", type="int",
                                                                                  required=False, default=1)])]


def test_a_plain_run_shows_its_latest_metrics_and_its_commands():
    state = RunState("r")
    state.apply_all([
        make_event(RunStarted(name="plain", config={}, commands=DECLARED), run_id="r", seq=1, ts=1.0),
        make_event(Metrics(values={"loss": 0.5, "lr": 0.1}), run_id="r", seq=2, ts=2.0, step=1),
        make_event(Metrics(values={"loss": "nan"}), run_id="r", seq=3, ts=3.0, step=2),
    ])
    assert state.loop.rows() == [("loss", "nan", "2"), ("lr", "0.1", "1")]
    assert state.loop.offered() == ["set_lr value:float — Set the learning rate", "tag text:str n:int?"]
    assert not state.esper


@pytest.mark.parametrize("text, expected", [
    ("set_lr value=0.01", ("set_lr", {"value": 0.01})),
    ("set_lr value=1", ("set_lr", {"value": 1})),
    ("tag text=007", ("tag", {"text": "007"})),
])
def test_a_typed_call_is_read_as_the_run_declared_it(text, expected):
    assert parse_call(text, DECLARED) == expected


@pytest.mark.parametrize("text, reason", [
    ("", "type a command"), ("nope", "declared no command 'nope'"), ("set_lr 0.1", "ARG=VALUE"),
    ("set_lr value=fast", "must be a finite float"), ("set_lr", "needs argument 'value'"),
])
def test_a_bad_call_is_refused_before_it_is_sent(text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_call(text, DECLARED)
