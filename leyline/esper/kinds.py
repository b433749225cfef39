"""Esper's rows of the kinds table (``leyline.kinds`` reads them from here with the core's): its seeds, the epoch
report over them, the PPO update and the policy's LSTM. Every one is a measure of Esper's loop, none internal."""

from __future__ import annotations

from typing import TypeAlias

from leyline.enums import Severity
from leyline.esper.policy import LSTMHealth, PPOUpdate
from leyline.esper.seeds import (
    EpochCompleted,
    SeedFossilized,
    SeedGateEvaluated,
    SeedGerminated,
    SeedPruned,
    SeedStageChanged,
)
from leyline.kind_spec import KindSpec

EsperPayload: TypeAlias = (
    EpochCompleted | SeedGerminated | SeedStageChanged | SeedGateEvaluated | SeedFossilized | SeedPruned | PPOUpdate
    | LSTMHealth
)
"""Esper's payload types, written out for the checker (``leyline.kinds.AnyPayload`` includes them)."""

ESPER_KINDS: tuple[KindSpec, ...] = (
    KindSpec(EpochCompleted, critical=False, internal=False),
    KindSpec(SeedGerminated, critical=True, indexed=True, internal=False),
    KindSpec(SeedStageChanged, critical=True, indexed=True, internal=False),
    KindSpec(SeedGateEvaluated, critical=True, indexed=True, internal=False),
    KindSpec(SeedFossilized, critical=True, indexed=True, internal=False),
    KindSpec(SeedPruned, critical=True, indexed=True, internal=False),
    KindSpec(PPOUpdate, critical=False, internal=False),
    KindSpec(LSTMHealth, critical=False, severity=Severity.DEBUG, internal=False),
)
"""Esper's own kinds."""
