"""Esper's own event kinds: a family of kinds beside the core's (``leyline.enums.Kind``), registered in the kinds
table (``leyline.kinds``) with its rows (``leyline.esper.kinds``). On the wire each is the same string as any kind."""

from __future__ import annotations

from leyline.enums import Kind


class EsperKind(Kind):
    """What Esper's loop reports of its seeds, its epochs over them and its policy."""

    EPOCH_COMPLETED = "epoch_completed"
    """Esper's epoch report: one env of a round finished an epoch, with each slot's seed. A plain loop's epochs are
    the envelope's ``epoch`` (``run.epoch_end()``), its measures ``metrics``."""
    SEED_GERMINATED = "seed_germinated"
    SEED_STAGE_CHANGED = "seed_stage_changed"
    SEED_GATE_EVALUATED = "seed_gate_evaluated"
    SEED_FOSSILIZED = "seed_fossilized"
    SEED_PRUNED = "seed_pruned"
    PPO_UPDATE = "ppo_update"
    LSTM_HEALTH = "lstm_health"
