"""Training data: a built-in deterministic synthetic task and a local CIFAR-10 reader.

Both give a ``TaskData`` of normalized float32 NCHW tensors (32×32×3, 10 classes). Nothing is
ever downloaded: CIFAR-10 is read from the standard python-pickle batches in a local directory.
"""

from __future__ import annotations

import logging
import math
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

logger = logging.getLogger(__name__)

IMAGE_SHAPE = (3, 32, 32)
N_CLASSES = 10
CIFAR_TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR_TEST_FILE = "test_batch"
_CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
_CIFAR_STD = (0.2470, 0.2435, 0.2616)


class DataError(ValueError):
    """The data source cannot be used; the message names the flag and the reason."""


@dataclass(frozen=True)
class TaskData:
    """A supervised image task split into train and validation tensors."""

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    val_x: torch.Tensor
    val_y: torch.Tensor
    n_classes: int = N_CLASSES

    def __post_init__(self) -> None:
        if self.train_x.shape[0] != self.train_y.shape[0] or self.val_x.shape[0] != self.val_y.shape[0]:
            raise ValueError("images and labels differ in length")

    @property
    def n_train(self) -> int:
        return int(self.train_x.shape[0])

    @property
    def n_val(self) -> int:
        return int(self.val_x.shape[0])

    def to(self, device: torch.device | str, channels_last: bool = False) -> TaskData:
        """The same task with every tensor on ``device`` (kept there for the whole run), images
        optionally in channels-last layout."""
        fmt = torch.channels_last if channels_last else torch.contiguous_format
        return TaskData(self.name, self.train_x.to(device, memory_format=fmt), self.train_y.to(device),
                        self.val_x.to(device, memory_format=fmt), self.val_y.to(device), self.n_classes)


# --- synthetic -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SyntheticSpec:
    """Knobs of the synthetic task; the defaults make a small host plateau well below 100%."""

    modes_per_class: int = 4
    """Distinct texture prototypes per class (more modes need more capacity)."""
    components: int = 5
    """Coloured plane waves summed into each prototype."""
    max_frequency: int = 10
    """Highest spatial frequency (cycles per image) of a wave."""
    distractor: float = 0.3
    """Weight of a second, random-prototype texture mixed into every image."""
    jitter: float = 0.3
    """Per-sample relative jitter of each wave's amplitude."""
    noise: float = 0.4
    """Standard deviation of the additive pixel noise."""

    def __post_init__(self) -> None:
        if self.modes_per_class < 1 or self.components < 1 or not 1 <= self.max_frequency <= 15:
            raise ValueError(f"invalid synthetic spec: {self}")
        if min(self.distractor, self.jitter, self.noise) < 0:
            raise ValueError(f"invalid synthetic spec: {self}")


@dataclass(frozen=True)
class _Prototypes:
    """Per prototype and wave: integer frequencies (ky, kx), phase, and an RGB amplitude."""

    freq: torch.Tensor
    phase: torch.Tensor
    colour: torch.Tensor

    @classmethod
    def draw(cls, gen: torch.Generator, n: int, spec: SyntheticSpec) -> _Prototypes:
        k = spec.max_frequency
        freq = torch.randint(-k, k + 1, (n, spec.components, 2), generator=gen)
        freq[..., 1] = torch.where((freq[..., 0] == 0) & (freq[..., 1] == 0), 1, freq[..., 1])
        phase = 2 * math.pi * torch.rand(n, spec.components, generator=gen)
        colour = torch.randn(n, spec.components, 3, generator=gen)
        return cls(freq.float(), phase, colour / colour.norm(dim=(1, 2), keepdim=True))

    def render(self, which: torch.Tensor, shift: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
        """Images of prototypes ``which``, circularly shifted by ``shift`` (N, 2) pixels, waves
        scaled by ``gain`` (N, components): a shift is only a phase change of each wave."""
        h, w = IMAGE_SHAPE[1:]
        freq = self.freq[which]
        phase = self.phase[which] + 2 * math.pi * (freq * shift[:, None, :].float() / h).sum(-1)
        grid = torch.stack(torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")).float() / h
        angle = 2 * math.pi * torch.einsum("ncd,dyx->ncyx", freq, grid) + phase[..., None, None]
        amp = self.colour[which] * gain[..., None]
        return torch.einsum("nck,ncyx->nkyx", amp, torch.cos(angle)) * math.sqrt(2.0)


def make_synthetic(seed: int, n_train: int, n_val: int, spec: SyntheticSpec | None = None,
                   chunk: int = 4096) -> TaskData:
    """The built-in task: per class a few textures of coloured plane waves at random positions,
    mixed with a distractor texture and noise.

    Every image is shifted by a uniformly random circular offset, so the class is in the local
    texture (frequencies, orientations, colours), not in any pixel: a linear probe stays near
    chance while a CNN learns it, and a wider one learns it better. Deterministic in ``seed``
    (a private generator; the global RNG is untouched).
    """
    if n_train < 1 or n_val < 1:
        raise DataError(f"--train-size and --val-size must be >= 1, got {n_train} and {n_val}")
    spec = spec or SyntheticSpec()
    gen = torch.Generator().manual_seed(seed)
    n_proto = N_CLASSES * spec.modes_per_class
    protos = _Prototypes.draw(gen, n_proto, spec)
    total = n_train + n_val
    xs, ys = [], []
    for start in range(0, total, chunk):
        n = min(chunk, total - start)
        y = torch.randint(0, N_CLASSES, (n,), generator=gen)
        proto = y * spec.modes_per_class + torch.randint(0, spec.modes_per_class, (n,), generator=gen)
        other = torch.randint(0, n_proto, (n,), generator=gen)
        shifts = torch.randint(0, IMAGE_SHAPE[1], (2, n, 2), generator=gen)
        gains = 1.0 + spec.jitter * torch.randn(2, n, spec.components, generator=gen)
        x = protos.render(proto, shifts[0], gains[0])
        x = x + spec.distractor * protos.render(other, shifts[1], gains[1])
        x = x + spec.noise * torch.randn(n, *IMAGE_SHAPE, generator=gen)
        xs.append(x / math.sqrt(1.0 + spec.distractor**2 + spec.noise**2))
        ys.append(y)
    x_all, y_all = torch.cat(xs), torch.cat(ys)
    return TaskData("synthetic", x_all[:n_train].contiguous(), y_all[:n_train],
                    x_all[n_train:].contiguous(), y_all[n_train:])


# --- CIFAR-10 --------------------------------------------------------------------------------


class _Array:
    """Stand-in for ``numpy.ndarray`` while unpickling: keeps the shape, dtype and raw bytes."""

    def __init__(self, *_: Any) -> None:
        self.shape: tuple[int, ...] = ()
        self.dtype = "u1"
        self.data = b""

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        # numpy's ndarray state: (version, shape, dtype, is_fortran, raw bytes)
        _, shape, dtype, _fortran, raw = state
        self.shape, self.dtype = tuple(shape), getattr(dtype, "code", "?")
        self.data = raw.encode("latin-1") if isinstance(raw, str) else bytes(raw)


class _DType:
    """Stand-in for ``numpy.dtype``: only the type code is kept."""

    def __init__(self, code: str, *_: Any) -> None:
        self.code = code

    def __setstate__(self, state: Any) -> None:
        return None


def _reconstruct(cls: type, *_: Any) -> _Array:
    return _Array()


def _scalar(dtype: _DType, raw: bytes | str) -> int:
    """A numpy integer scalar (labels written from a numpy array), little-endian as on x86/ARM."""
    if not dtype.code.lstrip("<|").startswith(("i", "u")):
        raise pickle.UnpicklingError(f"unexpected numpy scalar of type {dtype.code}")
    data = raw.encode("latin-1") if isinstance(raw, str) else raw
    return int.from_bytes(data, "little", signed=dtype.code.lstrip("<|").startswith("i"))


def _latin1_bytes(text: str, encoding: str = "latin-1") -> bytes:
    # Protocol-2 pickles spell bytes objects as _codecs.encode(text, "latin1").
    if encoding.replace("-", "").lower() != "latin1":
        raise pickle.UnpicklingError(f"unexpected encoding {encoding!r} in a CIFAR batch")
    return text.encode("latin-1")


class _CifarUnpickler(pickle.Unpickler):
    """Unpickles CIFAR batches without numpy and without running arbitrary code."""

    _ALLOWED = {"_reconstruct": _reconstruct, "ndarray": _Array, "dtype": _DType, "scalar": _scalar}

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith("numpy") and name in self._ALLOWED:
            return self._ALLOWED[name]
        if module == "_codecs" and name == "encode":
            return _latin1_bytes
        raise pickle.UnpicklingError(f"unexpected object {module}.{name} in a CIFAR batch")


def _read_batch(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """Images (N,3,32,32 uint8) and labels (N,) of one pickle batch file."""
    try:
        with path.open("rb") as fh:
            batch = _CifarUnpickler(fh, encoding="bytes").load()
        data, labels = batch[b"data"], batch[b"labels"]
    except (OSError, EOFError, pickle.UnpicklingError, KeyError, TypeError, ValueError) as exc:
        raise DataError(f"--data-dir: {path.name} is not a CIFAR-10 python batch ({exc})") from exc
    if not isinstance(data, _Array) or data.dtype != "u1" or len(data.shape) != 2:
        raise DataError(f"--data-dir: {path.name}: 'data' is not a uint8 N×3072 array")
    n = data.shape[0]
    if data.shape[1] != 3 * 32 * 32 or len(data.data) != n * 3072 or len(labels) != n:
        raise DataError(f"--data-dir: {path.name}: expected N×3072 images and N labels")
    images = torch.frombuffer(bytearray(data.data), dtype=torch.uint8).view(n, *IMAGE_SHAPE)
    y = torch.tensor([int(v) for v in labels], dtype=torch.long)
    if n and (int(y.min()) < 0 or int(y.max()) >= N_CLASSES):
        raise DataError(f"--data-dir: {path.name}: labels outside 0..9")
    return images, y


def cifar_root(data_dir: str | Path) -> Path:
    """The folder holding the CIFAR-10 batch files (``data_dir`` or its ``cifar-10-batches-py``);
    a DataError naming ``--data-dir`` when it is missing or incomplete. Reads no file."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DataError(f"--data-dir {data_dir}: not a directory (CIFAR-10 is never downloaded)")
    nested = data_dir / "cifar-10-batches-py"
    root = nested if nested.is_dir() else data_dir
    missing = [f for f in (*CIFAR_TRAIN_FILES, CIFAR_TEST_FILE) if not (root / f).is_file()]
    if missing:
        raise DataError(f"--data-dir {root}: missing CIFAR-10 batch files {', '.join(missing)}")
    return root


def _normalize(images: torch.Tensor) -> torch.Tensor:
    mean = torch.tensor(_CIFAR_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(_CIFAR_STD).view(1, 3, 1, 1)
    return (images.float() / 255.0 - mean) / std


def load_cifar10(data_dir: str | Path, n_train: int | None = None, n_val: int | None = None) -> TaskData:
    """CIFAR-10 from ``data_batch_1..5`` and ``test_batch`` in ``data_dir`` (or its
    ``cifar-10-batches-py`` subfolder); the first ``n_train``/``n_val`` images when given."""
    root = cifar_root(data_dir)
    parts = [_read_batch(root / f) for f in CIFAR_TRAIN_FILES]
    train_x = torch.cat([p[0] for p in parts])[:n_train]
    train_y = torch.cat([p[1] for p in parts])[:n_train]
    val_x, val_y = _read_batch(root / CIFAR_TEST_FILE)
    val_x, val_y = val_x[:n_val], val_y[:n_val]
    if train_x.shape[0] == 0 or val_x.shape[0] == 0:
        raise DataError(f"--data-dir {root}: no images in the train or test batches")
    logger.info("CIFAR-10 from %s: %d train, %d val", root, train_x.shape[0], val_x.shape[0])
    return TaskData("cifar10", _normalize(train_x), train_y, _normalize(val_x), val_y)


def load_task(task: str, *, seed: int, n_train: int, n_val: int, data_dir: str | None = None) -> TaskData:
    """The task a run asked for: ``synthetic`` (built in) or ``cifar10`` (from ``data_dir``)."""
    if task == "synthetic":
        return make_synthetic(seed, n_train, n_val)
    if task == "cifar10":
        if not data_dir:
            raise DataError("--task cifar10 needs --data-dir DIR with the python-pickle batches")
        return load_cifar10(data_dir, n_train, n_val)
    raise DataError(f"--task must be 'synthetic' or 'cifar10', got {task!r}")
