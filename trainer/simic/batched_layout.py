"""Where the batched envs' parameters live: one flat buffer, stacked views of it, and each env's own views.

Every trainable tensor of every env (hosts, and seeds that train) lives in ONE flat parameter
buffer, with its gradient in one flat gradient buffer and its momentum in one flat momentum
buffer. A module's tensor of S envs is a contiguous block of the flat buffer (the S copies one
after the other), seen as the stacked tensor ``[S·d0, d1, …]`` that ``trainer.kasmina.stacked``
runs, a leaf whose ``.grad`` is the same block of the gradient buffer (backward accumulates
there in place). Each env's own ``nn.Parameter`` is re-pointed at its slice of the block, so
the env's modules (validation, checkpoints, anything that reads an env) always see the current
values, with no copy. The optimizer step, the clip and the gradient statistics are then a few
ops over the flat buffers, whatever the number of envs and tensors.

Seeds are grouped by (slot, blueprint, blend style, TRAINING or blended, trainable) across envs;
a group over some of the envs gathers and scatters their channels by an index. A layout holds
until a lifecycle change (germinate, prune, a stage change, a fossilized seed) alters the
groups: ``signature`` says when, and a new layout carries values and momentum over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import nn

from leyline.esper import SeedStage
from trainer.kasmina.lifecycle import BLENDED_STAGES
from trainer.kasmina.slot import SeedModule, SeedSlot

if TYPE_CHECKING:
    from trainer.simic.env import Env

SlotKey = tuple[int, str | None, bool, str | None]
"""One slot's part of a signature: (id of its seed, mode, trainable, style)."""
Signature = tuple[tuple[int, tuple[SlotKey, ...]], ...]
"""(id of its model, its slots' keys) per env."""


def _batches_tracked(bn: nn.BatchNorm2d) -> torch.Tensor:
    assert bn.num_batches_tracked is not None  # the host's BatchNorms track running statistics
    return bn.num_batches_tracked


def _seed_of(slot: SeedSlot) -> SeedModule:
    assert slot.seed is not None  # a slot in a group holds a seed (``_mode``)
    return slot.seed


def _mode(slot: SeedSlot) -> str | None:
    """How the slot's seed joins the forward: "train" (straight-through), "blend", or None (not at all)."""
    if slot.seed is None:
        return None
    if slot.stage is SeedStage.TRAINING:
        return "train"
    return "blend" if slot.stage in BLENDED_STAGES else None


def signature(envs: Sequence[Env]) -> Signature:
    """What the groups depend on; alphas change every epoch and are set apart (``SeedGroup.alpha``)."""
    return tuple((id(env.model), tuple((id(s.seed), _mode(s), s.trainable, s.seed.style if s.seed else None)
                                       for s in env.slots)) for env in envs)


@dataclass
class SeedGroup:
    """The seeds of one (slot, blueprint, style, mode, trainable) across ``members`` (env indices)."""

    position: int
    """The slot's index in network order."""
    members: list[int]
    slots: list[SeedSlot]
    training: bool
    """TRAINING (straight-through, detached input) or blended in."""
    style: str
    body: nn.Module
    """A member's blueprint module (its hyperparameters; the tensors are ``P``)."""
    P: dict[str, torch.Tensor] = field(default_factory=dict)
    index: torch.Tensor | None = None
    """The members on the device; None when every env is a member, in order."""
    alpha: float | torch.Tensor = 0.0

    def set_alpha(self, channels: int, device: torch.device, fixed: bool = False) -> None:
        """The members' blend weights: one float when they agree, else one per channel (no upload);
        ``fixed``: always per channel, in the same tensor from epoch to epoch (a captured graph reads it)."""
        alphas = [s.alpha.alpha for s in self.slots]
        if not fixed and all(a == alphas[0] for a in alphas):
            self.alpha = alphas[0]
            return
        values = torch.cat([torch.full((channels,), a, device=device) for a in alphas]).view(1, -1, 1, 1)
        if fixed and isinstance(self.alpha, torch.Tensor):
            self.alpha.copy_(values)
        else:
            self.alpha = values


@dataclass(frozen=True)
class Scope:
    """One env's host or one env's training seed: what is clipped together and reported as a scope."""

    env: int
    name: str
    """"host" or the slot id."""
    first: int
    """Its first layer (layers of a scope are consecutive, in ``named_parameters`` order)."""
    names: tuple[str, ...]
    n_params: int


@dataclass
class _Block:
    """A stacked tensor's place in the flat buffers."""

    params: list[nn.Parameter]
    scopes: list[int]
    layers: list[int]
    lr: float
    offset: int = 0

    @property
    def numel(self) -> int:
        return self.params[0].numel()


class Layout:
    """The flat buffers, the stacked views the batched forward runs, and the index tensors of one grouping."""

    def __init__(self, envs: Sequence[Env], host_lr: float, seed_lr: float, device: torch.device,
                 previous: Layout | None = None) -> None:
        self.signature = signature(envs)
        self.device = device
        self.n = len(envs)
        self.host = envs[0].model.host
        self.scopes: list[Scope] = []
        self.groups: dict[int, list[SeedGroup]] = {}
        self._make_scopes(envs)
        blocks: list[_Block] = []
        self._host_blocks(envs, host_lr, blocks)
        self._seed_groups(envs, seed_lr, blocks)
        self._allocate(blocks, {} if previous is None else previous.momentum)
        self._buffers(envs)

    # --- grouping ------------------------------------------------------------------------------------

    def _make_scopes(self, envs: Sequence[Env]) -> None:
        """Env by env: its host, then each training seed in network order (the order the per-env loop reports)."""
        self._host_scope: list[int] = []
        self._seed_scopes: dict[int, int] = {}  # id(slot) -> scope
        for e, env in enumerate(envs):
            self._host_scope.append(self._scope(e, "host", env.model.host,
                                                [name for name, _ in env.model.host.named_parameters()]))
            for slot in env.slots:
                if _mode(slot) is not None and slot.trainable:
                    assert slot.seed is not None
                    self._seed_scopes[id(slot)] = self._scope(e, slot.slot_id, slot.seed, self._trainable_names(slot))

    def _scope(self, env: int, name: str, module: nn.Module, trainable: list[str]) -> int:
        first = self.scopes[-1].first + len(self.scopes[-1].names) if self.scopes else 0
        params = dict(module.named_parameters())
        self.scopes.append(Scope(env, name, first, tuple(trainable), sum(params[t].numel() for t in trainable)))
        return len(self.scopes) - 1

    def _host_blocks(self, envs: Sequence[Env], lr: float, blocks: list[_Block]) -> None:
        named = [dict(env.model.host.named_parameters()) for env in envs]
        scopes = self._host_scope
        self._host_entries: list[tuple[str, _Block]] = []
        for k, name in enumerate(named[0]):
            blocks.append(_Block([n[name] for n in named], scopes, [self.scopes[s].first + k for s in scopes], lr))
            self._host_entries.append((name, blocks[-1]))

    def _seed_groups(self, envs: Sequence[Env], lr: float, blocks: list[_Block]) -> None:
        keyed: dict[tuple[object, ...], SeedGroup] = {}
        for e, env in enumerate(envs):
            for position, slot in enumerate(env.slots):
                mode = _mode(slot)
                if mode is None:
                    continue
                assert slot.seed is not None
                key = (position, slot.blueprint, slot.seed.style, mode, slot.trainable)
                group = keyed.get(key)
                if group is None:
                    group = keyed[key] = SeedGroup(position, [], [], mode == "train", slot.seed.style, slot.seed.body)
                group.members.append(e)
                group.slots.append(slot)
        self._seed_blocks: list[tuple[SeedGroup, str, _Block]] = []
        for group in keyed.values():
            self.groups.setdefault(group.position, []).append(group)
            named = [dict(_seed_of(s).named_parameters()) for s in group.slots]
            trainable = self._trainable_names(group.slots[0]) if group.slots[0].trainable else []
            for name in named[0]:
                params = [n[name] for n in named]
                if name in trainable:
                    scopes = [self._seed_scopes[id(s)] for s in group.slots]
                    k = trainable.index(name)
                    blocks.append(_Block(params, scopes, [self.scopes[s].first + k for s in scopes], lr))
                    self._seed_blocks.append((group, name, blocks[-1]))
                elif name != "gate" or not group.training:  # frozen (a scheduled prune): a constant copy
                    for p in params:  # let go of an earlier layout's buffers
                        p.data = p.detach().clone()
                    group.P[name] = torch.cat([p.detach() for p in params])
            if group.members != list(range(self.n)):
                group.index = torch.cat([torch.full((1,), m, dtype=torch.int64, device=self.device)
                                         for m in group.members])

    @staticmethod
    def _trainable_names(slot: SeedSlot) -> list[str]:
        """A seed's tensors that get gradients: in TRAINING the blend gate is not in the forward."""
        assert slot.seed is not None
        training = slot.stage is SeedStage.TRAINING
        return [n for n, p in slot.seed.named_parameters() if p.requires_grad and not (training and n == "gate")]

    # --- the flat buffers ----------------------------------------------------------------------------

    def _allocate(self, blocks: list[_Block], momentum: dict[int, tuple[nn.Parameter, torch.Tensor]]) -> None:
        total = 0
        for block in blocks:
            block.offset = total
            total += block.numel * len(block.params)
        dev = self.device
        self.flat_p = torch.empty(total, device=dev)
        self.flat_g = torch.zeros(total, device=dev)
        self.flat_m = torch.zeros(total, device=dev)
        self.momentum: dict[int, tuple[nn.Parameter, torch.Tensor]] = {}
        """id(env's parameter) → (the parameter, its momentum slice): what a new layout carries over."""
        self.grads: dict[int, torch.Tensor] = {}
        """id(env's parameter) → its gradient slice (an env's ``.grad`` on the per-env path)."""
        stacked: dict[int, torch.Tensor] = {}
        seg_scope, seg_layer, neg_lr = [], [], []
        for block in blocks:
            leaf = self._stack(block, momentum)
            stacked[id(block)] = leaf
            for scope, layer in zip(block.scopes, block.layers, strict=True):
                seg_scope.append(torch.full((block.numel,), scope, dtype=torch.int64, device=dev))
                seg_layer.append(torch.full((block.numel,), layer, dtype=torch.int64, device=dev))
            neg_lr.append(torch.full((block.numel * len(block.params),), -block.lr, device=dev))
        empty = torch.zeros(0, dtype=torch.int64, device=dev)
        self.scope_seg = torch.cat(seg_scope) if seg_scope else empty
        self.layer_seg = torch.cat(seg_layer) if seg_layer else empty
        self.neg_lr = torch.cat(neg_lr) if neg_lr else torch.zeros(0, device=dev)
        self.n_layers = sum(len(s.names) for s in self.scopes)
        self.host_P = {name: stacked[id(block)] for name, block in self._host_entries}
        for group, name, block in self._seed_blocks:
            group.P[name] = stacked[id(block)]
        self.layer_sizes = self._layer_sizes(blocks)

    def _stack(self, block: _Block, momentum: dict[int, tuple[nn.Parameter, torch.Tensor]]) -> torch.Tensor:
        """The block's stacked leaf over the flat buffers; each env's parameter becomes a view of its slice."""
        first = block.params[0]
        d0, n = first.shape[0], block.numel
        channels_last = first.dim() == 4 and not first.is_contiguous() and first.is_contiguous(
            memory_format=torch.channels_last)

        def shaped(flat: torch.Tensor) -> torch.Tensor:
            part = flat[block.offset: block.offset + n * len(block.params)]
            if channels_last:
                _, c, kh, kw = first.shape
                return part.view(-1, kh, kw, c).permute(0, 3, 1, 2)
            return part.view(-1, *first.shape[1:])

        p_view, g_view, m_view = shaped(self.flat_p), shaped(self.flat_g), shaped(self.flat_m)
        for i, p in enumerate(block.params):
            rows = slice(i * d0, (i + 1) * d0)
            p_view[rows].copy_(p.detach())
            old = momentum.get(id(p))
            if old is not None and old[0] is p:
                m_view[rows].copy_(old[1])
            p.data = p_view[rows]
            self.momentum[id(p)] = (p, m_view[rows])
            self.grads[id(p)] = g_view[rows]
        leaf = p_view.detach().requires_grad_()
        leaf.grad = g_view
        return leaf

    def _layer_sizes(self, blocks: list[_Block]) -> torch.Tensor:
        """Elements per layer, in layer order, as floats on the device (no upload)."""
        sizes = [0] * self.n_layers
        for block in blocks:
            for layer in block.layers:
                sizes[layer] = block.numel
        return torch.cat([torch.full((1,), float(n), device=self.device) for n in sizes]) if sizes else \
            torch.zeros(0, device=self.device)

    # --- buffers -------------------------------------------------------------------------------------

    def _buffers(self, envs: Sequence[Env]) -> None:
        """BatchNorm statistics, seeds' gradient EMAs and the epoch's loss sums, stacked; each env's its views."""
        self.host_B: dict[str, torch.Tensor] = {}
        n_blocks = len(self.host.blocks)
        self.batches_tracked = torch.stack([torch.stack([_batches_tracked(env.model.host.conv_block(i).bn)
                                                         for env in envs]) for i in range(n_blocks)])
        for i in range(n_blocks):
            for stat in ("running_mean", "running_var"):
                name = f"blocks.{i}.bn.{stat}"
                self.host_B[name] = torch.cat([getattr(env.model.host.conv_block(i).bn, stat) for env in envs])
        for e, env in enumerate(envs):
            for i in range(n_blocks):
                bn = env.model.host.conv_block(i).bn
                c = bn.num_features
                for stat in ("running_mean", "running_var"):
                    setattr(bn, stat, self.host_B[f"blocks.{i}.bn.{stat}"][e * c: (e + 1) * c])
                bn.num_batches_tracked = self.batches_tracked[i, e]
        n_slots = len(envs[0].slots)
        self.grad_bufs = torch.stack([s.grad_buf for env in envs for s in env.slots])
        for e, env in enumerate(envs):
            for j, slot in enumerate(env.slots):
                slot.grad_buf = self.grad_bufs[e * n_slots + j]
        self.loss_sums = torch.stack([env.train_loss_sum for env in envs])
        for e, env in enumerate(envs):
            env.train_loss_sum = self.loss_sums[e]
        self._measure_index(envs, n_slots)

    def _measure_index(self, envs: Sequence[Env], n_slots: int) -> None:
        """Per training seed: its scope, its env's host scope, its row of ``grad_bufs``, sqrt(P_host/P_seed)."""
        seeds = [(e, j, slot) for e, env in enumerate(envs) for j, slot in enumerate(env.slots)
                 if slot.trainable]
        dev = self.device
        self.n_seeds = len(seeds)
        if not seeds:
            return

        def ints(values: list[int]) -> torch.Tensor:
            return torch.cat([torch.full((1,), v, dtype=torch.int64, device=dev) for v in values])

        host_scope = {s.env: i for i, s in enumerate(self.scopes) if s.name == "host"}
        self.seed_scope = ints([self._seed_scopes[id(slot)] for _, _, slot in seeds])
        self.seed_host = ints([host_scope[e] for e, _, _ in seeds])
        self.seed_rows = ints([e * n_slots + j for e, j, _ in seeds])
        host_params = envs[0].model.host_params
        self.seed_scale = torch.cat([torch.full((1,), (host_params / max(slot.params, 1)) ** 0.5, device=dev)
                                     for _, _, slot in seeds])
