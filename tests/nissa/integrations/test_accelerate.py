"""NissaTracker with a real Accelerate ``Accelerator`` on CPU, streaming to a real nissa-server: the config of
``init_trackers``, ``accelerator.log`` at its steps, a command at a step, ``end_training``."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("accelerate")
import torch  # noqa: E402
from accelerate import Accelerator  # noqa: E402

from leyline import Command, EventKind, StopRequest  # noqa: E402
from nissa.integrations.accelerate import NissaTracker  # noqa: E402
from tests.e2e.api import trainer_events, wait_for  # noqa: E402
from tests.support.server import running_server  # noqa: E402


def test_an_accelerate_loop_is_a_run(tmp_path):
    with running_server(tmp_path) as url:
        tracker = NissaTracker("acc", server=url, log_dir=tmp_path / "runs", system_metrics=False)
        accelerator = Accelerator(cpu=True, log_with=tracker)
        accelerator.init_trackers("nc5-accel", config={"lr": 0.05, "opt": {"name": "sgd"}})
        assert accelerator.get_tracker("nissa", unwrap=True) is tracker.run
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        model, opt = accelerator.prepare(model, opt)
        x = torch.randn(32, 4)
        y = x.sum(1, keepdim=True)
        stopped_at = None
        for step in range(20):  # a loop counting from 0, as most do
            loss = torch.nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
            accelerator.log({"loss": loss.detach(), "note": "text is left out"}, step=step)
            if step == 5:
                tracker.run.runtime.commands.submit(Command(
                    command_id="local-stop", request=StopRequest(run_id=tracker.run.run_id), created_at=time.time()))
            if tracker.run.should_stop:
                stopped_at = step
                break
        accelerator.end_training()
        run_id = tracker.run.run_id
        events = wait_for(lambda: (ev := trainer_events(url, run_id)) and ev[-1].kind is EventKind.RUN_FINISHED
                          and ev, 30, "the run's events")
    assert stopped_at == 6  # applied at the next step's boundary, the log of step 6
    assert events[0].payload.config == {"lr": 0.05, "opt.name": "sgd"}
    assert events[0].payload.project == "nc5-accel"  # init_trackers' project name, not lost
    metrics = [e for e in events if e.kind is EventKind.METRICS]
    assert [e.step for e in metrics] == list(range(7)) and set(metrics[0].payload.values) == {"loss"}
    assert events[-1].payload.status == "stopped"
