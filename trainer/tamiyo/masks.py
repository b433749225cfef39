"""Action masks for all envs at once, as tensor ops over per-slot stage codes.

``op_mask[e, op]``: op is legal in env e. ``slot_mask[e, op, s]``: op may target slot s.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from leyline.esper import SeedStage
from trainer.kasmina.lifecycle import INCUBATING_STAGES, LIVE_STAGES, STAGE_CODE
from trainer.tamiyo.actions import N_OPS, Op


def _codes(stages: frozenset[SeedStage] | set[SeedStage]) -> torch.Tensor:
    return torch.tensor(sorted(STAGE_CODE[s] for s in stages))


@dataclass(frozen=True)
class SlotView:
    """Struct-of-arrays view of every env's slots: [n_envs, n_slots] each."""

    stage: torch.Tensor
    """Stage codes (``STAGE_CODE``)."""
    age: torch.Tensor
    """Epochs each seed has lived."""
    pruning: torch.Tensor
    """A scheduled prune is ramping the seed's alpha down."""


def compute_masks(view: SlotView, min_prune_age: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(op_mask [E, N_OPS], slot_mask [E, N_OPS, S]) from the slots' states."""
    stage, steady = view.stage, ~view.pruning
    incubating = torch.isin(stage, _codes(INCUBATING_STAGES)).any(dim=1, keepdim=True)
    live = torch.isin(stage, _codes(LIVE_STAGES))
    germ = (stage == STAGE_CODE[SeedStage.DORMANT]) & ~incubating
    advance = torch.isin(stage, _codes({SeedStage.GERMINATED, SeedStage.TRAINING, SeedStage.BLENDING})) & steady
    fossilize = (stage == STAGE_CODE[SeedStage.HOLDING]) & steady
    prune = live & (view.age >= min_prune_age) & steady
    alpha = torch.isin(stage, _codes({SeedStage.BLENDING, SeedStage.HOLDING})) & steady
    per_op = [torch.ones_like(germ), germ, alpha, prune, fossilize, advance]
    slot_mask = torch.stack([per_op[op] for op in Op], dim=1)
    op_mask = slot_mask.any(dim=2)
    op_mask[:, Op.WAIT] = True
    assert slot_mask.shape[1] == N_OPS
    return op_mask, slot_mask
