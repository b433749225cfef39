"""``nissa.init`` / ``Run`` on a plain loop, logged locally (no server): metrics, the run's own commands applied
at a step boundary, checkpoint and stop, and what reading back from the device costs."""

from __future__ import annotations

import time

import msgspec
import pytest
import torch

import nissa
import nissa.calls
from leyline import Command, CommandAction, EventKind, decode_event
from leyline.commands import REQUEST_TYPES
from nissa.telemetry.syncs import HostSyncCounter


def _events(run: nissa.Run) -> list:
    return [decode_event(line) for line in run.log_path.read_bytes().splitlines()]  # type: ignore[attr-defined]


def _submit(run: nissa.Run, action: CommandAction, **fields) -> str:
    command = Command(command_id=f"local-{action.value}-{time.monotonic_ns()}",
                      request=REQUEST_TYPES[action](run_id=run.run_id, **fields), created_at=time.time())
    run.runtime.commands.submit(command)
    return command.command_id


def _statuses(events: list, command_id: str) -> list[tuple[str, object]]:
    return [(e.payload.status.value, e.payload.result or e.payload.message) for e in events
            if e.kind is EventKind.COMMAND_STATUS and e.payload.command_id == command_id]


@pytest.fixture
def run(tmp_path):
    run = nissa.init(run_name="plain", log_dir=tmp_path, config={"lr": 0.1, "opt": {"momentum": 0.9}})
    yield run
    run.finish()


def test_a_call_applies_at_the_next_step_with_the_declared_arguments(run):
    seen: list[tuple[int, float, int]] = []

    @run.command("set_lr", help="Set the learning rate")
    def set_lr(value: float, groups: int = 1) -> dict:
        seen.append((run.current_step, value, groups))
        return {"lr": value}

    run.step()
    good = _submit(run, CommandAction.CALL, name="set_lr", args={"value": 2})
    bad = _submit(run, CommandAction.CALL, name="set_lr", args={"value": "x"})
    assert seen == []  # nothing applies between boundaries
    run.step()
    assert seen == [(1, 2.0, 1)]  # the loop's second step, step 1 (a loop counts from 0)
    run.finish()
    events = _events(run)
    assert events[0].payload.config == {"lr": 0.1, "opt.momentum": 0.9}
    assert [c.name for c in events[0].payload.commands] == ["set_lr"]
    assert _statuses(events, good)[-2:] == [("applied", ""), ("completed", {"lr": 2.0})]
    assert _statuses(events, bad)[-1] == ("rejected", "command 'set_lr': argument 'value' must be a finite "
                                                      "float, got 'x'")


def test_commands_are_declared_before_the_first_step(run):
    run.step()
    with pytest.raises(RuntimeError, match="before the run's first step"):
        run.command("late")(lambda: None)
    with pytest.raises(ValueError, match="annotation"):
        nissa.calls.spec_of("bad", lambda value: None)


def test_declared_phases_go_out_with_run_started_and_a_window_over_another_is_rejected(tmp_path):
    run = nissa.init(run_name="phased", log_dir=tmp_path, phases=["validate"])
    run.step()
    wrong = _submit(run, CommandAction.PROFILE, target="update")
    right = _submit(run, CommandAction.PROFILE, target="update", phase="validate")
    run.step()
    with run.phase("validate"):
        torch.ones(2).sum()
    run.step()
    run.finish()
    events = _events(run)
    assert events[0].payload.phases == ["validate"]
    assert _statuses(events, wrong)[-1] == ("rejected", "this run has no phase 'update' (its phases: validate): a "
                                                        "profile window of target 'update' would never record; "
                                                        "profile 'batches' instead")
    assert _statuses(events, right)[-1][0] == "completed"
    unsaid = nissa.init(run_name="unsaid", log_dir=tmp_path)
    assert unsaid.phases is None
    unsaid.finish()


def test_checkpoint_and_stop_call_the_loop_own_functions(run):
    _submit(run, CommandAction.CHECKPOINT)
    run.step()
    assert not run.should_stop
    run.on_checkpoint(lambda step: {"path": f"ckpt-{step}"})
    run.on_stop(lambda step: {"path": f"last-{step}"})
    checkpoint, stop = _submit(run, CommandAction.CHECKPOINT), _submit(run, CommandAction.STOP)
    run.step()
    assert run.should_stop
    assert run.finish().complete
    events = _events(run)
    rejected = next(e.payload for e in events if e.kind is EventKind.COMMAND_STATUS and e.payload.status.value ==
                    "rejected")
    assert "no run.on_checkpoint" in rejected.message
    assert _statuses(events, checkpoint)[-1] == ("completed", {"path": "ckpt-1"})
    assert _statuses(events, stop)[-1] == ("completed", {"path": "last-1"})
    assert events[-1].kind is EventKind.RUN_FINISHED and events[-1].payload.status == "stopped"


def test_metrics_keep_non_finite_values_and_bad_names_are_refused_at_once(run):
    run.step()
    run.log({"loss": float("nan"), "grad/max": float("inf"), "lr": 1e-3}, labels={"split": "train"})
    with pytest.raises(ValueError, match="bad metric name 'bad name'"):
        run.log({"bad name": 1.0})
    with pytest.raises(ValueError, match="must be a scalar"):
        run.log({"loss": torch.ones(3)})
    run.finish()
    metrics = [e for e in _events(run) if e.kind is EventKind.METRICS]
    assert len(metrics) == 1 and metrics[0].step == 0  # the first step is step 0
    assert metrics[0].payload.values == {"loss": "nan", "grad/max": "inf", "lr": 1e-3}


def test_one_host_sync_per_log_and_one_per_debug_collection(run):
    device = torch.device("cpu")
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    run.watch(model, name="mlp")
    x = torch.randn(32, 8)

    def steps(n: int) -> int:
        with HostSyncCounter(device) as counter:
            for _ in range(n):
                with run.step():
                    loss = model(x).pow(2).mean()
                    model.zero_grad()
                    loss.backward()
                    run.log({"loss": loss, "out_max": model(x).max(), "lr": 0.1})
        return counter.count

    assert steps(4) == 4  # NORMAL: the two tensors of each log, read together
    _submit(run, CommandAction.DEBUG, epochs=3)
    assert steps(4) == 4 + 3  # a window of three steps: one collection of every layer per step
    run.finish()
    layers = [e.payload for e in _events(run) if e.kind is EventKind.DEBUG_LAYER_STATS]
    assert len(layers) == 3 and {lay.name for lay in layers[0].layers} == {"0.weight", "0.bias", "2.weight", "2.bias"}
    # the same collections took each layer's gradient and weight distributions, in the same one transfer
    hists = [e for e in _events(run) if e.kind is EventKind.HISTOGRAM]
    assert len(hists) == 3 and [e.step for e in hists] == [e.step for e in _events(run)
                                                             if e.kind is EventKind.DEBUG_LAYER_STATS]
    grad = {d.name: d for d in hists[-1].payload.histograms}
    assert set(grad) == {f"debug/mlp/{kind}/{layer}" for kind in ("gradients", "weights")
                         for layer in ("0.weight", "0.bias", "2.weight", "2.bias")}
    assert grad["debug/mlp/weights/0.weight"].count == 8 * 16 and len(grad["debug/mlp/weights/0.weight"].bins) == 32
    assert grad["debug/mlp/weights/0.weight"].max == pytest.approx(model[0].weight.max().item())
    assert grad["debug/mlp/gradients/2.bias"].count == 1


def test_init_names_the_argument_that_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="level"):
        nissa.init(log_dir=tmp_path, level="LOUD")
    with pytest.raises(ValueError, match="server: expected"):
        nissa.init(log_dir=tmp_path, server="ftp://x")
    with pytest.raises(ValueError, match="run_id"):
        nissa.init(log_dir=tmp_path, run_id="a/b")
    with pytest.raises(ValueError, match="phases must be a list of phase names"):
        nissa.init(log_dir=tmp_path, phases="update")
    with pytest.raises(ValueError, match="run_id: '-1' .* not starting with '-' \\(a spreadsheet reads it"):
        nissa.init(log_dir=tmp_path, run_id="-1")
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"name": "stop"}, nissa.calls.CommandSpec)
