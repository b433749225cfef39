"""Fused counterfactual validation: all-on and each blended slot at alpha 0, in one forward per chunk.

K configurations cost one batched pass instead of K separate ones, and share the work before
the slot each one ablates (``MorphogeneticModel.forward_counterfactual``): the first host
block, the largest, runs once whatever K is.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import torch
import torch.nn.functional as F

from trainer.kasmina.model import MorphogeneticModel


@torch.no_grad()
def fused_validation(model: MorphogeneticModel, x: torch.Tensor, y: torch.Tensor, ablate: list[int],
                     autocast: AbstractContextManager[object], chunk: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """Accuracy and mean loss per configuration, [1 + len(ablate)] each, left on the device.

    ``ablate``: indices (network order) of the slots whose contribution is wanted.
    """
    k, n = 1 + len(ablate), x.shape[0]
    correct = torch.zeros(k, device=x.device)
    loss_sum = torch.zeros(k, device=x.device)
    was_training = model.training
    model.eval()
    for start in range(0, n, chunk):
        xb, yb = x[start: start + chunk], y[start: start + chunk]
        with autocast:
            logits = model.forward_counterfactual(xb, ablate)  # [k, b, classes]
        correct += (logits.argmax(-1) == yb).sum(1)
        loss_sum += F.cross_entropy(logits.float().transpose(1, 2), yb.expand(k, -1), reduction="none").sum(1)
    model.train(was_training)
    return correct / n, loss_sum / n
