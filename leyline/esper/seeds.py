"""Esper's seed kinds: the lifecycle of a seed in a slot, and the epoch report that carries every slot."""

from __future__ import annotations

import enum
from typing import ClassVar, Literal

import msgspec

from leyline.enums import Kind
from leyline.esper.enums import EsperKind
from leyline.payloads import Payload


class SeedStage(enum.StrEnum):
    """Lifecycle stage of a seed in a slot (legal transitions live in ``trainer.kasmina``)."""

    DORMANT = "DORMANT"
    GERMINATED = "GERMINATED"
    TRAINING = "TRAINING"
    BLENDING = "BLENDING"
    HOLDING = "HOLDING"
    FOSSILIZED = "FOSSILIZED"
    PRUNED = "PRUNED"
    EMBARGOED = "EMBARGOED"
    RESETTING = "RESETTING"


class SlotSnapshot(msgspec.Struct, kw_only=True, frozen=True):
    """One slot of one env at the end of an epoch; ``stage`` None means the slot is empty.
    ``contribution``: the seed's counterfactual contribution this epoch, validation accuracy with
    the seed minus without it (None while the seed is not blended in)."""

    slot: str
    stage: SeedStage | None = None
    seed_id: str | None = None
    blueprint: str | None = None
    alpha: float = 0.0
    contribution: float | None = None


class EpochCompleted(Payload, kw_only=True, frozen=True):
    """One env finished one epoch: its validation accuracy and loss, and each slot's seed."""

    KIND: ClassVar[Kind] = EsperKind.EPOCH_COMPLETED
    round: int = 0
    accuracy: float
    val_loss: float | None
    """None when the loss was not finite (JSON has no NaN): the epoch is still reported."""
    train_loss: float | None = None
    reward: float | None = None
    action: str | None = None
    seeds: list[SlotSnapshot] = []
    host_params: int | None = None
    """Parameters of the env's host (what the seeds' parameters are measured against)."""
    fossilized_params: int = 0
    """Parameters the env's fossilized seeds added to its host."""


# --- seed lifecycle --------------------------------------------------------------------------


class SeedGerminated(Payload, kw_only=True, frozen=True):
    """A seed module was created in an empty slot."""

    KIND: ClassVar[Kind] = EsperKind.SEED_GERMINATED
    slot: str
    seed_id: str
    blueprint: str
    params: int


class SeedStageChanged(Payload, kw_only=True, frozen=True):
    """A seed moved along a legal lifecycle transition."""

    KIND: ClassVar[Kind] = EsperKind.SEED_STAGE_CHANGED
    slot: str
    seed_id: str
    from_stage: SeedStage
    to_stage: SeedStage
    reason: str = ""


class SeedGateEvaluated(Payload, kw_only=True, frozen=True):
    """A lifecycle gate (G1, G2, G3, G5) was checked for a seed."""

    KIND: ClassVar[Kind] = EsperKind.SEED_GATE_EVALUATED
    slot: str
    seed_id: str
    gate: Literal["G1", "G2", "G3", "G5"]
    passed: bool
    reason: str = ""


class SeedFossilized(Payload, kw_only=True, frozen=True):
    """A seed was kept for good."""

    KIND: ClassVar[Kind] = EsperKind.SEED_FOSSILIZED
    slot: str
    seed_id: str
    blueprint: str
    params: int
    contribution: float | None = None
    """Its counterfactual contribution (accuracy with minus without it) when it was fossilized."""
    host_params: int | None = None
    """Parameters of the host it joined: its cost is ``params / host_params``."""


class SeedPruned(Payload, kw_only=True, frozen=True):
    """A seed was removed; its slot goes through embargo before it can be used again."""

    KIND: ClassVar[Kind] = EsperKind.SEED_PRUNED
    slot: str
    seed_id: str
    blueprint: str
    reason: str = ""
    contribution: float | None = None
