"""The two tasks ``bench/sweeps.py`` sweeps, one definition used by every arm (Nissa's trial script and Ray's
trainable alike).

- ``toy``: the objective of Ray Tune's PBT example (``ray/tune/examples/pbt_function.py``), written anew: the
  accuracy grows fastest at an optimal learning rate that follows a triangle wave of the accuracy (0.001 at 0,
  0.01 at the midpoint 100, back to 0.001 at 200); "training will not converge without PBT". Its step costs
  next to no compute, so each arm sleeps the same ``step_ms`` a step.
- ``cnn``: a small CNN on images it makes (1×16×16 gratings, four orientations under noise), one SGD batch a
  step: real compute.

Imports torch only where the CNN needs it (a toy trial of Ray's arm stays light).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

MIDPOINT = 100.0
"""The toy's optimal lr rises until this accuracy, then falls."""
TARGET = 2 * MIDPOINT
"""The toy is done once its accuracy passes this."""
Q_TOLERANCE = 3.0
NOISE = 2.0
TOY_LR = (0.0001, 0.02)
"""The toy's lr range (Ray's example resamples in it)."""
CNN_LR = (0.001, 0.5)
CNN_MOMENTUM = (0.0, 0.99)


def optimal_lr(accuracy: float) -> float:
    """The triangle wave: 0.01·acc/midpoint below the midpoint, then falling; clamped to [0.001, 0.01]."""
    if accuracy < MIDPOINT:
        best = 0.01 * accuracy / MIDPOINT
    else:
        best = 0.01 - 0.01 * (accuracy - MIDPOINT) / MIDPOINT
    return min(0.01, max(0.001, best))


def toy_step(accuracy: float, lr: float, rng: random.Random) -> float:
    """One step of the toy at learning rate ``lr``: the accuracy after it."""
    best = optimal_lr(accuracy)
    q_err = max(lr, best) / min(lr, best)
    if q_err < Q_TOLERANCE:
        accuracy += rng.random() / q_err
    elif lr > best:
        accuracy -= (q_err - Q_TOLERANCE) * rng.random()
    accuracy += NOISE * rng.gauss(0.0, 1.0)
    return max(0.0, accuracy)


@dataclass
class Toy:
    """A toy trial's state: what a checkpoint holds (the step counts on across an exploit, as in Ray's example)."""

    accuracy: float = 0.0
    step: int = 0

    def advance(self, lr: float, rng: random.Random) -> None:
        self.accuracy = toy_step(self.accuracy, lr, rng)
        self.step += 1

    @property
    def done(self) -> bool:
        return self.accuracy > TARGET

    def state(self) -> dict[str, float]:
        return {"acc": self.accuracy, "step": self.step}

    def load(self, state: dict[str, Any]) -> None:
        self.accuracy, self.step = float(state["acc"]), int(state["step"])


# --- the CNN ---------------------------------------------------------------------------------------------------

IMAGE = 16
CLASSES = 4


def make_images(n: int, seed: int) -> tuple[Any, Any]:
    """``n`` gratings of four orientations (0°, 45°, 90°, 135°), random phase and frequency, under noise."""
    import torch

    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    angle = labels.float() * (math.pi / CLASSES)
    freq = 0.5 + 0.4 * torch.rand(n, generator=g)
    phase = 2 * math.pi * torch.rand(n, generator=g)
    coords = torch.arange(IMAGE, dtype=torch.float32)
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    wave = (xx[None] * torch.cos(angle)[:, None, None] + yy[None] * torch.sin(angle)[:, None, None])
    images = 0.6 * torch.sin(freq[:, None, None] * wave + phase[:, None, None])
    images = images + 1.5 * torch.randn(n, IMAGE, IMAGE, generator=g)
    return images[:, None], labels


def make_cnn(seed: int) -> Any:
    """Two 3×3 convolutions (8 and 16 channels), pooling, one linear layer: about 2,000 weights."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(16, CLASSES))


@dataclass
class Cnn:
    """A CNN trial: its model, optimizer and data; ``step`` counts on across an exploit."""

    lr: float
    momentum: float
    batch: int = 128
    seed: int = 0
    step: int = 0

    def __post_init__(self) -> None:
        import torch

        torch.set_num_threads(1)
        self.model = make_cnn(self.seed)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=self.lr, momentum=self.momentum)
        self.x, self.y = make_images(4096, 1)
        self.vx, self.vy = make_images(512, 2)
        self.gen = torch.Generator().manual_seed(self.seed)

    def set_values(self, values: dict[str, Any]) -> None:
        for group in self.opt.param_groups:
            for name in ("lr", "momentum"):
                if name in values:
                    group[name] = float(values[name])

    def advance(self) -> float:
        import torch

        idx = torch.randint(0, self.x.shape[0], (self.batch,), generator=self.gen)
        loss = torch.nn.functional.cross_entropy(self.model(self.x[idx]), self.y[idx])
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.step += 1
        return float(loss.detach())

    def accuracy(self) -> float:
        import torch

        with torch.no_grad():
            return float((self.model(self.vx).argmax(1) == self.vy).float().mean())

    def save(self, path: Any) -> None:
        import torch

        torch.save({"model": self.model.state_dict(), "opt": self.opt.state_dict(), "step": self.step}, path)

    def load(self, path: Any) -> None:
        import torch

        state = torch.load(path, weights_only=True)
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        self.step = int(state["step"])
