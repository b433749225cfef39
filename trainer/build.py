"""The composition root of an Esper run: ``open_run(config, …)`` makes its ``nissa.Run`` through ``nissa.init``, as
any loop's is made; ``build_run(config, run, checkpoints)`` wires the checkpointer (a null one when the run takes
none) and the loop on it. The CLI, the tests and the benchmarks all build runs here. ``run_training`` runs the
rounds of a built loop."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch

from leyline.esper import EsperOutcome
from nissa import DeliveryReport, Run, Settings, init
from nissa.parts import LoopHooks
from ranks import Ranks
from trainer.checkpoint.control import CheckpointConfig, Checkpointer
from trainer.checkpoint.null import NullCheckpointer
from trainer.checkpoint.resume import store_of
from trainer.checkpoint.state import Stateful, Totals, restore
from trainer.data import TaskData, load_task
from trainer.hooks import RunHooks
from trainer.kasmina.lifecycle import LifecycleConfig
from trainer.simic.agent import Agent, HeuristicAgent, PPOAgent
from trainer.simic.config import TrainConfig
from trainer.simic.env import EnvConfig
from trainer.simic.progress import Progress
from trainer.simic.reward import RewardConfig
from trainer.simic.runtime import DeviceRuntime, resolve_device
from trainer.simic.sites import LoopSites
from trainer.simic.vectorized import RoundResult, RoundStopped, VectorizedTrainer
from trainer.sweepable import LiveValues, with_values
from trainer.tamiyo.heuristic import HeuristicConfig, HeuristicPolicy
from trainer.telemetry.install import telemetry_for_training

logger = logging.getLogger(__name__)

__all__ = ["build_run", "build_trainer", "default_sites", "open_run", "resolve_device", "run_training"]


def lifecycle_config(config: TrainConfig) -> LifecycleConfig:
    return LifecycleConfig(min_training_epochs=config.min_training_epochs, embargo_epochs=config.embargo_epochs,
                           min_prune_age=config.min_prune_age)


def build_agent(config: TrainConfig, device: torch.device, ranks: Ranks | None = None) -> Agent:
    """The run's policy; with several ranks one policy, its weights rank 0's, its sampling each rank's own."""
    if config.policy == "heuristic":
        return HeuristicAgent(HeuristicPolicy(HeuristicConfig(validation_images=config.val_size),
                                              lifecycle_config(config)))
    ranks = ranks or Ranks.single()
    return PPOAgent(len(config.slots), config.lstm_hidden, config.ppo, config.episode_length, device,
                    ranks.seed(config.seed), compile_mode=config.compile_mode, ranks=ranks)


def default_sites(config: TrainConfig, hooks: RunHooks) -> LoopSites:
    """The run's telemetry collectors, gated by ``hooks.level`` (at OFF they measure nothing)."""
    return telemetry_for_training(hooks, config)


def build_trainer(config: TrainConfig, hooks: RunHooks, sites: LoopSites | None = None,
                  data: TaskData | None = None, progress: Progress | None = None,
                  ranks: Ranks | None = None) -> VectorizedTrainer:
    """Everything a run needs, wired; ``data`` may be given to share one task between runs.
    ``sites`` None: the standard telemetry collectors (``default_sites``). With several ``ranks`` every
    rank has the same task data and policy, and envs, data order and sampling seeded by its rank."""
    ranks = ranks or Ranks.single()
    runtime = DeviceRuntime.create(config.device, config.amp_dtype, config.n_envs)
    torch.manual_seed(config.seed)
    if data is None:
        data = load_task(config.task, seed=config.seed, n_train=config.train_size, n_val=config.val_size,
                         data_dir=config.data_dir)
    env_cfg = EnvConfig(host=config.host_config, slots=config.ordered_slots, lifecycle=lifecycle_config(config),
                        episode_length=config.episode_length, lr=config.host_lr,
                        seed_lr=config.seed_lr, compile_mode=config.compile_mode)
    trainer = VectorizedTrainer(env_cfg, RewardConfig(), data.to(runtime.device, channels_last=True), runtime,
                                build_agent(config, runtime.device, ranks), hooks,
                                sites if sites is not None else default_sites(config, hooks),
                                n_envs=config.n_envs, batch_size=config.batch_size,
                                gradient_stride=config.gradient_telemetry_stride, seed=ranks.seed(config.seed),
                                rounds=config.rounds, env_exec=config.env_exec,
                                cuda_graphs=config.cuda_graphs == "on",
                                on_epoch=None if progress is None else progress.epoch)
    if trainer.graphed is not None and hasattr(trainer.sites, "compile_monitor"):
        trainer.sites.compile_monitor = trainer.graphed  # phase_timing carries how capture fares
    return trainer


def run_training(config: TrainConfig, hooks: RunHooks, *, sites: LoopSites | None = None,
                 data: TaskData | None = None, ranks: Ranks | None = None,
                 checkpoints: Checkpointer | NullCheckpointer | None = None,
                 resume: dict[str, Any] | None = None,
                 on_agent: Callable[[Agent], None] | None = None) -> EsperOutcome:
    """Train up to ``config.rounds`` rounds; returns how it ended and what it achieved.

    Emits every event between ``run_started`` and ``run_finished``; the caller emits those two
    (it names the run and knows how it ended). Progress goes to stderr unless ``log_every`` is 0.
    ``checkpoints`` takes the run's checkpoints at round ends, and may stop the run (status
    ``stopped``); ``resume``: a checkpoint's state to go on from (the rounds after its own).
    """
    start = time.perf_counter()
    threads = torch.get_num_threads()
    if config.cpu_threads > 0:
        torch.set_num_threads(config.cpu_threads)
    status: Literal["completed", "stopped"] = "completed"
    progress: Progress | None = None
    checkpoints = checkpoints or NullCheckpointer()
    try:
        progress = (Progress(config.rounds, config.log_every, episode_length=config.episode_length)
                    if config.log_every > 0 and (ranks is None or ranks.is_main) else None)
        trainer = build_trainer(config, hooks, sites, data, progress, ranks)
        if on_agent is not None:
            on_agent(trainer.agent)
        totals = Totals() if resume is None else restore(trainer, resume, _stateful(trainer.sites))
        last: RoundResult | None = None
        trainer.should_stop = checkpoints.stopping
        checkpoints.begin(trainer, totals, resumed=resume is not None)
        for round_ in range(totals.round + 1, config.rounds + 1):
            try:
                last = trainer.run_round(round_)
            except RoundStopped as stopped:
                logger.info("%s: checkpoint of round %d's end", stopped, totals.round)
                checkpoints.stop_mid_round()
                status = "stopped"
                break
            totals.round, totals.fossilized, totals.pruned = round_, totals.fossilized + last.fossilized, \
                totals.pruned + last.pruned
            if progress is not None:
                progress.round(last)
            if checkpoints.round_end(trainer, totals):
                status = "stopped"
                break
    finally:
        if progress is not None:
            progress.close()
        checkpoints.finish()
        torch.set_num_threads(threads)
    final = None if last is None else sum(last.final_accuracy) / len(last.final_accuracy)
    return EsperOutcome(status=status, duration_s=time.perf_counter() - start, epochs=trainer.epoch,
                        rounds=totals.round, final_accuracy=final, best_accuracy=trainer.best_accuracy,
                        fossilized=totals.fossilized, pruned=totals.pruned)


def _stateful(sites: LoopSites) -> Stateful | None:
    """The collectors, where they keep histories a checkpoint holds (the null sites keep none)."""
    return sites if isinstance(sites, Stateful) else None


# --- the run around the loop ---------------------------------------------------------------------


def open_run(config: TrainConfig, settings: Settings | None = None, *, recorded: Mapping[str, Any] | None = None,
             **given: Any) -> Run:
    """An Esper run's ``nissa.Run``, made by ``nissa.init`` as any loop's is, from ``settings`` and ``given`` (the
    rest of ``nissa.Settings``: ``run_id``, ``log_dir``, ``server``, ``level``…): the run's device, phases and env
    numbering (rank r's envs from ``r * n_envs``) from ``config``; ``run_started`` carries the config's flags and
    ``recorded`` (the telemetry settings the CLI records with them). Raises what ``nissa.init`` raises."""
    return init(settings, config={**config.as_flat_dict(), **(recorded or {})}, device=config.device,
                phases=config.phases, envs_per_rank=config.n_envs, steps_per_epoch=0, **given)


@dataclass
class EsperRun:
    """A built run: the loop's config (its device this rank's), the ``nissa.Run`` it reports through, its
    checkpointer."""

    config: TrainConfig
    run: Run
    checkpoints: Checkpointer | NullCheckpointer
    live: LiveValues = dataclasses.field(default_factory=LiveValues)
    """Where live values (``hparams``: a sweep's explore, or a person's) reach the run's agent."""

    @property
    def hooks(self) -> LoopHooks:
        """Where the loop reports its steps and epochs: the run's ``RunHooks``."""
        return self.run.hooks

    def train(self, *, data: TaskData | None = None, sites: LoopSites | None = None,
              resume: dict[str, Any] | None = None) -> EsperOutcome:
        return run_training(self.config, self.hooks, sites=sites, data=data, ranks=self.run.ranks,
                            checkpoints=self.checkpoints, resume=resume, on_agent=self.live.bind)

    def end(self, outcome: EsperOutcome, *, timeout: float = 10.0) -> DeliveryReport:
        """End the run: Esper's results as its summaries, then the ``run_finished`` every run sends."""
        for name, value in outcome.summaries().items():
            self.run.summary[name] = value
        return self.run.end(outcome.finished(), timeout=timeout)


def build_run(config: TrainConfig, run: Run, checkpoints: CheckpointConfig | None = None) -> EsperRun:
    """The one place an Esper run is wired, on a ``nissa.Run`` (``open_run``; it holds the run's stream, its commands,
    profiling, the ranks' straggler check and stacks on demand): the loop's device this rank's, and the
    checkpointer (None: a null one; ``checkpoint`` and ``stop`` are then rejected with the reason)."""
    ranks = run.ranks
    config = with_values(dataclasses.replace(config, device=ranks.device_name(config.device)), run.config)
    if "device" in run.config:  # run_started records this rank's device, as its checkpoints do
        run.config["device"] = config.device
    live = LiveValues(run.config)  # a sweep's values (run.config) at the start, hparams commands after
    run.on_hparams(live.apply)
    if checkpoints is None:
        NullCheckpointer.register(run.handle)
        return EsperRun(config=config, run=run, checkpoints=NullCheckpointer(), live=live)
    checkpointer = Checkpointer(checkpoints, store_of(run.run_dir, ranks.rank), run_config=config.as_flat_dict(),
                                manifest={"run_id": run.run_id, "name": run.name, "world_size": ranks.world_size},
                                hub_seq=lambda: run.delivery().logged, control_state=run.control_state,
                                prunes=ranks.is_main)
    checkpointer.register(run.handle)
    return EsperRun(config=config, run=run, checkpoints=checkpointer, live=live)
