"""The host network: conv blocks with a seed slot after each block (``r0c{i}``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch
from torch import nn

from trainer.compiling import compiled

BlockFn = Callable[["ConvBlock", torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class HostConfig:
    """Shape of the CNN host."""

    n_blocks: int = 3
    """Conv blocks; block i has ``base_channels * 2**i`` channels and a slot ``r0c{i}`` after it."""
    base_channels: int = 16
    """Channels of the first block."""
    n_classes: int = 10
    """Classifier outputs."""
    in_channels: int = 3
    """Input image channels."""
    image_size: int = 32
    """Input image height and width (square)."""

    def __post_init__(self) -> None:
        if not 1 <= self.n_blocks <= 5:
            raise ValueError(f"n_blocks must be in 1..5, got {self.n_blocks}")
        if self.base_channels < 1 or self.n_classes < 2:
            raise ValueError("base_channels must be >= 1 and n_classes >= 2")
        if self.image_size % (2**self.n_blocks):
            raise ValueError(f"image_size {self.image_size} not divisible by 2**{self.n_blocks}")

    @property
    def slot_ids(self) -> tuple[str, ...]:
        return tuple(slot_id(i) for i in range(self.n_blocks))

    def channels(self, block: int) -> int:
        return self.base_channels * 2**block


def slot_id(block: int) -> str:
    """The id of the slot after ``block`` (row 0, column ``block``)."""
    return f"r0c{block}"


def slot_index(slot: str) -> int:
    """Inverse of ``slot_id``; a ValueError for anything else."""
    if not slot.startswith("r0c") or not slot[3:].isdigit():
        raise ValueError(f"not a slot id: {slot!r} (expected r0c0, r0c1, ...)")
    return int(slot[3:])


class ConvBlock(nn.Module):
    """conv3×3 (no bias) → BatchNorm → ReLU → 2×2 max-pool."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c_out)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(torch.relu(self.bn(self.conv(x))))


def inductor_mode(mode: str) -> str:
    """``torch.compile``'s mode for a ``--compile-mode``: ``max-autotune`` runs without CUDA graphs.

    Inductor's ``max-autotune`` also captures CUDA graphs, which assume fixed parameter
    addresses and one stream: the host blocks are shared by every env (each with its own
    parameters and CUDA stream), and the policy's recurrent state is fed back from one graph
    replay into the next. CUDA graphs wait for a static pool of seed modules.
    """
    return "max-autotune-no-cudagraphs" if mode == "max-autotune" else mode


def _run_block(block: ConvBlock, x: torch.Tensor) -> torch.Tensor:
    return block(x)


@functools.cache
def compiled_block(mode: str, c_in: int, c_out: int) -> BlockFn:
    """The compiled ``block(x)`` for blocks of this shape, one per process and shared by every env
    and every round (fresh hosts each round would otherwise compile again and again).

    Every ``ConvBlock`` shares one ``forward`` code object, and Dynamo keeps its compiled
    entries per code object: blocks of three shapes x train/eval x batch sizes (the last
    training batch, validation chunks of 1 + n ablations) passed the recompile limit (8) within
    a round or two, after which it silently ran eager. Here each shape has its own region
    (``isolate_recompiles``), the caller marks the batch dimension dynamic, so a region holds two
    entries (training, and validation under no_grad), and ``fullgraph`` makes a break or a limit
    hit an error instead of a silent fallback to eager.
    """
    return compiled(_run_block, mode=inductor_mode(mode), name=f"host_block_{c_in}x{c_out}")


class CNNHost(nn.Module):
    """Blocks of conv-BN-ReLU-pool and a linear classifier; seeds attach between blocks.

    ``forward_to(x, slot)`` runs the blocks up to and including the slot's block;
    ``forward_from(h, slot)`` continues from that slot to the logits. A model with seeds
    routes ``forward_to(slot) → seed slot → forward_to(next slot, from_slot=slot) → …``.
    """

    def __init__(self, config: HostConfig | None = None) -> None:
        super().__init__()
        self.config = config or HostConfig()
        cfg = self.config
        chans = [cfg.in_channels] + [cfg.channels(i) for i in range(cfg.n_blocks)]
        self.blocks = nn.ModuleList(ConvBlock(chans[i], chans[i + 1]) for i in range(cfg.n_blocks))
        side = cfg.image_size // 2**cfg.n_blocks
        self.classifier = nn.Linear(chans[-1] * side * side, cfg.n_classes)
        self._compiled: list[BlockFn] = []

    def conv_block(self, i: int) -> ConvBlock:
        """Block ``i`` as what it is (a ``ModuleList`` hands out plain modules)."""
        return cast(ConvBlock, self.blocks[i])

    @property
    def slot_ids(self) -> tuple[str, ...]:
        return self.config.slot_ids

    def slot_channels(self, slot: str) -> int:
        """Channels of the features at ``slot`` (what a seed there must keep)."""
        return self.config.channels(slot_index(slot))

    def forward_to(self, x: torch.Tensor, slot: str, from_slot: str | None = None) -> torch.Tensor:
        """Features after ``slot``'s block, starting from the input or from ``from_slot``'s features."""
        start = 0 if from_slot is None else slot_index(from_slot) + 1
        for i in range(start, slot_index(slot) + 1):
            x = self._block(i, x)
        return x

    def forward_from(self, h: torch.Tensor, slot: str | None) -> torch.Tensor:
        """Logits from ``slot``'s features (``None``: from the input image)."""
        start = 0 if slot is None else slot_index(slot) + 1
        for i in range(start, len(self.blocks)):
            h = self._block(i, h)
        return self.classifier(h.flatten(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_from(x, None)

    def _block(self, i: int, x: torch.Tensor) -> torch.Tensor:
        block = self.conv_block(i)
        if not self._compiled:
            return block(x)
        torch._dynamo.maybe_mark_dynamic(x, 0)  # batch sizes vary: one entry serves them all
        return self._compiled[i](block, x)

    def compile_blocks(self, mode: str) -> None:
        """Run each block through its shape's compiled region (``compiled_block``); seeds change the
        model's topology, blocks never do."""
        self._compiled = [compiled_block(mode, b.conv.in_channels, b.conv.out_channels)
                          for b in map(self.conv_block, range(len(self.blocks)))]
