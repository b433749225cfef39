"""Device decisions made once per run: the device, autocast, GradScaler, and one CUDA stream per env.

Where tensors live is explicit: everything made with ``device=runtime.device`` or moved there
with ``.to(runtime.device)`` lives on the run's device (models, data, losses, metrics rows, the
policy's inputs); the loop's bookkeeping (rewards, returns, masks, potentials, stage codes) is
made from Python values with no device argument and lives on the host on every run. On a GPU
run, only reading a device tensor on the host is a device→host sync (``nissa.telemetry.syncs``
counts them on any device by following this split).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import torch

logger = logging.getLogger(__name__)

_NULL = contextlib.nullcontext()


def resolve_device(name: str) -> torch.device:
    """``auto`` → cuda when available, else cpu; cuda requested without CUDA is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: CUDA is not available in this torch build or machine")
    return device


Capability = Callable[[int], tuple[int, int]]
"""Compute capability (major, minor) of the CUDA device with a given index."""

NATIVE_BF16_MAJOR = 8  # Ampere: the first generation with bfloat16 tensor cores


def native_bf16(device: torch.device, capability: Capability | None = None) -> bool:
    """Whether CUDA ``device`` (the configured one, ``cuda:N``) does bfloat16 math natively.

    Not ``torch.cuda.is_bf16_supported()``: that asks the *current* device, and by default also
    counts bfloat16 emulated through float32 (V100, T4), slower there than float16 with a scaler.
    ROCm builds: torch reports bfloat16 on every AMD GPU it supports; taken as is.
    """
    if torch.version.hip:
        return True
    index = device.index if device.index is not None else torch.cuda.current_device()
    major, _ = (capability or torch.cuda.get_device_capability)(index)
    return major >= NATIVE_BF16_MAJOR


def resolve_amp_dtype(choice: str, device: torch.device, capability: Capability | None = None) -> torch.dtype | None:
    """The autocast dtype, or None for full precision.

    ``auto``: on CUDA, bfloat16 where native on ``device`` (compute capability >= 8.0), else
    float16 (with a GradScaler); on the CPU full precision (CPU autocast mostly slows these
    small convolutions down). ``float16`` and ``bfloat16`` are taken as asked on any device
    (``--device cpu --amp-dtype bfloat16`` runs CPU autocast). ``capability`` is injectable
    for tests; by default it asks the driver.
    """
    if choice == "off" or (choice == "auto" and device.type != "cuda"):
        return None
    if choice == "auto":
        return torch.bfloat16 if native_bf16(device, capability) else torch.float16
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[choice]
    if dtype is torch.bfloat16 and device.type == "cuda" and not native_bf16(device, capability):
        logger.warning("--amp-dtype bfloat16 on %s: emulated there (compute capability < 8.0), float16 is faster",
                       device)
    return dtype


@dataclass
class DeviceRuntime:
    """Where and how the envs train. Contexts are built once and reused every batch."""

    device: torch.device
    amp_dtype: torch.dtype | None
    n_envs: int
    streams: list[torch.cuda.Stream | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        cuda = self.device.type == "cuda"
        self.streams = [torch.cuda.Stream(self.device) if cuda else None for _ in range(self.n_envs)]
        self._autocast: AbstractContextManager[object] = (
            torch.autocast(device_type=self.device.type, dtype=self.amp_dtype) if self.amp_dtype is not None
            else _NULL)
        self._stream_ctx: list[AbstractContextManager[object]] = [
            torch.cuda.stream(s) if s is not None else _NULL for s in self.streams]
        logger.info("device %s, autocast %s, %d env streams", self.device, self.amp_dtype, self.n_envs if cuda else 0)

    @classmethod
    def create(cls, device_name: str, amp_choice: str, n_envs: int) -> DeviceRuntime:
        device = resolve_device(device_name)
        return cls(device, resolve_amp_dtype(amp_choice, device), n_envs)

    @property
    def uses_scaler(self) -> bool:
        """Only float16 needs loss scaling; bfloat16 has float32's range."""
        return self.amp_dtype is torch.float16

    def new_scaler(self) -> torch.amp.GradScaler | None:
        return torch.amp.GradScaler(self.device.type) if self.uses_scaler else None

    def autocast(self) -> AbstractContextManager[object]:
        """Wraps the forward pass and the loss only; backward runs outside it (AMP docs)."""
        return self._autocast

    def on_env_stream(self, env: int) -> AbstractContextManager[object]:
        """Work issued inside runs on env ``env``'s stream (a no-op off CUDA)."""
        return self._stream_ctx[env]

    def streams_wait_default(self) -> None:
        """Env streams see everything queued so far on the default stream (data, permutation)."""
        if self.device.type != "cuda":
            return
        current = torch.cuda.current_stream(self.device)
        for stream in self.streams:
            assert stream is not None
            stream.wait_stream(current)

    def default_waits_streams(self) -> None:
        """The default stream continues only after every env stream's queued work."""
        if self.device.type != "cuda":
            return
        current = torch.cuda.current_stream(self.device)
        for stream in self.streams:
            assert stream is not None
            current.wait_stream(stream)
