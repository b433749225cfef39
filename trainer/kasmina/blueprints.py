"""The blueprint catalogue: seed modules that keep their input's shape (N, C, H, W).

Every blueprint starts as the identity (a zero-initialised last scale): blending a seed in then
moves the host's features only as far as the seed has learned to, never by a random jolt.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


def _groups(channels: int) -> int:
    """GroupNorm groups: up to 8, dividing ``channels``."""
    for g in (8, 4, 2, 1):
        if channels % g == 0:
            return g
    return 1


class NormSeed(nn.Module):
    """GroupNorm with a learned tanh-bounded scale: a cheap re-normalisation of the features."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(_groups(c), c)
        self.scale = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.scale) * self.norm(x)


class AttentionSeed(nn.Module):
    """Squeeze-and-excitation: channel gates in (0, 2) from pooled features, 1 at start."""

    def __init__(self, c: int, reduction: int = 4) -> None:
        super().__init__()
        hidden = max(c // reduction, 2)
        first, last = nn.Linear(c, hidden), nn.Linear(hidden, c)
        self.fc = nn.Sequential(first, nn.ReLU(), last)
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = 2.0 * torch.sigmoid(self.fc(x.mean(dim=(2, 3))))
        return x * gate[:, :, None, None]


class DepthwiseSeed(nn.Module):
    """Depthwise 3×3 + pointwise 1×1 + GroupNorm, residual."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
        self.pw = nn.Conv2d(c, c, 1, bias=False)
        self.norm = nn.GroupNorm(_groups(c), c)
        nn.init.zeros_(self.norm.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.norm(self.pw(self.dw(x)))


class BottleneckSeed(nn.Module):
    """1×1 down → 3×3 → 1×1 up, residual; the up-projection starts at zero."""

    def __init__(self, c: int) -> None:
        super().__init__()
        mid = max(c // 4, 2)
        self.down = nn.Conv2d(c, mid, 1, bias=False)
        self.conv = nn.Conv2d(mid, mid, 3, padding=1, bias=False)
        self.up = nn.Conv2d(mid, c, 1, bias=False)
        nn.init.zeros_(self.up.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.up(torch.relu(self.conv(torch.relu(self.down(x)))))


class ConvSmallSeed(nn.Module):
    """1×1 conv + GroupNorm, residual, zero-initialised so it starts as the identity."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c, c, 1, bias=False)
        self.norm = nn.GroupNorm(_groups(c), c)
        nn.init.zeros_(self.norm.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.norm(self.conv(x))


class ConvSeed(nn.Module):
    """``depth`` 3×3 conv → GroupNorm blocks with ReLU between them, residual
    (conv_light: 1, conv_heavy: 2); the last GroupNorm's scale starts at zero."""

    def __init__(self, c: int, depth: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i in range(depth):
            norm = nn.GroupNorm(_groups(c), c)
            layers += [nn.Conv2d(c, c, 3, padding=1, bias=False), norm]
            if i < depth - 1:
                layers.append(nn.ReLU())
        nn.init.zeros_(norm.weight)
        self.body = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


BLUEPRINTS: dict[str, Callable[[int], nn.Module]] = {
    "norm": NormSeed,
    "attention": AttentionSeed,
    "depthwise": DepthwiseSeed,
    "bottleneck": BottleneckSeed,
    "conv_small": ConvSmallSeed,
    "conv_light": lambda c: ConvSeed(c, 1),
    "conv_heavy": lambda c: ConvSeed(c, 2),
}
# The policy's blueprint head indexes this static order.
BLUEPRINT_NAMES: tuple[str, ...] = tuple(BLUEPRINTS)


def build_blueprint(name: str, channels: int) -> nn.Module:
    """A fresh seed module of blueprint ``name`` for features with ``channels`` channels."""
    try:
        factory = BLUEPRINTS[name]
    except KeyError:
        raise ValueError(f"unknown blueprint {name!r}; known: {', '.join(BLUEPRINT_NAMES)}") from None
    return factory(channels)


def param_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
