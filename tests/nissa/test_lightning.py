"""NissaCallback with a real PyTorch Lightning Trainer on CPU, streaming to a real nissa-server."""

from __future__ import annotations

import csv
import pathlib
import time

import pytest

pl = pytest.importorskip("pytorch_lightning")
import torch  # noqa: E402
from pytorch_lightning.loggers import CSVLogger  # noqa: E402

import nissa  # noqa: E402
from leyline import Command, CommandAction, EventKind  # noqa: E402
from leyline.commands import REQUEST_TYPES  # noqa: E402
from nissa.integrations.lightning import NissaCallback, metric_name  # noqa: E402
from tests.e2e.api import trainer_events, wait_for  # noqa: E402
from tests.support.server import running_server  # noqa: E402


class Tiny(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train/loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _loader() -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)


def _fit(run: nissa.Run, **trainer_args) -> pl.Trainer:
    trainer = pl.Trainer(accelerator="cpu", devices=1, callbacks=[NissaCallback(run)], logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         log_every_n_steps=1, **trainer_args)
    trainer.fit(Tiny(), _loader(), _loader())
    return trainer


def _local(run: nissa.Run, action: CommandAction, **fields) -> None:
    run.runtime.commands.submit(Command(command_id=f"local-{action.value}",
                                        request=REQUEST_TYPES[action](run_id=run.run_id, **fields),
                                        created_at=time.time()))


def test_a_lightning_fit_is_a_run_with_metrics_and_a_debug_window(tmp_path):
    with running_server(tmp_path) as url:
        run = nissa.init(server=url, run_name="lit", log_dir=tmp_path / "runs")
        _local(run, CommandAction.DEBUG, epochs=2)
        trainer = _fit(run, max_steps=6, val_check_interval=3)
        events = wait_for(lambda: (ev := trainer_events(url, run.run_id)) and ev[-1].kind is EventKind.RUN_FINISHED
                          and ev, 30, "the run's events")
    trainer.validate(trainer.lightning_module, _loader())  # after the fit the run has ended: nothing to send
    metrics = [e for e in events if e.kind is EventKind.METRICS]
    assert [e.payload.values["train/loss"] for e in metrics if "train/loss" in e.payload.values]
    assert any("val_loss" in e.payload.values for e in metrics)
    layers = [e.payload for e in events if e.kind is EventKind.DEBUG_LAYER_STATS]
    assert layers and {lay.name for lay in layers[0].layers} == {"net.weight", "net.bias"}
    assert events[-1].payload.status == "completed"


def test_stop_ends_the_fit_with_a_checkpoint(tmp_path):
    run = nissa.init(run_name="lit", log_dir=tmp_path / "runs")
    _local(run, CommandAction.CHECKPOINT)
    _local(run, CommandAction.STOP)
    trainer = _fit(run, max_steps=50)
    assert trainer.global_step < 50 and run.should_stop
    saved = sorted((run.run_dir / "checkpoints").glob("*.ckpt"))
    assert saved and run.finish().complete


@pytest.mark.parametrize("name, expected", [("train/loss", "train/loss"), ("val loss", "val_loss"),
                                             ("1st", "_1st")])
def test_lightning_names_become_metric_names(name, expected):
    assert metric_name(name) == expected


class Scored(Tiny):
    """Logs a training metric only at epoch ends too (Lightning keeps it in the same dict as the others)."""

    def __init__(self, width: int = 4) -> None:
        super().__init__()
        self.save_hyperparameters()

    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        self.log("train/epoch_loss", loss, on_step=False, on_epoch=True)
        return loss


def _metric_steps(run: nissa.Run, name: str) -> list[int]:
    from leyline import decode_event

    events = [decode_event(line) for line in run.log_path.read_bytes().splitlines()]
    return [e.step for e in events if e.kind is EventKind.METRICS and name in e.payload.values]


def _lightning_steps(csv_dir: pathlib.Path, name: str) -> list[int]:
    """The steps Lightning's own CSV logger wrote ``name`` at."""
    (path,) = csv_dir.rglob("metrics.csv")
    with path.open(newline="") as f:
        return [int(row["step"]) for row in csv.DictReader(f) if row.get(name)]


def test_validation_is_sent_once_per_validation_and_the_sanity_check_not_at_all(tmp_path):
    run = nissa.init(run_name="lit", log_dir=tmp_path / "runs", system_metrics=False)
    trainer = pl.Trainer(accelerator="cpu", devices=1, callbacks=[NissaCallback(run)],
                         logger=CSVLogger(tmp_path / "csv"), default_root_dir=tmp_path / "lit",
                         enable_progress_bar=False, enable_model_summary=False,
                         max_epochs=2, num_sanity_val_steps=2, log_every_n_steps=1)
    trainer.fit(Scored(), _loader(), _loader())
    assert _metric_steps(run, "val_loss") == [7, 15]  # two validations, at the ends of the two epochs
    assert _metric_steps(run, "train/loss") == list(range(16))  # Lightning counts from 0
    assert _metric_steps(run, "train/epoch_loss") == [7, 15]  # logged per epoch: sent once an epoch
    for name in ("val_loss", "train/loss", "train/epoch_loss"):  # the steps are Lightning's own, not one more
        assert _metric_steps(run, name) == _lightning_steps(tmp_path / "csv", name), name
    assert run.config == {"width": 4}  # the module's hyperparameters
    assert list((tmp_path / "csv").rglob("*.ckpt"))  # the Trainer's checkpoints where it puts them (its logger's)
    assert run.finish().complete


def test_an_epoch_is_a_lightning_epoch_and_a_step_an_optimizer_step(tmp_path):
    from leyline import decode_event

    run = nissa.init(run_name="lit", log_dir=tmp_path / "runs", system_metrics=False)
    _local(run, CommandAction.DEBUG, epochs=1)
    _fit(run, max_epochs=3, accumulate_grad_batches=2, num_sanity_val_steps=0)
    assert run.current_step == 11  # 3 epochs of 8 batches, 2 a step: steps 0 to 11
    events = [decode_event(line) for line in run.log_path.read_bytes().splitlines()]
    debug = sorted({e.step for e in events if e.kind is EventKind.DEBUG_LAYER_STATS})
    assert debug and max(debug) <= 5 and len(debug) >= 3  # one Lightning epoch (4 steps) of statistics, not one step
    assert run.epoch_count == 3 and events[-1].kind is EventKind.RUN_FINISHED
