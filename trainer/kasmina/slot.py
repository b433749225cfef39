"""A seed slot: one seed's module, its lifecycle stage, its alpha and its gradient statistics.

Lifecycle methods return the events they caused (leyline payloads); the caller emits them.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from leyline import AnyPayload
from leyline.esper import SeedGateEvaluated, SeedGerminated, SeedStage, SeedStageChanged
from trainer.kasmina.alpha import AlphaController
from trainer.kasmina.blueprints import build_blueprint, param_count
from trainer.kasmina.lifecycle import (
    BLENDED_STAGES,
    LIVE_STAGES,
    GateResult,
    GradStats,
    LifecycleConfig,
    check_transition,
    gate_g1,
    gate_g2,
    gate_g3,
    gate_g5,
)

S = SeedStage
# The policy's style head indexes this order.
BLEND_STYLES: tuple[str, ...] = ("linear_add", "linear_multiply", "sigmoid_add", "gated")


class SeedModule(nn.Module):
    """A blueprint's module plus how its output joins the host's (the blend style)."""

    def __init__(self, blueprint: str, channels: int, style: str) -> None:
        super().__init__()
        if style not in BLEND_STYLES:
            raise ValueError(f"unknown blend style {style!r}; known: {', '.join(BLEND_STYLES)}")
        self.blueprint, self.style = blueprint, style
        self.body = build_blueprint(blueprint, channels)
        self.gate = nn.Parameter(torch.zeros(1, channels, 1, 1)) if style == "gated" else None

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.body(h)

    def blend(self, h: torch.Tensor, s: torch.Tensor, alpha: float) -> torch.Tensor:
        """The slot's output at blend weight ``alpha`` (0: the host's features, unchanged)."""
        if self.style == "linear_add":
            return h + alpha * (s - h)
        if self.style == "linear_multiply":
            return h * (1.0 + alpha * torch.tanh(s - h))
        if self.style == "sigmoid_add":
            return h + alpha * (2.0 * torch.sigmoid(s - h) - 1.0)
        assert self.gate is not None
        return h + alpha * torch.sigmoid(self.gate) * (s - h)


class SeedSlot(nn.Module):
    """The place after one host block where a seed can live; DORMANT means empty."""

    grad_buf: torch.Tensor

    def __init__(self, slot_id: str, channels: int, config: LifecycleConfig) -> None:
        super().__init__()
        self.slot_id, self.channels, self.config = slot_id, channels, config
        self.stage: SeedStage = S.DORMANT
        self.seed: SeedModule | None = None
        self.seed_id: str | None = None
        self.blueprint: str | None = None
        self.params = 0
        self.alpha = AlphaController()
        self.tempo = 0
        self.epochs_in_stage = 0
        self.age = 0
        self.pruning = False
        self.contribution: float | None = None
        self.prev_contribution: float | None = None
        self.grads = GradStats()
        # [ratio EMA, health EMA, last seed norm, last raw ratio, measurements]: updated on the
        # device at telemetry strides, read once per epoch with everything else.
        self.register_buffer("grad_buf", torch.zeros(5), persistent=False)

    # --- forward -------------------------------------------------------------------------

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        seed = self.seed
        if seed is None or self.stage not in BLENDED_STAGES and self.stage is not S.TRAINING:
            return h
        if self.stage is S.TRAINING:
            if not torch.is_grad_enabled():
                return h  # the forward value is the host's: nothing to compute at eval
            # A fresh leaf that requires grad, not a bare detach: torch's CPU GroupNorm backward
            # crashes on a channels-last input that does not require grad (seen in torch 2.13).
            s = seed(h.detach().requires_grad_())
            # Straight-through: the value is the host's, the seed still gets dL/d(out).
            return h + (s - s.detach())
        return seed.blend(h, seed(h), self.alpha.alpha)

    @property
    def trainable(self) -> bool:
        """The seed's optimizer should step (it is in the forward and not being pruned)."""
        return self.seed is not None and not self.pruning and (
            self.stage is S.TRAINING or self.stage in BLENDED_STAGES)

    @property
    def live(self) -> bool:
        return self.stage in LIVE_STAGES

    # --- lifecycle ----------------------------------------------------------------------

    def _to(self, stage: SeedStage, reason: str) -> list[AnyPayload]:
        check_transition(self.stage, stage)
        event = SeedStageChanged(slot=self.slot_id, seed_id=self.seed_id or "", from_stage=self.stage,
                                 to_stage=stage, reason=reason)
        self.stage, self.epochs_in_stage = stage, 0
        return [event]

    def _gate(self, result: GateResult) -> AnyPayload:
        gate = result.gate
        return SeedGateEvaluated(slot=self.slot_id, seed_id=self.seed_id or "", gate=gate,
                                 passed=result.passed, reason=result.reason)

    def germinate(self, blueprint: str, style: str, tempo: int, seed_id: str,
                  device: torch.device) -> list[AnyPayload]:
        """DORMANT → GERMINATED with a fresh ``blueprint`` module on ``device``."""
        check_transition(self.stage, S.GERMINATED)
        # Made on the device (no blocking upload per tensor), channels-last like the host: about
        # twice as fast for these convolutions on CPU and GPU.
        with device:
            seed = SeedModule(blueprint, self.channels, style)
        # torch's stubs: Module.to's overloads omit the memory_format it takes.
        self.seed = seed.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        self.seed_id, self.blueprint, self.tempo = seed_id, blueprint, tempo
        self.params = param_count(self.seed)
        self.age, self.pruning = 0, False
        self.alpha = AlphaController()
        self.contribution = self.prev_contribution = None
        self.grads = GradStats()
        self.grad_buf.zero_()
        born = SeedGerminated(slot=self.slot_id, seed_id=seed_id, blueprint=blueprint, params=self.params)
        return [born, *self._to(S.GERMINATED, f"germinated {blueprint}")]

    def advance(self) -> tuple[bool, list[AnyPayload]]:
        """Try the gate out of the current stage (G1, G2 or G3) and move on if it passes."""
        if self.stage is S.GERMINATED:
            result, target = gate_g1(self.stage), S.TRAINING
        elif self.stage is S.TRAINING:
            result, target = gate_g2(self.stage, self.epochs_in_stage, self.grads, self.config), S.BLENDING
        elif self.stage is S.BLENDING:
            result, target = gate_g3(self.stage, self.alpha.alpha, self.alpha.holding), S.HOLDING
        else:
            raise ValueError(f"{self.slot_id}: nothing to advance from {self.stage.value}")
        events = [self._gate(result)]
        if not result.passed:
            return False, events
        events += self._to(target, f"{result.gate} passed: {result.reason}")
        if target is S.BLENDING:
            self.alpha.retarget(1.0, self.tempo)
        return True, events

    def fossilize(self) -> tuple[bool, list[AnyPayload]]:
        """HOLDING → FOSSILIZED if G5 passes."""
        result = gate_g5(self.stage, self.contribution)
        events = [self._gate(result)]
        if result.passed:
            events += self._to(S.FOSSILIZED, f"G5 passed: {result.reason}")
        return result.passed, events

    def set_alpha_target(self, target: float, ticks: int, curve: str) -> list[AnyPayload]:
        """Retarget a blending or holding seed; a holding seed whose alpha moves goes back to BLENDING."""
        if self.stage not in (S.BLENDING, S.HOLDING) or self.pruning:
            raise ValueError(f"{self.slot_id}: cannot set alpha in {self.stage.value}")
        self.alpha.retarget(target, ticks, curve)
        if self.stage is S.HOLDING and not (self.alpha.holding and math.isclose(self.alpha.alpha, 1.0)):
            return self._to(S.BLENDING, f"alpha target {target}")
        return []

    def prune(self, ticks: int, curve: str, reason: str) -> list[AnyPayload]:
        """Remove the seed now, or (``ticks`` > 0 and blended in) ramp alpha to 0 with the seed frozen first."""
        if not self.live or self.pruning:
            raise ValueError(f"{self.slot_id}: cannot prune in {self.stage.value}")
        if ticks > 0 and self.stage in BLENDED_STAGES and self.alpha.alpha > 0.0:
            self.pruning = True
            assert self.seed is not None
            self.seed.requires_grad_(False)
            self.alpha.retarget(0.0, ticks, curve)
            return []
        return self._remove(reason)

    def _remove(self, reason: str) -> list[AnyPayload]:
        events = self._to(S.PRUNED, reason)
        self.seed, self.pruning = None, False
        self.alpha = AlphaController()
        return events

    def begin_epoch(self) -> list[AnyPayload]:
        """Before an epoch trains: alpha moves one tick, then the automatic transitions."""
        self.alpha.tick()
        if self.stage is S.GERMINATED:
            ok, events = self.advance()
            return events if ok else []
        if self.pruning and self.alpha.holding:
            return self._remove("scheduled prune finished")
        if self.stage is S.PRUNED:
            return self._to(S.EMBARGOED, "embargo")
        if self.stage is S.EMBARGOED and self.epochs_in_stage >= self.config.embargo_epochs:
            return self._to(S.RESETTING, "embargo over")
        if self.stage is S.RESETTING and self.epochs_in_stage >= 1:
            events = self._to(S.DORMANT, "reset")
            self.seed_id = self.blueprint = None
            self.params, self.age, self.tempo = 0, 0, 0
            self.contribution = self.prev_contribution = None
            self.grads = GradStats()
            return events
        return []

    def end_epoch(self) -> None:
        """After an epoch trained: it counts toward the stage and the seed's age."""
        self.epochs_in_stage += 1
        if self.live:
            self.age += 1

    # --- measurements -------------------------------------------------------------------

    def observe_contribution(self, value: float | None) -> None:
        self.prev_contribution, self.contribution = self.contribution, value

    @torch.no_grad()
    def record_grad_norms(self, host_norm: torch.Tensor, seed_norm: torch.Tensor, host_params: int) -> None:
        """Fold one measurement of (‖g_seed‖/‖g_host‖)·sqrt(P_host/P_seed) into the EMAs, on the device."""
        cfg, buf = self.config, self.grad_buf
        raw = seed_norm / host_norm.clamp_min(1e-12) * math.sqrt(host_params / max(self.params, 1))
        finite = torch.isfinite(raw)
        ratio = torch.where(finite, raw.clamp(max=cfg.grad_ratio_clamp), cfg.grad_ratio_clamp)
        healthy = (finite & (seed_norm > 1e-7) & (raw < cfg.grad_ratio_clamp)).float()
        first = buf[4] == 0
        d = cfg.grad_ema_decay
        ema = torch.where(first, ratio, d * buf[0] + (1 - d) * ratio)
        health = torch.where(first, healthy, d * buf[1] + (1 - d) * healthy)
        buf.copy_(torch.stack([ema, health, seed_norm.float(), raw.float(), buf[4] + 1]))

    def absorb_grad_stats(self, values: list[float]) -> None:
        """Take this slot's ``grad_buf`` as read back at the epoch's transfer."""
        ema, health, norm, raw, count = values
        if count == 0:
            return
        self.grads = GradStats(ratio_ema=ema, health=health, norm=norm, vanishing=norm < 1e-7,
                               exploding=not math.isfinite(raw) or raw >= self.config.grad_ratio_clamp,
                               measurements=int(count))
