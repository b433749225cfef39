"""The envs trained as one batched model: one forward, one backward, one clip and one optimizer step per batch.

``--env-exec batched`` (the default). The per-env loop (``Env.train_step``, ``--env-exec per-env``)
stays as the reference: from the same state, one batch gives every env the same loss, gradients
and parameters either way, within float tolerance (``tests/trainer/simic/test_batched.py``).

A batch: zero the flat gradient buffer; the hosts' blocks as grouped convolutions with every
seed group after its slot (``trainer.kasmina.stacked``); the per-env cross-entropy, summed (the
envs' parameters are disjoint: each env's gradients are those of its own loss); backward; the
gradient telemetry's launches when due; the clip per (env, scope), host and each seed apart, as
the per-env loop does; SGD with momentum and weight decay over the flat buffers. Lifecycle
changes regroup the seeds between epochs (``prepare``), never inside one.

Off this path (the per-env loop runs, and the log says so): float16 with a GradScaler (its skipped
steps are a per-optimizer decision read on the host) and ``--compile-mode`` (it compiles the
per-env host blocks). ``trainer.simic.graphs`` replays this step as a CUDA graph.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from nissa.parts import layer_rows, segmented_histograms
from trainer.kasmina import stacked
from trainer.kasmina.host import slot_id
from trainer.kasmina.lifecycle import LifecycleConfig
from trainer.simic.batched_layout import Layout, Scope, SeedGroup, signature
from trainer.simic.runtime import DeviceRuntime
from trainer.simic.sites import LoopSites

if TYPE_CHECKING:
    from trainer.simic.env import Env, EnvConfig

logger = logging.getLogger(__name__)


class FlatGradients:
    """This batch's gradients of every env and scope, for the telemetry site (``LoopSites.collect_flat``)."""

    def __init__(self, layout: Layout) -> None:
        self._layout = layout

    @property
    def scopes(self) -> list[Scope]:
        return self._layout.scopes

    def layer_norms(self) -> torch.Tensor:
        """Per-tensor L2 norms of every scope's gradients, float64, [n_layers] (a scope's are consecutive)."""
        lay = self._layout
        g = lay.flat_g.detach().to(torch.float64)
        sums = torch.zeros(lay.n_layers, dtype=torch.float64, device=g.device).index_add_(0, lay.layer_seg, g * g)
        return sums.sqrt()

    def layer_stats(self) -> torch.Tensor:
        """``debug_layer_stats`` rows of every layer, [n_layers, 6]: one segmented reduction over the flat
        parameter and gradient buffers (``nissa.telemetry.debug_stats.layer_rows``)."""
        lay = self._layout
        return layer_rows(lay.flat_p, lay.flat_g, lay.layer_seg, lay.layer_sizes)

    def layer_histograms(self, bins: int) -> torch.Tensor:
        """Each layer's gradient and weight distributions, ``[2 * n_layers, bins + 4]`` (a layer's gradients,
        then its weights; ``nissa.histogram.segmented_histograms`` rows): one segmented binning of each buffer."""
        lay = self._layout
        g = segmented_histograms(lay.flat_g, lay.layer_seg, lay.n_layers, bins)
        w = segmented_histograms(lay.flat_p, lay.layer_seg, lay.n_layers, bins)
        return torch.stack([g, w], 1).reshape(2 * lay.n_layers, bins + 4)


class BatchedEnvs:
    """The batched step over a round's envs; ``prepare`` before each epoch's batches."""

    def __init__(self, cfg: EnvConfig, runtime: DeviceRuntime) -> None:
        self.cfg, self.runtime = cfg, runtime
        self.lifecycle: LifecycleConfig = cfg.lifecycle
        self._positions = [cfg.slots.index(slot_id(i)) if slot_id(i) in cfg.slots else -1
                           for i in range(cfg.host.n_blocks)]
        """Per host block, the position (network order) of the slot after it; -1 when none is configured."""
        self.layout: Layout | None = None
        self.regroups = 0
        """Layouts built (fresh hosts each round, and each epoch after a lifecycle change)."""
        self.fixed_alphas = False
        """Blend weights as device tensors updated in place (a captured graph reads them), not floats."""
        self.autocast_ctx = runtime.autocast()

    def prepare(self, envs: Sequence[Env]) -> None:
        """Between epochs: regroup when a lifecycle change altered the groups; this epoch's blend weights."""
        if self.layout is None or self.layout.signature != signature(envs):
            same_round = self.layout is not None and self.layout.n == len(envs) and \
                self.layout.signature[0][0] == id(envs[0].model)
            self.layout = Layout(envs, self.cfg.lr, self.cfg.seed_lr, self.runtime.device,
                                 previous=self.layout if same_round else None)
            self.regroups += 1
        layout = self.layout
        for position, groups in layout.groups.items():
            channels = envs[0].slots[position].channels
            for group in groups:
                group.set_alpha(channels, self.runtime.device, fixed=self.fixed_alphas)

    # --- one batch -------------------------------------------------------------------------------

    def train_step(self, x: torch.Tensor, y: torch.Tensor, measure: bool, telemetry: bool, sites: LoopSites) -> None:
        lay = self.layout
        assert lay is not None, "prepare() first"
        lay.flat_g.zero_()
        with self.autocast_ctx:
            losses = self.losses(x, y)
        losses.sum().backward()
        with torch.no_grad():
            lay.batches_tracked.add_(1)
            if telemetry:
                sites.collect_flat(FlatGradients(lay))
            norms = self._clip(lay)
            if measure and lay.n_seeds:
                self._record_grad_norms(lay, norms)
            self._sgd(lay)
            lay.loss_sums.add_(losses.detach().float())

    def losses(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Each env's mean cross-entropy on the batch, [n_envs]."""
        lay = self.layout
        assert lay is not None
        n = lay.n
        logits = self.forward(x)  # [n_envs, N, classes]
        per_image = F.cross_entropy(logits.reshape(n * x.shape[0], -1), y.repeat(n), reduction="none")
        return per_image.view(n, -1).mean(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lay = self.layout
        assert lay is not None
        host, n = lay.host, lay.n
        h = x
        for i in range(len(host.blocks)):
            h = stacked.host_block(host, lay.host_P, lay.host_B, i, h, n)
            for group in lay.groups.get(self._positions[i], ()):
                h = _apply_group(group, h, n)
        return stacked.host_logits(lay.host_P, h, n)

    # --- clip, gradient ratio, step ------------------------------------------------------------------

    def _clip(self, lay: Layout) -> torch.Tensor:
        """Clip each (env, scope) to ``grad_clip`` as ``clip_grad_norm_`` would; returns the norms before."""
        g = lay.flat_g
        sums = torch.zeros(len(lay.scopes), device=g.device).index_add_(0, lay.scope_seg, g * g)
        norms = sums.sqrt()
        coef = (self.cfg.grad_clip / (norms + 1e-6)).clamp_(max=1.0)
        g.mul_(coef.index_select(0, lay.scope_seg))
        return norms

    def _record_grad_norms(self, lay: Layout, norms: torch.Tensor) -> None:
        """``SeedSlot.record_grad_norms`` for every training seed at once, on the device."""
        cfg = self.lifecycle
        seed_norm, host_norm = norms.index_select(0, lay.seed_scope), norms.index_select(0, lay.seed_host)
        raw = seed_norm / host_norm.clamp_min(1e-12) * lay.seed_scale
        finite = torch.isfinite(raw)
        ratio = torch.where(finite, raw.clamp(max=cfg.grad_ratio_clamp), cfg.grad_ratio_clamp)
        healthy = (finite & (seed_norm > 1e-7) & (raw < cfg.grad_ratio_clamp)).float()
        buf = lay.grad_bufs.index_select(0, lay.seed_rows)
        first = buf[:, 4] == 0
        d = cfg.grad_ema_decay
        ema = torch.where(first, ratio, d * buf[:, 0] + (1 - d) * ratio)
        health = torch.where(first, healthy, d * buf[:, 1] + (1 - d) * healthy)
        lay.grad_bufs.index_copy_(0, lay.seed_rows, torch.stack([ema, health, seed_norm, raw, buf[:, 4] + 1], 1))

    def _sgd(self, lay: Layout) -> None:
        """``torch.optim.SGD`` (momentum, weight decay, no dampening) over the flat buffers; a fresh
        momentum slice is zero, which gives SGD's first step (the buffer starts as the gradient)."""
        cfg = self.cfg
        lay.flat_m.mul_(cfg.momentum).add_(lay.flat_g).add_(lay.flat_p, alpha=cfg.weight_decay)
        lay.flat_p.addcmul_(lay.flat_m, lay.neg_lr)

    def finish_epoch(self, envs: Sequence[Env], batches: int) -> None:
        for env in envs:
            env.batches += batches


def _apply_group(group: SeedGroup, h: torch.Tensor, n: int) -> torch.Tensor:
    """The features after one seed group's slot: its members' seeds joined in, every other env's passed."""
    s = len(group.members)
    if group.index is None:
        part = h
    else:
        b, _, height, width = h.shape
        part = h.view(b, n, -1, height, width).index_select(1, group.index).reshape(b, -1, height, width)
    if group.training:
        # A fresh leaf that requires grad, as the per-env slot does (torch's CPU GroupNorm backward needs it).
        out = stacked.seed_body(group.body, group.P, part.detach().requires_grad_(), s)
        joined = part + (out - out.detach())
    else:
        joined = stacked.blend(group.style, group.P, part, stacked.seed_body(group.body, group.P, part, s),
                               group.alpha, s)
    if group.index is None:
        return joined
    b, _, height, width = h.shape
    merged = h.view(b, n, -1, height, width).index_copy(1, group.index, joined.reshape(b, s, -1, height, width))
    return merged.view(b, -1, height, width)


def batched_envs(env_exec: str, cfg: EnvConfig, runtime: DeviceRuntime) -> BatchedEnvs | None:
    """The batched step for ``--env-exec batched``; None (each env in turn) for ``per-env``, and where the
    batched step does not apply: float16 with a GradScaler, and compiled host blocks (``--compile-mode``)."""
    if env_exec == "per-env":
        return None
    if env_exec != "batched":
        raise ValueError(f"unknown env execution {env_exec!r}; known: batched, per-env")
    if runtime.uses_scaler:
        logger.info("--env-exec batched: float16 with a GradScaler trains env by env")
        return None
    if cfg.compile_mode != "off":
        logger.info("--env-exec batched: --compile-mode %s compiles the per-env blocks; envs train one by one",
                    cfg.compile_mode)
        return None
    return BatchedEnvs(cfg, runtime)
