"""``NissaCallback``: a PyTorch Lightning ``Trainer`` as a Nissa run.

    run = nissa.init(server="http://127.0.0.1:8765", run_name="lit")
    trainer = pl.Trainer(callbacks=[NissaCallback(run)], max_epochs=3)
    trainer.fit(model, data)

Each training batch begins at a step boundary (commands apply there, at one agreed step on every rank);
what the module logs (``self.log``) is sent as ``metrics`` every ``log_every_n_steps`` steps, read back in
one transfer; the module is watched (per-layer statistics in debug windows); validation is the phase
``validate`` (a profile window of target ``update`` with ``"phase": "validate"`` records it). ``checkpoint``
saves with ``trainer.save_checkpoint`` unless the run has its own ``on_checkpoint``; ``stop`` sets
``trainer.should_stop``. The run finishes when fitting ends (``failed`` on an exception).

Built on Lightning's public ``Callback`` hooks only (pinned in constraints.txt, tested with a real ``Trainer``).
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytorch_lightning as pl
import torch

from nissa.integrations.names import metric_name
from nissa.run import Run

__all__ = ["NissaCallback", "metric_name"]


class NissaCallback(pl.Callback):
    """See the module docstring."""

    def __init__(self, run: Run, *, log_every_n_steps: int = 1, watch: bool = True) -> None:
        if log_every_n_steps < 1:
            raise ValueError(f"log_every_n_steps must be >= 1, got {log_every_n_steps}")
        self.run = run
        self.log_every_n_steps = log_every_n_steps
        self._watch = watch
        self._validating: contextlib.AbstractContextManager[None] | None = None
        self._trainer: pl.Trainer | None = None

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self._trainer is not None:
            return
        self._trainer = trainer
        if self._watch:
            self.run.watch(pl_module, name=type(pl_module).__name__)
        if not self.run.takes_checkpoints:
            self.run.on_checkpoint(self._save)

    def _save(self, step: int) -> dict[str, Any]:
        assert self._trainer is not None
        path = self.run.run_dir / "checkpoints" / f"step-{step}.ckpt"
        path.parent.mkdir(parents=True, exist_ok=True)
        self._trainer.save_checkpoint(path)
        return {"path": str(path)}

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        self.run.step()
        if self.run.should_stop:
            trainer.should_stop = True

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.run.step_count % self.log_every_n_steps == 0:
            self._log(trainer.callback_metrics)

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.run.finished:  # a ``trainer.validate`` after the fit: the run has ended
            return
        self._validating = self.run.phase("validate")
        self._validating.__enter__()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._validating is not None:
            self._validating.__exit__(None, None, None)
            self._validating = None
        self._log({k: v for k, v in trainer.callback_metrics.items() if k.startswith("val")})

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.run.finish()

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        status = "interrupted" if isinstance(exception, KeyboardInterrupt) else "failed"
        self.run.finish(status, error=f"{type(exception).__name__}: {exception}"[:2000])

    def _log(self, metrics: dict[str, Any]) -> None:
        values = {metric_name(k): v for k, v in metrics.items()
                  if isinstance(v, (int, float)) or (isinstance(v, torch.Tensor) and v.numel() == 1)}
        if values and not self.run.finished:
            self.run.log(dict(list(values.items())[:256]))
