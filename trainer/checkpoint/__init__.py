"""Checkpoints of a run and resuming from them: what is saved (``state``), how it is written and
checked (``files``), when (``control``: every N rounds, on ``checkpoint`` and ``stop``)."""

from trainer.checkpoint.control import CheckpointConfig, Checkpointer
from trainer.checkpoint.files import CheckpointError, CheckpointStore, Written, checkpoint_name
from trainer.checkpoint.state import Totals, capture, restore

__all__ = ["CheckpointConfig", "CheckpointError", "CheckpointStore", "Checkpointer", "Totals", "Written", "capture",
           "checkpoint_name", "restore"]
