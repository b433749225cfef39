"""The host plus its seed slots, routed ``forward_to(slot) → slot → forward_to(next) → … → logits``."""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from trainer.kasmina.blueprints import param_count
from trainer.kasmina.host import CNNHost, slot_index
from trainer.kasmina.lifecycle import LifecycleConfig
from trainer.kasmina.slot import SeedSlot


class MorphogeneticModel(nn.Module):
    """A ``CNNHost`` with a ``SeedSlot`` after each block named in ``slots``."""

    def __init__(self, host: CNNHost, slots: tuple[str, ...], lifecycle: LifecycleConfig) -> None:
        super().__init__()
        unknown = [s for s in slots if s not in host.slot_ids]
        if unknown:
            raise ValueError(f"slots {unknown} do not exist in a host with slots {host.slot_ids}")
        self.host = host
        self.slot_order: tuple[str, ...] = tuple(sorted(slots, key=slot_index))
        self.seed_slots = nn.ModuleDict(
            {s: SeedSlot(s, host.slot_channels(s), lifecycle) for s in self.slot_order})
        self.host_params = param_count(host)

    def slot(self, slot_id: str) -> SeedSlot:
        return cast(SeedSlot, self.seed_slots[slot_id])  # the dict holds only slots

    @property
    def slots(self) -> list[SeedSlot]:
        """Slots in network order (the order of every per-slot tensor)."""
        return [self.slot(s) for s in self.slot_order]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits."""
        h, prev = x, None
        for slot in self.slots:
            h = self.host.forward_to(h, slot.slot_id, prev)
            h = slot(h)
            prev = slot.slot_id
        return self.host.forward_from(h, prev)

    def forward_counterfactual(self, x: torch.Tensor, ablate: list[int]) -> torch.Tensor:
        """Logits [1 + len(ablate), N, classes]: all seeds on, then each slot of ``ablate``
        (indices in network order) with its seed taken out (alpha 0: the host's features pass).

        The configurations agree up to the slot each one ablates, so they share the work before
        it: the batch holds one branch per configuration that has diverged so far. At ablated slot
        i the all-on branch's features before the seed become the new branch of "slot i off";
        every block after runs once on all branches together.
        """
        n = x.shape[0]
        h, prev = x, None
        for i, slot in enumerate(self.slots):
            h = self.host.forward_to(h, slot.slot_id, prev)
            out = slot(h)
            h = torch.cat([out, h[:n]]) if i in ablate else out  # branch 0 is all on
            prev = slot.slot_id
        return self.host.forward_from(h, prev).view(1 + len(ablate), n, -1)

    def extra_params(self) -> int:
        """Parameters of every seed still attached (live or fossilized)."""
        return sum(s.params for s in self.slots if s.seed is not None)
