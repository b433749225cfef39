"""Fused counterfactual validation: all-on and each blended slot at alpha 0, in one forward per chunk.

The validation images are repeated once per configuration and each slot's alpha is scaled
per sample, so K configurations cost one batched pass instead of K separate ones.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import torch
import torch.nn.functional as F

from trainer.kasmina.model import MorphogeneticModel


def ablation_scales(n_slots: int, ablate: list[int], batch: int, device: torch.device) -> torch.Tensor:
    """[n_slots, K·batch, 1, 1, 1] alpha scales: config 0 all on, config k+1 has slot ``ablate[k]`` off."""
    k = 1 + len(ablate)
    scales = torch.ones(n_slots, k, device=device)
    for j, slot in enumerate(ablate):
        scales[slot, j + 1] = 0.0
    return scales.repeat_interleave(batch, dim=1)[..., None, None, None]


@torch.no_grad()
def fused_validation(model: MorphogeneticModel, x: torch.Tensor, y: torch.Tensor, ablate: list[int],
                     autocast: AbstractContextManager[object], chunk: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """Accuracy and mean loss per configuration, [1 + len(ablate)] each, left on the device.

    ``ablate``: indices (network order) of the slots whose contribution is wanted.
    """
    k, n_slots, n = 1 + len(ablate), len(model.slot_order), x.shape[0]
    correct = torch.zeros(k, device=x.device)
    loss_sum = torch.zeros(k, device=x.device)
    was_training = model.training
    model.eval()
    for start in range(0, n, chunk):
        xb, yb = x[start: start + chunk], y[start: start + chunk]
        b = xb.shape[0]
        scales = ablation_scales(n_slots, ablate, b, x.device) if ablate else None
        with autocast:
            xk = xb.repeat(k, 1, 1, 1).contiguous(memory_format=torch.channels_last) if k > 1 else xb
            logits = model(xk, scales)
        labels = yb.repeat(k)
        correct += (logits.argmax(1) == labels).view(k, b).sum(1)
        loss_sum += F.cross_entropy(logits.float(), labels, reduction="none").view(k, b).sum(1)
    model.train(was_training)
    return correct / n, loss_sum / n
