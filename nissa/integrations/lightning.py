"""``NissaCallback``: a PyTorch Lightning ``Trainer`` as a Nissa run.

    run = nissa.init(server="http://127.0.0.1:8765", run_name="lit")
    trainer = pl.Trainer(callbacks=[NissaCallback(run)], max_epochs=3)
    trainer.fit(model, data)

The end of each optimizer step (``on_train_batch_end`` where the Trainer's ``global_step`` moved; not a batch
inside gradient accumulation) is a step boundary: commands apply there, at one agreed step on every rank.
Metrics are what Lightning hands its loggers (the callback adds one of its own to the Trainer): what the
module logs in training every ``Trainer(log_every_n_steps=…)`` steps, what it logs per epoch once at the epoch's
end, what validation logs once when each validation ends (never again with the training steps after it), and
nothing of the sanity check before fitting; the module's ``save_hyperparameters`` are the run's config when
it has none. An epoch is a Lightning epoch (the run counts the Trainer's epochs, so a debug window of
``"epochs": 1`` lasts one), the module is watched (per-layer statistics in debug windows) and validation is
the phase ``validate``. A ``checkpoint`` command saves through the Trainer's own ``save_checkpoint`` unless
the run has its own ``on_checkpoint``; ``stop`` sets the Trainer's ``should_stop``, which ends the fit after
the step, as Lightning's own early stopping does. The run finishes when fitting ends (``failed`` on an
exception).

Built on Lightning's public ``Callback`` and ``Logger`` interfaces only (pinned in constraints.txt, tested with
a real ``Trainer``).
"""

from __future__ import annotations

import contextlib
from argparse import Namespace
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.loggers import Logger

from nissa.integrations.names import metric_name, scalars
from nissa.integrations.steps import step_to
from nissa.metadata import flat_config
from nissa.run import Run

__all__ = ["NissaCallback", "metric_name"]


class NissaCallback(pl.Callback):
    """See the module docstring."""

    def __init__(self, run: Run, *, watch: bool = True) -> None:
        self.run = run
        self.logger = RunLogger(run)
        """The Lightning logger the callback adds to the Trainer: how the run receives the module's metrics."""
        self._watch = watch
        self._validating: contextlib.AbstractContextManager[None] | None = None
        self._trainer: pl.Trainer | None = None
        self._global_step = -1

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self._trainer is not None:
            return
        self._trainer = trainer
        if self.logger not in trainer.loggers:
            trainer.loggers = [*trainer.loggers, self.logger]
        if self.run.current_step is None:
            self.run.steps_per_epoch = 0  # the Trainer's epochs (on_train_epoch_end), not a fixed count of steps
        if self._watch:
            self.run.watch(pl_module, name=type(pl_module).__name__)
        if not self.run.takes_checkpoints:
            self.run.on_checkpoint(self._save)

    def _save(self, step: int) -> dict[str, Any]:
        assert self._trainer is not None
        path = self.run.run_dir / "checkpoints" / f"step-{step}.ckpt"
        path.parent.mkdir(parents=True, exist_ok=True)
        self._trainer.save_checkpoint(path)
        return {"path": str(path), "global_step": self._trainer.global_step}

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._global_step = trainer.global_step  # a fit resumed from a checkpoint goes on from its step

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.run.finished or trainer.global_step == self._global_step:
            return  # a batch inside gradient accumulation: the optimizer has not stepped
        self._global_step = trainer.global_step
        # The step just taken, as Lightning's loggers count it (from 0; a resumed fit from its checkpoint's step).
        step_to(self.run, trainer.global_step - 1)
        if self.run.should_stop:
            trainer.should_stop = True

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self.run.finished and self.run.steps_per_epoch == 0:
            self.run.epoch_end()

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.run.finished or trainer.sanity_checking:  # after the fit, or the check before it: not the run's
            return
        self._validating = self.run.phase("validate")
        self._validating.__enter__()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._validating is not None:
            self._validating.__exit__(None, None, None)
            self._validating = None

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.run.finish()

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self.run.fail(exception)


class RunLogger(Logger):
    """A Lightning ``Logger`` into a run: metrics at the run's step, hyperparameters as the config of a run
    not started yet. Its ``name`` and ``version`` are empty and it has no ``save_dir``, so that checkpoints and
    logs stay where the Trainer puts them without it."""

    def __init__(self, run: Run) -> None:
        super().__init__()
        self.run = run

    @property
    def name(self) -> str:
        return ""

    @property
    def version(self) -> str:
        return ""

    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        if not self.run.started:
            values = vars(params) if isinstance(params, Namespace) else dict(params)
            self.run.config = {**flat_config(values), **self.run.config}

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        values = scalars((k, v) for k, v in metrics.items() if k != "epoch")  # an axis of its own, not a metric
        if values and not self.run.finished:
            # At the run's step, which is Lightning's own count (the boundary after each optimizer step takes it):
            # the step a validation's values are stamped with is the one its commands and debug statistics say.
            self.run.log(values)
