"""Esper as a sweep's trial: its sweepable values taken from ``run.config``, the live ones changed by ``hparams``
commands at a step boundary (a sweep's explore, or a person's)."""

from __future__ import annotations

import json
import time

import pytest

from leyline import Command, EventKind, HparamsRequest, decode_event
from trainer.build import build_run, open_run
from trainer.data import make_synthetic
from trainer.simic.agent import HeuristicAgent, PPOAgent
from trainer.simic.config import TrainConfig
from trainer.sweepable import LiveValues, with_values

TINY = dict(train_size=256, val_size=128, batch_size=64, base_channels=4, device="cpu", log_every=0,
            min_training_epochs=1, min_prune_age=1, embargo_epochs=1, lstm_hidden=16)


def test_a_runs_config_sets_the_sweepable_fields_and_refuses_a_value_of_the_wrong_kind():
    config = with_values(TrainConfig(), {"ppo.lr": 0.004, "ppo.clip": 0.3, "ppo.entropy_coef": 0.05,
                                         "host_lr": 0.02, "ppo.gamma": 0.5, "policy": "ppo"})
    assert (config.ppo.lr, config.ppo.clip, config.ppo.entropy_coef, config.host_lr) == (0.004, 0.3, 0.05, 0.02)
    assert config.ppo.gamma == TrainConfig().ppo.gamma  # not a sweepable field: left as the flags said
    with pytest.raises(ValueError, match="'ppo.lr'"):
        with_values(TrainConfig(), {"ppo.lr": "fast"})


def test_live_values_reach_the_ppo_agent_and_its_optimizer():
    config = TrainConfig(**TINY, n_envs=1, rounds=1, episode_length=2)
    agent = PPOAgent(len(config.slots), 16, config.ppo, 2, __import__("torch").device("cpu"), seed=1)
    live = LiveValues()
    assert live.apply({"ppo.lr": 0.02}) == {"ppo.lr": 0.02}  # before the agent exists: kept for it
    live.bind(agent)
    assert agent.optimizer.param_groups[0]["lr"] == 0.02 and agent.cfg.lr == 0.02
    assert live.apply({"ppo.entropy_coef": 0.2, "ppo.clip": 0.1}) == {"ppo.entropy_coef": 0.2, "ppo.clip": 0.1}
    assert (agent.cfg.entropy_coef, agent.cfg.clip) == (0.2, 0.1)
    with pytest.raises(ValueError, match="not settable live in an Esper run: host_lr"):
        live.apply({"host_lr": 0.1})
    with pytest.raises(ValueError, match="clip"):
        live.apply({"ppo.clip": 1.5})


def test_a_trial_of_a_sweep_trains_esper_with_its_values_and_takes_new_ones_live(tmp_path, monkeypatch):
    """An Esper run started as a sweep's trial (its agent's environment) takes the trial's values over its flags,
    and an ``hparams`` command changes the heuristic's thresholds at the next step boundary."""
    trial = {"sweep_id": "esper-1a2b3c", "trial_id": 2, "run_id": "esper-1a2b3c-t2", "project": "p", "group": "esper",
             "method": "random", "params": {"host_lr": 0.03, "heuristic.z": 1.5}}
    monkeypatch.setenv("NISSA_SWEEP_TRIAL", json.dumps(trial))
    config = TrainConfig(**TINY, rounds=1, episode_length=3, n_envs=1, policy="heuristic", seed=1)
    esper = build_run(config, open_run(config, log_dir=tmp_path, system_metrics=False, server=""))
    assert esper.run.run_id == "esper-1a2b3c-t2" and esper.config.host_lr == 0.03
    esper.run.runtime.commands.submit(Command(
        command_id="local-h", created_at=time.time(),
        request=HparamsRequest(run_id=esper.run.run_id, values={"heuristic.hold_epochs": 4})))
    agents: list = []
    esper.live.bind, bind = (lambda agent: (agents.append(agent), bind(agent))), esper.live.bind
    esper.run.end(esper.train(data=make_synthetic(0, TINY["train_size"], TINY["val_size"])))
    [agent] = agents
    assert isinstance(agent, HeuristicAgent)
    assert (agent.policy.config.z, agent.policy.config.hold_epochs) == (1.5, 4)
    assert esper.run.config["heuristic.hold_epochs"] == 4
    events = [decode_event(line) for line in (tmp_path / esper.run.run_id / "events.jsonl").read_bytes().splitlines()]
    said = [e.payload for e in events if e.kind is EventKind.COMMAND_STATUS and e.payload.command_id == "local-h"]
    assert said[-1].status.value == "completed", said
