"""``Ranks``: the one object that knows the process group of a multi-rank run (``join_ranks`` finds it).

Which rank this process is, how many there are, its device, and how the ranks agree: the loop, the
hub and the commands ask it; nothing else calls ``torch.distributed``. A process started alone (no
torchrun) is the trivial case of the same object: rank 0 of 1, no process group, every collective
answered at once with this rank's own value.

Under ``torchrun`` (``WORLD_SIZE`` > 1 in the environment) ``Ranks.start`` joins the default group
(NCCL when the run's device is CUDA, gloo on the CPU) and makes a second, gloo group for control
traffic: the small objects the ranks agree on (the run id, commands, step times) travel on it as CPU
tensors, so agreeing never waits on a CUDA stream. The policy's gradients travel on the default group.
Every collective has the group's timeout: a peer that died fails it (gloo notices the closed
connection at once), a peer that hangs fails it after ``timeout_s``; it never waits for good.
"""

from __future__ import annotations

import ctypes
import datetime
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# torch is imported where it is used: the control plane (who am I, agree on this) is imported by
# ``esper-train upload`` too, which never trains and starts without torch.

logger = logging.getLogger(__name__)

GATHER_BYTES = 4096
"""Data a rank brings to ``gather`` that fits in its one collective (more takes a second)."""
_LENGTH = 8
SEED_STRIDE = 1_000_003
"""Rank r seeds its envs, data order and action sampling with ``seed + r * SEED_STRIDE``."""


def tensor_bytes(t: torch.Tensor) -> bytes:
    """The bytes of a contiguous CPU tensor, copied in one go (no numpy, no element-wise Python loop)."""
    assert t.device.type == "cpu" and t.is_contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())


class RankError(RuntimeError):
    """The process group could not be joined or a collective failed (a peer died or hung)."""


@dataclass(frozen=True)
class RanksConfig:
    """How a multi-rank run joins and talks."""

    timeout_s: float = 600.0
    """How long a collective (an agreement, the policy update's reductions) waits for every rank."""

    def __post_init__(self) -> None:
        if not 0 < self.timeout_s < float("inf"):  # a collective's timeout is a timedelta: never for good
            raise ValueError(f"--rank-timeout: must be finite seconds > 0, got {self.timeout_s}")


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit():
        raise ValueError(f"{name}: expected a non-negative integer, got {raw!r}")
    return int(raw)


class Ranks:
    """This process's place among the run's ranks; see the module docstring."""

    def __init__(self, rank: int = 0, world_size: int = 1, local_rank: int = 0, *, control: Any = None,
                 backend: str = "") -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
        self.rank, self.world_size, self.local_rank = rank, world_size, local_rank
        self.backend = backend
        """Backend of the default group ("nccl" or "gloo"; "" alone)."""
        self._control = control

    # --- joining ------------------------------------------------------------------------------

    @classmethod
    def single(cls) -> Ranks:
        """One process, no group."""
        return cls()

    @staticmethod
    def launched() -> bool:
        """Started by torchrun (or anything that sets ``WORLD_SIZE`` > 1)?"""
        return _env_int("WORLD_SIZE", 1) > 1

    @classmethod
    def start(cls, device: str, config: RanksConfig | None = None) -> Ranks:
        """Join the group torchrun describes in the environment, or stand alone without one.

        ``device`` is the run's device choice (``auto``, ``cpu``, ``cuda``, ``cuda:N``): NCCL for CUDA,
        gloo otherwise; each rank on CUDA takes ``cuda:LOCAL_RANK``.
        """
        world = _env_int("WORLD_SIZE", 1)
        if world <= 1:
            return cls.single()
        import torch
        import torch.distributed as dist

        config = config or RanksConfig()
        rank, local = _env_int("RANK", 0), _env_int("LOCAL_RANK", 0)
        cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
        backend = "nccl" if cuda else "gloo"
        timeout = datetime.timedelta(seconds=config.timeout_s)
        kwargs: dict[str, Any] = {}
        if cuda:
            torch.cuda.set_device(local)
            kwargs["device_id"] = torch.device("cuda", local)
        try:
            dist.init_process_group(backend=backend, timeout=timeout, **kwargs)
            control = dist.new_group(backend="gloo", timeout=timeout) if backend != "gloo" else dist.group.WORLD
        except (RuntimeError, ValueError) as err:
            raise RankError(f"cannot join the process group ({backend}, rank {rank} of {world}): {err}") from err
        logger.info("rank %d of %d (local %d), backend %s", rank, world, local, backend)
        return cls(rank, world, local, control=control, backend=backend)

    def close(self, timeout_s: float = 30.0) -> None:
        """Leave the group (a no-op alone, or when it is gone already). The ranks first meet once more, for
        at most ``timeout_s``: a rank tearing its group down while another still talks to it aborts. A rank
        that died is not waited for (the meeting fails at once) and one that hangs only until the timeout."""
        if self.world_size == 1:
            return
        import torch.distributed as dist

        if not dist.is_initialized():
            return
        try:
            dist.monitored_barrier(group=self._control, timeout=datetime.timedelta(seconds=timeout_s))
        except RuntimeError as err:
            logger.warning("rank %d: leaving without the others: %s", self.rank, err)
        dist.destroy_process_group()

    # --- who and where ------------------------------------------------------------------------

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: it chooses what the ranks agree on."""
        return self.rank == 0

    def device_name(self, device: str) -> str:
        """The device this rank trains on: ``cuda:LOCAL_RANK`` for a CUDA run of several ranks."""
        if not self.distributed or self.backend != "nccl" or not device.startswith(("cuda", "auto")):
            return device
        return f"cuda:{self.local_rank}"

    def seed(self, base: int) -> int:
        """This rank's seed for what must differ between ranks (envs, data order, sampling)."""
        return base + self.rank * SEED_STRIDE

    # --- agreeing (control group, CPU) ----------------------------------------------------------

    def agree(self, value: Any) -> Any:
        """Rank 0's ``value``, on every rank."""
        if not self.distributed:
            return value
        import torch.distributed as dist

        box = [value if self.is_main else None]
        self._collective(dist.broadcast_object_list, box, src=0, group=self._control)
        return box[0]

    def gather(self, data: bytes) -> list[bytes]:
        """Every rank's ``data``, in rank order, on every rank.

        One all-gather of a fixed-size buffer (a length and up to ``GATHER_BYTES`` of data): a tenth of
        what ``all_gather_object`` costs (it pickles, and gathers sizes before data). Longer data takes a
        second all-gather, sized by the longest, which every rank then knows it needs."""
        return self.gather_async(data)()

    def gather_async(self, data: bytes) -> Callable[[], list[bytes]]:
        """``gather`` started now and finished by the function it returns: the fixed-size all-gather runs
        while this rank goes on; the call waits for it (and makes the second all-gather if some rank's data
        was longer). Every rank calls the function at the same point of its collectives."""
        if not self.distributed:
            return lambda: [data]
        import torch
        import torch.distributed as dist

        def buffer(size: int, payload: bytes) -> torch.Tensor:
            out = torch.zeros(_LENGTH + size, dtype=torch.uint8)
            out[:_LENGTH] = torch.frombuffer(bytearray(len(data).to_bytes(_LENGTH, "little")), dtype=torch.uint8)
            if payload:
                out[_LENGTH:_LENGTH + len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
            return out

        def start(mine: torch.Tensor) -> tuple[list[torch.Tensor], Any]:
            parts = [torch.empty_like(mine) for _ in range(self.world_size)]
            return parts, self._collective(dist.all_gather, parts, mine, group=self._control, async_op=True)

        def finish() -> list[bytes]:
            self._collective(work.wait)
            raws = [tensor_bytes(p) for p in parts]
            sizes = [int.from_bytes(raw[:_LENGTH], "little") for raw in raws]
            if max(sizes) > GATHER_BYTES:
                longer, again = start(buffer(max(sizes), data))
                self._collective(again.wait)
                raws = [tensor_bytes(p) for p in longer]
            return [raw[_LENGTH:_LENGTH + size] for raw, size in zip(raws, sizes, strict=True)]

        parts, work = start(buffer(GATHER_BYTES, data[:GATHER_BYTES]))
        return finish

    def gather_cpu(self, tensor: torch.Tensor, dim: int = 0) -> torch.Tensor:
        """Every rank's ``tensor`` (same shape on each, read to the CPU) concatenated along ``dim`` in rank
        order, on every rank."""
        if not self.distributed:
            return tensor
        import torch
        import torch.distributed as dist

        local = tensor.detach().cpu().contiguous()
        parts = [torch.empty_like(local) for _ in range(self.world_size)]
        self._collective(dist.all_gather, parts, local, group=self._control)
        return torch.cat(parts, dim=dim)

    # --- the data plane (default group, the run's device) ---------------------------------------

    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum ``tensor`` over the ranks, in place; returns it."""
        return self._reduce(tensor, "SUM")

    def min_(self, tensor: torch.Tensor) -> torch.Tensor:
        return self._reduce(tensor, "MIN")

    def max_(self, tensor: torch.Tensor) -> torch.Tensor:
        return self._reduce(tensor, "MAX")

    def sum_grads_(self, params: Iterable[torch.nn.Parameter]) -> None:
        """Sum the gradients of ``params`` over the ranks, in one flat buffer (one collective)."""
        if not self.distributed:
            return
        import torch

        grads = [p.grad for p in params if p.grad is not None]
        if not grads:
            return
        flat = self.sum_(torch.cat([g.reshape(-1) for g in grads]))
        offset = 0
        for g in grads:
            n = g.numel()
            g.copy_(flat[offset: offset + n].view_as(g))
            offset += n

    def broadcast_(self, tensors: Sequence[torch.Tensor]) -> None:
        """Rank 0's values of ``tensors`` (e.g. initial weights), in place on every rank."""
        if not self.distributed:
            return
        import torch.distributed as dist

        for t in tensors:
            self._collective(dist.broadcast, t.data, src=0)

    def _reduce(self, tensor: torch.Tensor, op: str) -> torch.Tensor:
        if not self.distributed:
            return tensor
        import torch.distributed as dist

        self._collective(dist.all_reduce, tensor, op=getattr(dist.ReduceOp, op))
        return tensor

    def _collective(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RuntimeError as err:  # torch's DistBackendError and gloo's errors are RuntimeErrors
            raise RankError(f"rank {self.rank} of {self.world_size}: {fn.__name__} failed (a rank died or "
                            f"hung): {err}") from err

    def __repr__(self) -> str:
        return f"Ranks(rank={self.rank}, world_size={self.world_size}, backend={self.backend or 'none'})"


def join_ranks(device: str = "auto", config: RanksConfig | None = None) -> Ranks:
    """This process's ranks: the group the loop made already, the one torchrun describes, or none."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch without distributed
        return Ranks.single()
    if dist.is_available() and dist.is_initialized():
        world = dist.get_world_size()
        if world == 1:
            return Ranks.single()
        backend = str(dist.get_backend())
        control = dist.group.WORLD if backend == "gloo" else dist.new_group(backend="gloo")
        return Ranks(dist.get_rank(), world, _env_int("LOCAL_RANK", 0), control=control, backend=backend)
    return Ranks.start(device, config)
