"""``TrainConfig``: every knob of a training run, validated on construction, and its CLI flags.

Figures in the field docs marked "GPU scale" are the original system's defaults; the defaults
here are sized so that a short PPO run finishes in seconds on two CPU cores.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from typing import Literal

import torch

from leyline.calls import UPDATE_PHASE
from leyline.payloads import Scalar
from trainer import flags
from trainer.data import DataError, cifar_root
from trainer.kasmina.host import HostConfig, slot_id, slot_index
from trainer.simic.ppo import PPOConfig

Policy = Literal["ppo", "heuristic"]
AmpDtype = Literal["auto", "float16", "bfloat16", "off"]
CompileMode = Literal["off", "default", "max-autotune"]
Task = Literal["synthetic", "cifar10"]
EnvExec = Literal["batched", "per-env"]
OnOff = Literal["off", "on"]

POLICIES: tuple[str, ...] = ("ppo", "heuristic")
AMP_DTYPES: tuple[str, ...] = ("auto", "float16", "bfloat16", "off")
COMPILE_MODES: tuple[str, ...] = ("off", "default", "max-autotune")
TASKS: tuple[str, ...] = ("synthetic", "cifar10")
ENV_EXECS: tuple[str, ...] = ("batched", "per-env")


class ConfigError(ValueError):
    """A bad configuration value; the message names the command-line flag."""


def _need(ok: bool, flag: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"{flag}: {message}")


@dataclass(frozen=True)
class TrainConfig:
    """A training run: the policy, the envs, the data, the host, the lifecycle and PPO."""

    policy: Policy = "ppo"
    """Who picks lifecycle actions: the LSTM actor-critic trained by PPO, or the heuristic."""
    n_envs: int = 2
    """Environments (each its own host and seeds) trained side by side."""
    rounds: int = 3
    """Rounds; one round is one episode per env on fresh hosts, then one PPO update."""
    episode_length: int = 12
    """Epochs per episode (the policy acts after every epoch but the last). Twelve leave a seed
    germinated early the seven or so epochs it needs to train, blend in and be fossilized."""
    slots: tuple[str, ...] = ("r0c0", "r0c1")
    """Seed slots in use (``r0c{i}`` sits after host block i)."""
    device: str = "auto"
    """Torch device: cpu, cuda, cuda:N, or auto (cuda when available)."""
    seed: int = 0
    """Seed of every random generator in the run (data, hosts, seeds, policy)."""
    amp_dtype: AmpDtype = "auto"
    """Autocast dtype on CUDA: auto (bfloat16 where supported, else float16), float16, bfloat16, off."""
    compile_mode: CompileMode = "off"
    """torch.compile mode for the host blocks: off, default, max-autotune."""
    env_exec: EnvExec = "batched"
    """How the envs train: batched (every env's host and seeds as one batched model, one optimizer step
    for all) or per-env (each env in turn, its own optimizers: the reference the batched step matches)."""
    cuda_graphs: OnOff = "off"
    """Capture the batched step as a CUDA graph and replay it for every full batch (CUDA, batched envs,
    no compile): one launch per batch instead of hundreds. Off by default: untested on a GPU so far."""
    gradient_telemetry_stride: int = 10
    """Measure seed/host gradient norms every this many batches."""
    task: Task = "synthetic"
    """Data: the built-in synthetic task or CIFAR-10 from ``data_dir``."""
    data_dir: str | None = None
    """Directory with CIFAR-10's python-pickle batches (``--task cifar10`` only)."""
    train_size: int = 512
    """Training images per epoch (the synthetic task generates this many)."""
    val_size: int = 256
    """Validation images (the fused counterfactual pass runs over all of them)."""
    batch_size: int = 32
    """Training batch size: 16 steps an epoch on 512 images, enough for a host to reach its
    plateau within an episode."""
    base_channels: int = 4
    """Channels of the host's first block (doubling per block). The default host is narrow on
    purpose: on the built-in task capacity is what limits it (within an episode it levels off well
    below what a host twice as wide reaches), so a grafted seed has room to help."""
    host_blocks: int = 3
    """Host conv blocks (and so available slots)."""
    min_training_epochs: int = 2
    """Epochs a seed must spend in TRAINING before gate G2 can pass [GPU scale: 10]."""
    embargo_epochs: int = 2
    """Epochs a pruned slot stays embargoed before it resets [GPU scale: 5]."""
    min_prune_age: int = 2
    """Epochs a seed must have lived before it may be pruned [GPU scale: 5]."""
    lstm_hidden: int = 64
    """Width of the policy's feature net and LSTM [GPU scale: 512]."""
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """The policy update's hyper-parameters (flags ``--ppo-<field>``)."""
    host_lr: float = 0.01
    """SGD learning rate of the host."""
    seed_lr: float = 0.05
    """SGD learning rate of each seed. A seed starts as the identity and joins late in an
    episode: at the host's rate it barely moves from zero in the epochs it has."""
    cpu_threads: int = 1
    """Torch intra-op threads for the run (0: torch's default). One thread: these small convolutions
    gain little from more, and on a shared machine spinning OpenMP threads cost several times over."""
    log_every: int = 1
    """Progress line every this many rounds, with the epochs of each round as they go (0: none)."""
    extra: dict[str, Scalar] = field(default_factory=dict, compare=False, repr=False)
    """Anything a caller wants recorded in ``run_started`` next to the config."""

    def __post_init__(self) -> None:
        _need(self.policy in POLICIES, "--policy", f"must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        _need(self.amp_dtype in AMP_DTYPES, "--amp-dtype", f"must be one of {', '.join(AMP_DTYPES)}")
        _need(self.compile_mode in COMPILE_MODES, "--compile-mode", f"must be one of {', '.join(COMPILE_MODES)}")
        _need(self.task in TASKS, "--task", f"must be one of {', '.join(TASKS)}")
        _need(self.env_exec in ENV_EXECS, "--env-exec", f"must be one of {', '.join(ENV_EXECS)}")
        _need(self.cuda_graphs in ("off", "on"), "--cuda-graphs", "must be off or on")
        if self.cuda_graphs == "on":
            _need(self.env_exec == "batched", "--cuda-graphs", "captures the batched step: needs --env-exec batched")
            _need(self.compile_mode == "off", "--cuda-graphs", "and --compile-mode are exclusive")
            _need(self.device != "cpu", "--cuda-graphs", "needs a CUDA device")
        _need(self.task != "cifar10" or bool(self.data_dir), "--data-dir", "required with --task cifar10")
        for flag, value, low in (("--n-envs", self.n_envs, 1), ("--rounds", self.rounds, 1),
                                 ("--episode-length", self.episode_length, 2),
                                 ("--gradient-telemetry-stride", self.gradient_telemetry_stride, 1),
                                 ("--train-size", self.train_size, 1), ("--val-size", self.val_size, 1),
                                 ("--batch-size", self.batch_size, 1), ("--base-channels", self.base_channels, 1),
                                 ("--min-training-epochs", self.min_training_epochs, 0),
                                 ("--embargo-epochs", self.embargo_epochs, 0),
                                 ("--min-prune-age", self.min_prune_age, 0),
                                 ("--lstm-hidden", self.lstm_hidden, 4),
                                 ("--cpu-threads", self.cpu_threads, 0), ("--log-every", self.log_every, 0)):
            _need(isinstance(value, int) and value >= low, flag, f"must be an integer >= {low}, got {value!r}")
        _need(1 <= self.host_blocks <= 5, "--host-blocks", f"must be in 1..5, got {self.host_blocks}")
        for flag, rate in (("--host-lr", self.host_lr), ("--seed-lr", self.seed_lr)):
            _need(rate > 0, flag, f"must be > 0, got {rate}")
        self._check_slots()
        self._check_device()
        self._check_data()

    def _check_slots(self) -> None:
        _need(len(self.slots) >= 1, "--slots", "at least one slot is needed")
        _need(len(set(self.slots)) == len(self.slots), "--slots", f"duplicate slot in {self.slots}")
        for s in self.slots:
            try:
                index = slot_index(s)
            except ValueError as exc:
                raise ConfigError(f"--slots: {exc}") from None
            _need(index < self.host_blocks, "--slots",
                  f"{s} needs a host block {index}, the host has {self.host_blocks} (--host-blocks)")

    def _check_device(self) -> None:
        d = self.device
        ok = d in ("auto", "cpu", "cuda") or (d.startswith("cuda:") and d[5:].isdigit())
        _need(ok, "--device", f"must be auto, cpu, cuda or cuda:N, got {d!r}")
        if d.startswith("cuda"):
            _need(torch.cuda.is_available(), "--device", f"{d} asked for, but CUDA is not available here")
            index = int(d[5:]) if ":" in d else 0
            _need(index < torch.cuda.device_count(), "--device", f"{d}: only {torch.cuda.device_count()} GPU(s)")

    def _check_data(self) -> None:
        if self.task == "cifar10" and self.data_dir:
            try:
                cifar_root(self.data_dir)
            except DataError as exc:
                raise ConfigError(str(exc)) from None

    # --- derived -----------------------------------------------------------------------------

    @property
    def host_config(self) -> HostConfig:
        return HostConfig(n_blocks=self.host_blocks, base_channels=self.base_channels)

    @property
    def phases(self) -> tuple[str, ...]:
        """What a profile window of target ``update`` can record: the PPO update; the heuristic has none."""
        return () if self.policy == "heuristic" else (UPDATE_PHASE,)

    @property
    def ordered_slots(self) -> tuple[str, ...]:
        """Slots in network order (the policy's slot head follows it)."""
        return tuple(sorted(self.slots, key=slot_index))

    def as_flat_dict(self) -> dict[str, Scalar]:
        """Flat str → scalar view for the ``run_started`` event (the PPO fields as ``ppo.<field>``)."""
        flat: dict[str, Scalar] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "extra":
                continue
            if isinstance(value, PPOConfig):
                flat.update({f"ppo.{k}": v for k, v in dataclasses.asdict(value).items()})
            else:
                flat[f.name] = ",".join(value) if isinstance(value, tuple) else value
        flat.update(self.extra)
        return flat

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> TrainConfig:
        """The config from flags added by ``add_training_args``; a ConfigError names a bad flag."""
        values = flags.values(ns, cls, skip=NOT_FLAGS)
        if "slots" in values:
            values["slots"] = parse_slots(values["slots"], values.get("host_blocks", cls.host_blocks))
        ppo = flags.values(ns, PPOConfig, prefix="ppo")
        return cls(**values, ppo=flags.build(PPOConfig, ppo, prefix="ppo", error=ConfigError))


NOT_FLAGS = ("extra", "ppo")
"""``TrainConfig`` fields that are not flags themselves: ``extra`` is the caller's, ``ppo`` has a flag per field."""


def training_dests() -> tuple[str, ...]:
    """Where ``add_training_args`` puts each field's value on the namespace (``ppo_lr`` for ``ppo.lr``)."""
    return (*(f.name for f in dataclasses.fields(TrainConfig) if f.name not in NOT_FLAGS),
            *(flags.dest_of(f.name, "ppo") for f in dataclasses.fields(PPOConfig)))


def parse_slots(text: str | tuple[str, ...], host_blocks: int) -> tuple[str, ...]:
    """``"r0c0,r0c2"`` → ids; a bare number N → the first N slots."""
    if isinstance(text, tuple):
        return text
    text = text.strip()
    if text.isdigit():
        n = int(text)
        _need(1 <= n <= host_blocks, "--slots", f"a count must be in 1..{host_blocks}, got {n}")
        return tuple(slot_id(i) for i in range(n))
    return tuple(s.strip() for s in text.split(",") if s.strip())


def add_training_args(parser: argparse.ArgumentParser, defaults: TrainConfig | None = None) -> None:
    """A flag for every ``TrainConfig`` and ``PPOConfig`` field, made from the dataclasses (``trainer.flags``);
    ``defaults``: the flags' defaults (a benchmark's own; none: ``TrainConfig()``'s)."""
    defaults = TrainConfig() if defaults is None else defaults
    flags.add_fields(parser.add_argument_group("training"), TrainConfig, default=defaults, skip=NOT_FLAGS,
                     aliases={"episode_length": ["--epochs"]}, metavars={"log_every": "ROUNDS"})
    flags.add_fields(parser.add_argument_group("PPO (the policy update; --policy ppo)"), PPOConfig,
                     default=defaults.ppo, prefix="ppo",
                     aliases={"update_epochs": ["--ppo-epochs"], "entropy_coef": ["--entropy-coef"]})
