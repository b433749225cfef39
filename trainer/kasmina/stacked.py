"""Forward passes of several envs' modules at once, over their parameters stacked along dim 0.

The hosts of a round share one architecture and seeds come from a few blueprints, so the
modules of S envs run as one: every tensor of the S copies is concatenated along its first
dimension (a conv weight ``[C_out, C_in, k, k]`` becomes ``[S·C_out, C_in, k, k]``, a norm's
weight ``[C]`` becomes ``[S·C]``, a linear weight ``[O, I]`` becomes ``[S·O, I]``) and the
features of the S envs sit side by side along channels, ``[N, S·C, H, W]``. Then:

- a convolution is one grouped convolution with S times the groups (the first host block
  reads the same images for every env: one convolution with all envs' filters);
- BatchNorm and GroupNorm are per channel (per group of channels): the stacked norm with S
  times the groups is exactly the S norms;
- a linear layer is one batched matrix product, ``[S, N, I] @ [S, I, O]``;
- element-wise ops and pooling are per channel already.

Each function below computes what the per-env module computes, for every env, in one launch per
op. ``P`` maps a module's own parameter names (``named_parameters()``) to the stacked tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from trainer.kasmina.blueprints import (
    AttentionSeed,
    BottleneckSeed,
    ConvSeed,
    ConvSmallSeed,
    DepthwiseSeed,
    NormSeed,
)
from trainer.kasmina.host import CNNHost

Stacked = Mapping[str, torch.Tensor]


def conv(m: nn.Conv2d, P: Stacked, name: str, x: torch.Tensor, s: int, shared_input: bool = False) -> torch.Tensor:
    """``m`` of S envs; ``shared_input``: ``x`` is one batch every env reads (not S envs' features)."""
    bias = P.get(f"{name}.bias")
    groups = m.groups if shared_input else m.groups * s
    return F.conv2d(x, P[f"{name}.weight"], bias, m.stride, m.padding, m.dilation, groups)


def group_norm(m: nn.GroupNorm, P: Stacked, name: str, x: torch.Tensor, s: int) -> torch.Tensor:
    return F.group_norm(x, m.num_groups * s, P.get(f"{name}.weight"), P.get(f"{name}.bias"), m.eps)


def linear(P: Stacked, name: str, x: torch.Tensor, s: int) -> torch.Tensor:
    """``x`` [S, N, I] → [S, N, O]."""
    w = P[f"{name}.weight"]
    out, inp = w.shape[0] // s, w.shape[1]
    w = w.view(s, out, inp).transpose(1, 2)
    bias = P.get(f"{name}.bias")
    if bias is None:
        return torch.bmm(x, w)
    return torch.baddbmm(bias.view(s, 1, out), x, w)


# --- the host ------------------------------------------------------------------------------------


def host_block(host: CNNHost, P: Stacked, B: Stacked, i: int, x: torch.Tensor, s: int) -> torch.Tensor:
    """Block ``i`` of S hosts (``B``: their stacked BatchNorm running statistics, updated in place)."""
    block = host.conv_block(i)
    h = conv(block.conv, P, f"blocks.{i}.conv", x, s, shared_input=i == 0)
    bn = block.bn
    assert bn.momentum is not None  # the host's BatchNorms keep running averages, never cumulative ones
    h = F.batch_norm(h, B[f"blocks.{i}.bn.running_mean"], B[f"blocks.{i}.bn.running_var"],
                     P[f"blocks.{i}.bn.weight"], P[f"blocks.{i}.bn.bias"], True, bn.momentum, bn.eps)
    return F.max_pool2d(torch.relu(h), 2)


def host_logits(P: Stacked, h: torch.Tensor, s: int) -> torch.Tensor:
    """Logits [S, N, classes] from the last block's features [N, S·C, h, w]."""
    n = h.shape[0]
    feats = h.flatten(1).view(n, s, -1).transpose(0, 1)
    return linear(P, "classifier", feats, s)


# --- seeds ---------------------------------------------------------------------------------------


def _norm(m: NormSeed, P: Stacked, p: str, x: torch.Tensor, s: int) -> torch.Tensor:
    c = x.shape[1] // s
    scale = torch.tanh(P[f"{p}scale"]).repeat_interleave(c).view(1, s * c, 1, 1)
    return x + scale * group_norm(m.norm, P, f"{p}norm", x, s)


def _attention(m: AttentionSeed, P: Stacked, p: str, x: torch.Tensor, s: int) -> torch.Tensor:
    n, sc = x.shape[0], x.shape[1]
    pooled = x.mean(dim=(2, 3)).view(n, s, sc // s).transpose(0, 1)
    hidden = torch.relu(linear(P, f"{p}fc.0", pooled, s))
    gate = 2.0 * torch.sigmoid(linear(P, f"{p}fc.2", hidden, s))
    return x * gate.transpose(0, 1).reshape(n, sc)[:, :, None, None]


def _depthwise(m: DepthwiseSeed, P: Stacked, p: str, x: torch.Tensor, s: int) -> torch.Tensor:
    h = conv(m.pw, P, f"{p}pw", conv(m.dw, P, f"{p}dw", x, s), s)
    return x + group_norm(m.norm, P, f"{p}norm", h, s)


def _bottleneck(m: BottleneckSeed, P: Stacked, p: str, x: torch.Tensor, s: int) -> torch.Tensor:
    h = torch.relu(conv(m.down, P, f"{p}down", x, s))
    h = torch.relu(conv(m.conv, P, f"{p}conv", h, s))
    return x + conv(m.up, P, f"{p}up", h, s)


def _conv_small(m: ConvSmallSeed, P: Stacked, p: str, x: torch.Tensor, s: int) -> torch.Tensor:
    return x + group_norm(m.norm, P, f"{p}norm", conv(m.conv, P, f"{p}conv", x, s), s)


def _conv_seed(m: ConvSeed, P: Stacked, p: str, x: torch.Tensor, s: int) -> torch.Tensor:
    h = x
    for j, layer in enumerate(m.body):
        if isinstance(layer, nn.Conv2d):
            h = conv(layer, P, f"{p}body.{j}", h, s)
        elif isinstance(layer, nn.GroupNorm):
            h = group_norm(layer, P, f"{p}body.{j}", h, s)
        else:
            h = torch.relu(h)
    return x + h


# Each forward takes the module of its key's type (``seed_body`` looks it up by the exact type).
_BODIES: dict[type[nn.Module], Callable[[Any, Stacked, str, torch.Tensor, int], torch.Tensor]] = {
    NormSeed: _norm, AttentionSeed: _attention, DepthwiseSeed: _depthwise, BottleneckSeed: _bottleneck,
    ConvSmallSeed: _conv_small, ConvSeed: _conv_seed}


def seed_body(body: nn.Module, P: Stacked, x: torch.Tensor, s: int) -> torch.Tensor:
    """A blueprint module (``SeedModule.body``) of S envs; its parameters are ``P["body.…"]``."""
    try:
        fn = _BODIES[type(body)]
    except KeyError:
        raise TypeError(f"no stacked forward for blueprint module {type(body).__name__}") from None
    return fn(body, P, "body.", x, s)


def blend(style: str, P: Stacked, h: torch.Tensor, out: torch.Tensor, alpha: float | torch.Tensor,
          s: int) -> torch.Tensor:
    """``SeedModule.blend`` of S envs; ``alpha`` a float, or one weight per channel ``[1, S·C, 1, 1]``."""
    if style == "linear_add":
        return h + alpha * (out - h)
    if style == "linear_multiply":
        return h * (1.0 + alpha * torch.tanh(out - h))
    if style == "sigmoid_add":
        return h + alpha * (2.0 * torch.sigmoid(out - h) - 1.0)
    gate = P["gate"].view(1, -1, 1, 1)
    return h + alpha * torch.sigmoid(gate) * (out - h)
