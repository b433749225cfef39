"""Device decisions made once per run: the device, autocast, GradScaler, and one CUDA stream per env."""

from __future__ import annotations

import contextlib
import logging
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


def resolve_amp_dtype(choice: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype, or None for full precision. CPU runs always use full precision:
    CPU autocast mostly slows small convolutions down."""
    if device.type != "cuda" or choice == "off":
        return None
    if choice == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return {"float16": torch.float16, "bfloat16": torch.bfloat16}[choice]


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
            torch.autocast(device_type="cuda", dtype=self.amp_dtype) if self.amp_dtype is not None and cuda
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
        return torch.amp.GradScaler("cuda") if self.uses_scaler else None

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
