"""Esper's own kinds: seeds in slots, the epoch report over them, the PPO update and the policy's LSTM; and how
an Esper run ends (its results as the run's summaries).

The core contract (``leyline``) is what every run speaks; these stay fully typed beside it, a family of kinds of
their own (``EsperKind``) registered in the core's kinds table (``leyline.kinds``).
"""

from leyline.esper.enums import EsperKind
from leyline.esper.outcome import SUMMARY_NAMES, EsperOutcome
from leyline.esper.policy import HEAD_NAMES, LSTMHealth, PPOUpdate
from leyline.esper.seeds import (
    EpochCompleted,
    SeedFossilized,
    SeedGateEvaluated,
    SeedGerminated,
    SeedPruned,
    SeedStage,
    SeedStageChanged,
    SlotSnapshot,
)

__all__ = [
    "HEAD_NAMES", "SUMMARY_NAMES", "EpochCompleted", "EsperKind", "EsperOutcome", "LSTMHealth", "PPOUpdate",
    "SeedFossilized", "SeedGateEvaluated", "SeedGerminated", "SeedPruned", "SeedStage", "SeedStageChanged",
    "SlotSnapshot",
]
