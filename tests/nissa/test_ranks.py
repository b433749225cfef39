"""The rank layer: alone, the trivial case; two real gloo processes agree on commands, gather what does not
fit one buffer, and update one policy as one process would over all their rollouts."""

from __future__ import annotations

import copy
import json
import multiprocessing
import os
import pathlib
import socket

import pytest
import torch

from leyline import Command, DebugRequest, RunFinished
from nissa.control.agreement import Agreement, DisagreedStep, StepTimer
from nissa.hub import HubConfig
from nissa.runtime import RuntimeConfig, build_runtime
from nissa.telemetry.install import install_rank_checks
from nissa.telemetry.stragglers import StragglerConfig
from ranks import GATHER_BYTES, Ranks
from tests.support.clock import ManualClock
from trainer.simic.ppo import PPOConfig, ppo_update
from trainer.simic.rollout import RolloutBatch
from trainer.tamiyo.actions import N_OPS, head_sizes
from trainer.tamiyo.features import obs_dim
from trainer.tamiyo.policy import ActorCritic, PolicyConfig

N_SLOTS, ENVS, STEPS = 2, 4, 5
CFG = PPOConfig(lr=3e-3, update_epochs=4, target_kl=10.0)


def test_alone_every_collective_answers_with_this_ranks_own_value():
    ranks = Ranks.single()
    t = torch.arange(3.0)
    assert (ranks.rank, ranks.world_size, ranks.distributed, ranks.is_main) == (0, 1, False, True)
    assert ranks.gather(b"mine") == [b"mine"] and ranks.agree("v") == "v"
    assert ranks.gather_cpu(t) is t and ranks.sum_(t) is t and ranks.max_(t) is t
    assert ranks.seed(7) == 7 and ranks.device_name("auto") == "auto"
    ranks.close()


def test_a_rank_outside_the_world_is_refused():
    with pytest.raises(ValueError, match="rank 2 is not in 0..1"):
        Ranks(rank=2, world_size=2)


def _batch(policy: ActorCritic) -> RolloutBatch:
    """A rollout of ``ENVS`` envs the policy could have made: legal actions, its own log-probs and values."""
    g = torch.Generator().manual_seed(3)
    obs = torch.randn(ENVS, STEPS, obs_dim(N_SLOTS), generator=g)
    op_mask = torch.ones(ENVS, STEPS, N_OPS, dtype=torch.bool)
    slot_mask = torch.ones(ENVS, STEPS, N_OPS, N_SLOTS, dtype=torch.bool)
    actions = torch.stack([torch.randint(0, n, (ENVS, STEPS), generator=g) for n in head_sizes(N_SLOTS)], dim=-1)
    with torch.no_grad():
        log_probs, _, values = policy.evaluate(obs, op_mask, slot_mask, actions, policy.initial_state(ENVS))
    advantages = torch.randn(ENVS, STEPS, generator=g)
    return RolloutBatch(obs, op_mask, slot_mask, actions, log_probs, values, advantages,
                        values + advantages, values + advantages)


def _envs(batch: RolloutBatch, lo: int, hi: int) -> RolloutBatch:
    return RolloutBatch(*(getattr(batch, f)[lo:hi] for f in ("obs", "op_mask", "slot_mask", "actions", "log_probs",
                                                             "values", "advantages", "returns", "value_targets")))


def _policy() -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic(PolicyConfig(obs_dim(N_SLOTS), N_SLOTS, 16))


def _runtime_epochs(ranks: Ranks, log_dir: pathlib.Path) -> None:
    """A real runtime on each rank for two epochs of 4 steps: rank 1 steps slowly and asks for a debug window
    of its own at the end of the first (the ranks read that exchange, and apply it, at the end of the
    second), and for another at the end of the second (in flight when the run ends: never applied)."""
    runtime = build_runtime(RuntimeConfig(hub=HubConfig(run_id="two", log_dir=log_dir, rank=ranks.rank),
                                          ranks=ranks))
    # two epochs: one measured exchange; rank 1's steps are 50 ms over rank 0's, past the 25 ms floor
    install_rank_checks(runtime, stragglers=StragglerConfig(factor=1.5, epochs=1))
    clock = ManualClock()  # a step takes what the test says, however busy the machine
    runtime.step_timer = StepTimer(clock)
    for epoch in (1, 2):
        for step in range(4 * epoch - 3, 4 * epoch + 1):
            clock.advance(0.01 if ranks.rank == 0 else 0.06)
            runtime.step_boundary(step, epoch)
        if ranks.rank == 1:
            runtime.escalate(epochs=1, reason=f"rank 1 asks at epoch {epoch}")
        runtime.epoch_end(epoch)
    runtime.finish(RunFinished(status="completed", duration_s=1.0), timeout=5.0)


def _rank_main(rank: int, port: int, log_dir: pathlib.Path, out: multiprocessing.Queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2",
                      LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    ranks = Ranks.start("cpu")
    try:
        agreement = Agreement(ranks)
        c1, c2 = (Command(command_id=c, request=DebugRequest(run_id="r", epochs=1)) for c in ("c1", "c2"))
        held = [c1] if rank == 0 else [c2, c1]
        agreed = agreement.exchange(16, held, 0.01 * (rank + 1))  # the first: read at once
        posted = agreement.exchange(32 + rank, [], None)  # read at the next exchange
        try:
            agreement.exchange(48, [], None)
            disagreed = False
        except DisagreedStep:
            disagreed = True
        assert posted.commands == [] and posted.step_times == ()
        big = ranks.gather(bytes([rank]) * (GATHER_BYTES * 3 if rank else 5))

        policy = _policy()
        ranks.broadcast_(list(policy.parameters()))
        batch = _envs(_batch(policy), rank * 2, rank * 2 + 2)  # each rank has half of the envs
        metrics = ppo_update(policy, torch.optim.Adam(policy.parameters(), lr=CFG.lr), batch, CFG, ranks=ranks)
        weights = torch.cat([p.detach().reshape(-1) for p in policy.parameters()]).tolist()  # no tensor in a queue
        _runtime_epochs(ranks, log_dir)
        out.put((rank, [c.command_id for c in agreed.commands], agreed.step_times, disagreed,
                 [len(b) for b in big], weights, metrics.update_epochs, metrics.approx_kl, metrics.policy_loss))
    finally:
        ranks.close()


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> pathlib.Path:
    return tmp_path_factory.mktemp("ranks")


@pytest.fixture(scope="module")
def two_ranks(log_dir) -> dict[int, tuple]:
    """What each of two gloo processes saw (about 6 s: two fresh interpreters import torch)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(rank, port, log_dir, out), daemon=True) for rank in (0, 1)]
    for p in procs:
        p.start()
    try:
        results = {r[0]: r for r in (out.get(timeout=120) for _ in procs)}
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return results


def test_the_ranks_agree_on_one_order_of_every_rank_held_command(two_ranks):
    for rank in (0, 1):
        _, commands, step_times, _, _, *_ = two_ranks[rank]
        assert commands == ["c1", "c2"] and step_times == (0.01, 0.02)


def test_ranks_at_different_steps_refuse_to_agree(two_ranks):
    assert two_ranks[0][3] and two_ranks[1][3]


def test_data_longer_than_the_buffer_is_gathered_whole(two_ranks):
    assert two_ranks[0][4] == two_ranks[1][4] == [5, GATHER_BYTES * 3]


def test_two_ranks_update_one_policy_as_one_process_over_all_their_envs(two_ranks):
    w0, w1 = torch.tensor(two_ranks[0][5]), torch.tensor(two_ranks[1][5])
    assert torch.equal(w0, w1)  # bitwise: every rank took the same steps
    policy = _policy()
    start = copy.deepcopy(policy)
    metrics = ppo_update(policy, torch.optim.Adam(policy.parameters(), lr=CFG.lr), _batch(start), CFG)
    alone = torch.cat([p.detach().reshape(-1) for p in policy.parameters()])
    before = torch.cat([p.detach().reshape(-1) for p in start.parameters()])
    assert not torch.allclose(alone, before)
    assert torch.allclose(w0, alone, atol=1e-5), (w0 - alone).abs().max()
    assert two_ranks[0][6] == metrics.update_epochs
    assert two_ranks[0][7] == pytest.approx(metrics.approx_kl, rel=1e-4, abs=1e-7)
    assert two_ranks[0][8] == pytest.approx(metrics.policy_loss, rel=1e-4, abs=1e-6)


def _logged(log_dir: pathlib.Path, rank: int) -> list[dict]:
    name = "events.jsonl" if rank == 0 else f"events.rank{rank}.jsonl"
    return [json.loads(line) for line in (log_dir / "two" / name).read_text().splitlines()]


def test_a_command_one_rank_gave_itself_applies_on_both_at_the_same_step(two_ranks, log_dir):
    applied = {}
    for rank in (0, 1):
        applied[rank] = [(e["payload"]["command_id"], e["payload"]["applied_step"]) for e in _logged(log_dir, rank)
                         if e["kind"] == "command_status" and e["payload"]["status"] == "applied"]
    assert len(applied[1]) == 1 and applied[0] == applied[1] and applied[1][0][1] == 8


def test_rank_0_reports_the_slow_rank_as_a_straggler(two_ranks, log_dir):
    found = [e["payload"] for e in _logged(log_dir, 0) if e["kind"] == "anomaly_detected"]
    assert [(a["anomaly"], a["rank"]) for a in found] == [("straggler", 1)]
    assert not any(e["kind"] == "anomaly_detected" for e in _logged(log_dir, 1))  # reported once, by rank 0


def test_a_command_in_the_last_exchange_is_failed_on_every_rank_not_left_open(two_ranks, log_dir):
    """Rank 1's second window was asked at the last epoch's end: the run ended before the ranks could apply
    it, and both ranks say so (the server would otherwise hold it open for ever)."""
    for rank in (0, 1):
        statuses = [(e["payload"]["status"], e["payload"]["message"]) for e in _logged(log_dir, rank)
                    if e["kind"] == "command_status" and e["payload"]["command_id"] != _first_window(log_dir)]
        assert statuses[-1][0] == "failed" and "ended before the ranks applied" in statuses[-1][1], statuses


def _first_window(log_dir: pathlib.Path) -> str:
    """The id of the window applied at step 8 (the first one rank 1 asked for)."""
    return next(e["payload"]["command_id"] for e in _logged(log_dir, 1)
                if e["kind"] == "command_status" and e["payload"]["status"] == "applied")
