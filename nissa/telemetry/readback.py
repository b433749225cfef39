"""Reading figures back from the device: a fence per launch, then ONE transfer for all of them.

Telemetry launches its reductions where the loop is working: on CUDA, inside an env's
own stream (``torch.cuda.stream(env_stream)``), and reads them later from another
stream (the default one, after every env has stepped). CUDA orders work only within a
stream, so a reader on another stream could see figures that are not computed yet.
Each launch therefore records a ``StreamFence`` on the stream it ran on; before the read,
the reader's stream waits on every fence (``cudaStreamWaitEvent``: ordering on the
device, no host sync), and then one ``.tolist()`` brings everything over. The read syncs
only the reader's stream, which is ordered after every fence, and the launched tensors
are freed after it returned, so no allocation is reused while still being read.

On the CPU, ops run to completion in program order: a fence has nothing to wait for,
and only records that it was waited on (the wiring tests read ``waited``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch


class StreamFence:
    """The work queued so far on the current stream of ``device`` (on CUDA, an event recorded there)."""

    __slots__ = ("device", "_event", "waited")

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._event: torch.cuda.Event | None = None
        if device.type == "cuda":
            self._event = torch.cuda.Event()
            self._event.record(torch.cuda.current_stream(device))
        self.waited = False

    @property
    def on_stream(self) -> bool:
        """Whether the fence stands for an event on a device stream (False on the CPU)."""
        return self._event is not None

    def wait(self) -> None:
        """Order the caller's current stream after the fenced work, on the device (no host sync)."""
        if self._event is not None:
            torch.cuda.current_stream(self.device).wait_event(self._event)
        self.waited = True


class DeviceFigures(ABC):
    """Figures launched on the device and not read yet, read back by ``read_all``: the launched tensor and a
    fence recorded right after the launch, on the stream it ran on. A subclass says what the figures mean
    (``absorb``)."""

    def __init__(self, values: torch.Tensor | None) -> None:
        self._values = values
        """The launched figures; None: nothing was launched (or a subclass let them go once read)."""
        self._fence = StreamFence(values.device if values is not None else torch.device("cpu"))

    @property
    def fence(self) -> StreamFence:
        """Recorded right after the figures were launched; the read waits on it."""
        return self._fence

    @property
    def values(self) -> torch.Tensor:
        """The launched figures (any shape; read flattened, as float64)."""
        assert self._values is not None, "only launched figures not let go yet are read"
        return self._values

    @abstractmethod
    def absorb(self, values: list[float]) -> None:
        """Take this collection's figures, flattened, as read back."""


def read_all(items: Sequence[DeviceFigures]) -> None:
    """Wait on every item's fence, then read all their values in ONE device→host transfer
    (one per device, should the items live on several)."""
    devices = {item.values.device for item in items}
    if len(devices) > 1:
        for device in devices:
            read_all([item for item in items if item.values.device == device])
        return
    if not items:
        return
    for item in items:
        item.fence.wait()
    parts = [item.values.detach().reshape(-1).to(torch.float64) for item in items]
    flat = (parts[0] if len(parts) == 1 else torch.cat(parts)).tolist()
    offset = 0
    for item, part in zip(items, parts, strict=True):
        n = part.numel()
        item.absorb(flat[offset: offset + n])
        offset += n
