"""``nissa.integrations.tensorboard.SummaryWriter`` as a drop-in: one loop written against TensorBoard's writer runs
with torch's (event files) and with Nissa's (a run on a real nissa-server) unchanged."""

from __future__ import annotations

import time

import httpx
import numpy as np
import pytest
import torch

from leyline import Command, EventKind, StopRequest, decode_event
from nissa.integrations.tensorboard import SummaryWriter
from tests.e2e.api import trainer_events, wait_for
from tests.support.server import running_server


def tensorboard_loop(writer) -> None:
    """What a TensorBoard user's loop calls, as they call it."""
    writer.add_hparams({"lr": 0.1, "layers": 2}, {"hparam/final": 0.5})
    for step in range(1, 6):
        writer.add_scalar("train/loss", 1.0 / step, step)
        writer.add_scalars("acc", {"train": 0.5 + step / 20, "val": torch.tensor(0.4 + step / 30)}, step)
        writer.add_histogram("weights/fc1", torch.arange(10, dtype=torch.float32) * step, step)
        writer.add_image("samples", np.zeros((3, 4, 4)), step)
    writer.add_text("notes", "warm-up over\x1b[31m", 5)
    writer.flush()
    writer.close()


def test_the_same_loop_writes_event_files_or_a_run(tmp_path):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter as TorchWriter

    tensorboard_loop(TorchWriter(str(tmp_path / "tb" / "exp1")))
    assert list((tmp_path / "tb" / "exp1").glob("events.out.tfevents.*"))
    with running_server(tmp_path) as url:
        writer = SummaryWriter(str(tmp_path / "tb" / "exp1"), server=url, nissa_log_dir=tmp_path / "runs",
                               system_metrics=False)
        tensorboard_loop(writer)
        run_id = writer.run.run_id
        events = wait_for(lambda: (ev := trainer_events(url, run_id)) and ev[-1].kind is EventKind.RUN_FINISHED
                          and ev, 30, "the run's events")
        acc = httpx.get(f"{url}/runs/{run_id}/series/acc").json()["series"]
    assert events[0].payload.name == "exp1" and events[0].payload.config == {"lr": 0.1, "layers": 2}
    metrics = [e for e in events if e.kind is EventKind.METRICS]
    assert [e.step for e in metrics if "train/loss" in e.payload.values] == [1, 2, 3, 4, 5]
    hist = [e.payload.histograms[0] for e in events if e.kind is EventKind.HISTOGRAM]
    assert [(h.name, h.count, h.max, len(h.bins)) for h in hist][-1] == ("weights/fc1", 10, 45.0, 64)
    assert any(e.payload.values.get("hparam/final") == 0.5 for e in metrics)
    assert sorted(s["labels"]["tag"] for s in acc) == ["train", "val"]  # two lines of one chart
    (text,) = [e for e in events if e.kind is EventKind.TEXT]
    # Data, as written, but for its control characters, which the server stores as U+FFFD.
    assert (text.step, text.payload.tag, text.payload.text) == (5, "notes", "warm-up over\ufffd[31m")
    assert events[-1].payload.status == "completed"


def test_a_global_step_is_a_boundary_where_commands_apply(tmp_path):
    writer = SummaryWriter(nissa_log_dir=tmp_path, run_name="tb", system_metrics=False)
    writer.add_scalar("loss", 1.0, 100)
    writer.run.runtime.commands.submit(Command(command_id="local-stop", request=StopRequest(run_id=writer.run.run_id),
                                               created_at=time.time()))
    assert not writer.run.should_stop
    writer.add_scalar("loss", 0.5, 200)
    assert writer.run.should_stop and writer.run.current_step == 200
    writer.close()
    events = [decode_event(line) for line in writer.run.log_path.read_bytes().splitlines()]
    (applied,) = [e for e in events if e.kind is EventKind.COMMAND_STATUS and e.payload.status.value == "applied"]
    assert applied.payload.applied_step == 200  # at the loop's own step, where its values are
    assert events[-1].payload.status == "stopped"
