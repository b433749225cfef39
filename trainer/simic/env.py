"""One environment: a fresh host with seed slots, its optimizers, and what the policy observes of it."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from leyline import AnyPayload
from leyline.esper import SeedFossilized, SeedPruned, SeedStage, SeedStageChanged, SlotSnapshot
from trainer.kasmina.blueprints import param_count
from trainer.kasmina.host import CNNHost, HostConfig, slot_index
from trainer.kasmina.lifecycle import BLENDED_STAGES, STAGE_POTENTIAL, LifecycleConfig
from trainer.kasmina.model import MorphogeneticModel
from trainer.kasmina.slot import SeedSlot
from trainer.simic.counterfactual import fused_validation
from trainer.simic.runtime import DeviceRuntime
from trainer.simic.sites import LoopSites
from trainer.tamiyo.actions import Action, Op
from trainer.tamiyo.features import HISTORY

GRAD_FIELDS = 5  # SeedSlot.grad_buf entries


@dataclass(frozen=True)
class EnvConfig:
    """What every env of a run shares."""

    host: HostConfig
    slots: tuple[str, ...]
    lifecycle: LifecycleConfig
    episode_length: int
    lr: float = 0.01
    """SGD learning rate of the host."""
    seed_lr: float = 0.01
    """SGD learning rate of each seed."""
    momentum: float = 0.9
    weight_decay: float = 5e-4
    grad_clip: float = 5.0
    """Host and each seed are clipped separately to this global norm."""
    compile_mode: str = "off"


def _sgd(params: list[nn.Parameter], cfg: EnvConfig, lr: float, fused: bool) -> torch.optim.SGD:
    # Fused with a GradScaler: the scaler hands it the inf check as a tensor; an unfused step reads
    # it on the host (one sync per optimizer per batch).
    return torch.optim.SGD(params, lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay,
                           fused=fused or None)


class Env:
    """A host, its seeds and their optimizers; the signals the policy reads are plain attributes."""

    def __init__(self, index: int, round_: int, cfg: EnvConfig, runtime: DeviceRuntime) -> None:
        self.index, self.round, self.cfg, self.runtime = index, round_, cfg, runtime
        with runtime.device:  # parameters made on the device: no blocking upload per tensor
            model = MorphogeneticModel(CNNHost(cfg.host), cfg.slots, cfg.lifecycle)
        # torch's stubs: Module.to's overloads omit the memory_format it takes.
        self.model: MorphogeneticModel = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        if cfg.compile_mode != "off":
            self.model.host.compile_blocks(cfg.compile_mode)
        self.host_params = list(self.model.host.parameters())
        self.host_opt = _sgd(self.host_params, cfg, cfg.lr, runtime.uses_scaler)
        self.seed_opts: dict[str, torch.optim.SGD] = {}
        self.scaler = runtime.new_scaler()
        self._trainable: list[tuple[SeedSlot, list[nn.Parameter], torch.optim.SGD]] = []
        self.train_loss_sum = torch.zeros((), device=runtime.device)
        self.batches = 0
        # Signals read by the features (tamiyo.features.EnvSignals).
        self.epoch_in_episode, self.episode_length = 0, cfg.episode_length
        self.val_acc, self.val_loss, self.train_loss = 0.0, 0.0, 0.0
        self.loss_history: deque[float] = deque(maxlen=HISTORY)
        self.acc_history: deque[float] = deque(maxlen=HISTORY)
        self.last_action_ok, self.last_op = True, int(Op.WAIT)
        self.germinated = self.fossilized = self.pruned = 0

    @property
    def slots(self) -> list[SeedSlot]:
        return self.model.slots

    @property
    def host_size(self) -> int:
        """Parameters of the host alone (what a seed's parameters are a share of)."""
        return self.model.host_params

    # --- training ------------------------------------------------------------------------

    def train_step(self, x: torch.Tensor, y: torch.Tensor, measure: bool, telemetry: bool, sites: LoopSites) -> None:
        """One batch: forward under autocast, backward outside it, clip host and seeds apart, step.

        ``measure``: fold this batch's seed/host gradient ratio into the seeds' EMAs (feeds G2);
        ``telemetry``: hand the gradients to the telemetry site first."""
        opts = [self.host_opt, *(opt for _, _, opt in self._trainable)]
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        with self.runtime.autocast():
            loss = F.cross_entropy(self.model(x), y)
        scaler = self.scaler
        if scaler is None:
            loss.backward()
        else:
            scaler.scale(loss).backward()
            for opt in opts:
                scaler.unscale_(opt)
        if telemetry:
            sites.collect_env(self.index, self.gradient_scopes())
        host_norm = nn.utils.clip_grad_norm_(self.host_params, self.cfg.grad_clip, foreach=True)
        for slot, params, _ in self._trainable:
            seed_norm = nn.utils.clip_grad_norm_(params, self.cfg.grad_clip, foreach=True)
            if measure:
                slot.record_grad_norms(host_norm, seed_norm, self.model.host_params)
        for opt in opts:
            if scaler is None:
                opt.step()
            else:
                scaler.step(opt)
        if scaler is not None:
            scaler.update()
        self.train_loss_sum += loss.detach().float()
        self.batches += 1

    def validate(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
        """One device row: [train loss, val acc, val loss, contribution per slot (NaN: not
        measured), grad_buf per slot]; and the slots whose contribution was measured."""
        ablate = [i for i, s in enumerate(self.slots) if s.seed is not None and s.stage in BLENDED_STAGES]
        acc, loss = fused_validation(self.model, x, y, ablate, self.runtime.autocast())
        contrib = torch.full((len(self.slots),), math.nan, device=acc.device)
        for j, i in enumerate(ablate):  # integer indices: device-side copies, no host round trip
            contrib[i] = acc[0] - acc[1 + j]
        train = self.train_loss_sum / max(self.batches, 1)
        grads = torch.cat([s.grad_buf for s in self.slots])
        return torch.cat([torch.stack([train, acc[0], loss[0]]), contrib, grads]), ablate

    def absorb(self, row: list[float]) -> None:
        """Take this env's row of the epoch's single device→host transfer."""
        n = len(self.slots)
        self.train_loss, self.val_acc, self.val_loss = row[0], row[1], row[2]
        self.loss_history.append(self.val_loss)
        self.acc_history.append(self.val_acc)
        for i, slot in enumerate(self.slots):
            c = row[3 + i]
            slot.observe_contribution(None if math.isnan(c) else c)
            base = 3 + n + GRAD_FIELDS * i
            slot.absorb_grad_stats(row[base: base + GRAD_FIELDS])

    # --- lifecycle -----------------------------------------------------------------------

    def begin_epoch(self) -> list[AnyPayload]:
        self.epoch_in_episode += 1
        self.train_loss_sum.zero_()
        self.batches = 0
        events: list[AnyPayload] = []
        for slot in self.slots:
            events += self._settle(slot, slot.begin_epoch())
        self.model.train()
        self._refresh()
        return events

    def end_epoch(self) -> None:
        for slot in self.slots:
            slot.end_epoch()

    def apply(self, action: Action) -> list[AnyPayload]:
        """Carry out the policy's action (legal under the masks; anything else raises)."""
        slot = self.slots[action.slot]
        ok, events = True, []
        if action.op is Op.GERMINATE:
            self.germinated += 1
            seed_id = f"r{self.round}e{self.index}s{self.germinated}"
            with self.runtime.on_env_stream(self.index):  # init kernels on this env's stream
                events = slot.germinate(action.blueprint, action.style, action.tempo, seed_id, self.runtime.device)
        elif action.op is Op.ADVANCE:
            ok, events = slot.advance()
        elif action.op is Op.FOSSILIZE:
            ok, events = slot.fossilize()
            if ok:
                self.fossilized += 1
                events.append(SeedFossilized(slot=slot.slot_id, seed_id=slot.seed_id or "",
                                             blueprint=slot.blueprint or "", params=slot.params,
                                             contribution=slot.contribution, host_params=self.model.host_params))
        elif action.op is Op.PRUNE:
            measured = "" if slot.contribution is None else f" at contribution {100 * slot.contribution:+.1f} pp"
            events = slot.prune(action.alpha_speed, action.alpha_curve, f"policy prune{measured}")
        elif action.op is Op.SET_ALPHA_TARGET:
            events = slot.set_alpha_target(action.alpha_target, action.alpha_speed, action.alpha_curve)
        self.last_op, self.last_action_ok = int(action.op), ok
        events = self._settle(slot, events)
        self._refresh()
        return events

    def _settle(self, slot: SeedSlot, events: list[AnyPayload]) -> list[AnyPayload]:
        """Follow-ups of stage changes: a removed seed loses its optimizer and is reported pruned."""
        for event in list(events):
            if isinstance(event, SeedStageChanged) and event.to_stage is SeedStage.PRUNED:
                self.seed_opts.pop(slot.slot_id, None)
                self.pruned += 1
                events.append(SeedPruned(slot=slot.slot_id, seed_id=event.seed_id, blueprint=slot.blueprint or "",
                                         reason=event.reason, contribution=slot.contribution))
        return events

    def _refresh(self) -> None:
        """Cache which seeds train this epoch, so the batch loop asks no questions."""
        self._trainable = []
        for slot in self.slots:
            if slot.seed is not None and slot.slot_id not in self.seed_opts:
                self.seed_opts[slot.slot_id] = _sgd(list(slot.seed.parameters()), self.cfg, self.cfg.seed_lr,
                                                    self.runtime.uses_scaler)
            if slot.trainable:
                assert slot.seed is not None
                params = [p for p in slot.seed.parameters() if p.requires_grad]
                self._trainable.append((slot, params, self.seed_opts[slot.slot_id]))

    # --- views ---------------------------------------------------------------------------

    def gradient_scopes(self) -> dict[str, nn.Module]:
        """The host and every training seed, by scope name ("host" or the slot id)."""
        scopes: dict[str, nn.Module] = {"host": self.model.host}
        for slot, _, _ in self._trainable:
            assert slot.seed is not None
            scopes[slot.slot_id] = slot.seed
        return scopes

    def fossilized_params(self) -> int:
        """Parameters the fossilized seeds added to the host."""
        return sum(s.params for s in self.slots if s.stage is SeedStage.FOSSILIZED)

    def extra_compute(self) -> float:
        """Training compute of the attached seeds over the host's, per image. A weight costs one
        multiply-add per position of the feature map it acts on (for pooled blueprints, such as
        attention, an upper bound); the host's convolutions act before their pooling."""
        cfg = self.model.host.config
        side = [cfg.image_size // 2**i for i in range(cfg.n_blocks + 1)]
        host = sum(param_count(self.model.host.conv_block(i).conv) * side[i] ** 2 for i in range(cfg.n_blocks))
        host += param_count(self.model.host.classifier)
        extra = sum(s.params * side[slot_index(s.slot_id) + 1] ** 2 for s in self.slots if s.seed is not None)
        return extra / host

    def potential(self) -> float:
        return sum(STAGE_POTENTIAL.get(s.stage, 0.0) for s in self.slots)

    def snapshot(self) -> list[SlotSnapshot]:
        return [SlotSnapshot(slot=s.slot_id, stage=None if s.stage is SeedStage.DORMANT else s.stage,
                             seed_id=s.seed_id, blueprint=s.blueprint, alpha=s.alpha.alpha,
                             contribution=s.contribution) for s in self.slots]
