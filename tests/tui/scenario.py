"""A scripted, deterministic Esper run: every panel of the console gets realistic data.

Four envs with three slots each; seeds germinate, train, blend, fossilize or get pruned; PPO
updates once per round of four epochs; a KL spike auto-escalates a debug window; a profile window
completes with top ops. Same arguments, same events, byte for byte.
"""

from __future__ import annotations

import random

from leyline import (
    AnomalyDetected,
    CommandAction,
    CommandStatus,
    CommandStatusChanged,
    Event,
    GradientHealth,
    Heartbeat,
    HubHealth,
    Payload,
    PhaseTime,
    PhaseTiming,
    ProfileCompleted,
    ProfileStarted,
    RunStarted,
    SummaryUpdated,
    TelemetryLevel,
    TelemetryLevelChanged,
    TopOp,
    make_event,
)
from leyline.esper import (
    HEAD_NAMES,
    EpochCompleted,
    EsperOutcome,
    LSTMHealth,
    PPOUpdate,
    SeedFossilized,
    SeedGateEvaluated,
    SeedGerminated,
    SeedPruned,
    SeedStage,
    SeedStageChanged,
    SlotSnapshot,
)

SLOTS = ("r0c0", "r0c1", "r1c0")
HOST_PARAMS = 52_480
BLUEPRINTS = ("conv_light", "attention", "norm", "depthwise")
TOP_OPS = (("aten::conv2d", 480, 91_000.0, 4_100.0), ("aten::convolution_backward", 480, 88_500.0, 80_200.0),
           ("aten::batch_norm", 640, 21_300.0, 2_050.0), ("aten::addmm", 160, 9_800.0, 8_900.0),
           ("Optimizer.step#Adam.step", 40, 7_400.0, 1_300.0))


class _Run:
    """Builds envelopes with contiguous seq and a steady clock."""

    def __init__(self, run_id: str, ts0: float) -> None:
        self.run_id, self.ts, self.seq, self.step = run_id, ts0, 0, 0
        self.events: list[Event] = []

    def emit(self, payload: Payload, epoch: int, env: int | None = None) -> None:
        self.seq += 1
        self.ts += 0.05
        self.events.append(make_event(payload, run_id=self.run_id, seq=self.seq, ts=round(self.ts, 3),
                                      step=self.step, epoch=epoch, env=env))


def _lifecycle(run: _Run, rng: random.Random, seeds: dict, env: int, epoch: int) -> None:
    """Advance each slot's seed one stage when its time comes; a fossilized seed stays for good."""
    for slot in SLOTS:
        cur = seeds.get((env, slot))
        if cur is None:
            if rng.random() < 0.3:
                sid = f"s{env}{slot[-1]}{epoch}"
                bp = rng.choice(BLUEPRINTS)
                params = rng.randint(900, 9000)
                seeds[(env, slot)] = [sid, bp, SeedStage.GERMINATED, 0.0, None, params]
                run.emit(SeedGerminated(slot=slot, seed_id=sid, blueprint=bp, params=params), epoch, env)
            continue
        sid, bp, stage, alpha, contribution, params = cur
        if stage in (SeedStage.BLENDING, SeedStage.HOLDING, SeedStage.FOSSILIZED):
            cur[4] = round((contribution or 0.0) + rng.uniform(-0.004, 0.008), 4)
        if stage is SeedStage.FOSSILIZED:
            continue
        nxt = {SeedStage.GERMINATED: SeedStage.TRAINING, SeedStage.TRAINING: SeedStage.BLENDING,
               SeedStage.BLENDING: SeedStage.HOLDING}.get(stage)
        if stage is SeedStage.BLENDING and alpha < 0.99:
            cur[3] = min(1.0, alpha + 0.34)
            continue
        if nxt is not None and rng.random() < 0.6:
            if nxt is SeedStage.BLENDING:
                run.emit(SeedGateEvaluated(slot=slot, seed_id=sid, gate="G2", passed=True, reason="healthy gradients"),
                         epoch, env)
            run.emit(SeedStageChanged(slot=slot, seed_id=sid, from_stage=stage, to_stage=nxt), epoch, env)
            cur[2] = nxt
        elif stage is SeedStage.HOLDING:
            if rng.random() < 0.7:
                run.emit(SeedFossilized(slot=slot, seed_id=sid, blueprint=bp, params=params,
                                        contribution=cur[4], host_params=HOST_PARAMS), epoch, env)
                cur[2] = SeedStage.FOSSILIZED
            else:
                run.emit(SeedPruned(slot=slot, seed_id=sid, blueprint=bp, reason="hurts accuracy",
                                    contribution=-0.01), epoch, env)
                del seeds[(env, slot)]


def _snapshots(seeds: dict, env: int) -> list[SlotSnapshot]:
    out = []
    for slot in SLOTS:
        cur = seeds.get((env, slot))
        out.append(SlotSnapshot(slot=slot) if cur is None else
                   SlotSnapshot(slot=slot, stage=cur[2], seed_id=cur[0], blueprint=cur[1], alpha=round(cur[3], 2),
                                contribution=cur[4]))
    return out


def _fossilized_params(seeds: dict, env: int) -> int:
    return sum(cur[5] for (e, _), cur in seeds.items() if e == env and cur[2] is SeedStage.FOSSILIZED)


def _round_end(run: _Run, rng: random.Random, epoch: int, rnd: int) -> None:
    kl = 0.09 if rnd == 3 else round(rng.uniform(0.002, 0.012), 4)
    run.emit(PPOUpdate(round=rnd, policy_loss=round(-0.02 + rng.uniform(-0.01, 0.01), 4),
                       value_loss=round(0.6 / (rnd + 1) + rng.uniform(0, 0.05), 4),
                       entropy={h: round(1.8 - 0.1 * rnd - 0.05 * i, 3) for i, h in enumerate(HEAD_NAMES)},
                       approx_kl=kl, clip_fraction=round(rng.uniform(0.05, 0.2), 3),
                       explained_variance=None if rnd == 0 else round(min(0.9, 0.2 * rnd), 3),
                       ratio_min=0.8, ratio_max=1.22, grad_norm=round(rng.uniform(0.4, 1.2), 3),
                       update_epochs=4), epoch)
    for scope in ("host", "policy"):
        run.emit(GradientHealth(scope=scope, global_norm=round(rng.uniform(0.5, 2.0), 3), n_tensors=12), epoch)
    run.emit(LSTMHealth(h_norm=round(2.5 + 0.1 * rnd, 3), c_norm=round(4.8 + 0.2 * rnd, 3), h_max=0.9, c_max=2.4),
             epoch)
    run.emit(PhaseTiming(round=rnd, phases=[PhaseTime(phase="train", wall_ms=120.0, cpu_ms=230.0)],
                         env_epochs_per_s=round(7.5 + rng.uniform(0, 1), 1)), epoch)
    run.emit(HubHealth(queue_depth=rng.randint(0, 4), logged=run.seq, sent=run.seq, acked=run.seq - 1,
                       dropped={}, reconnects=0, connected=True), epoch)
    if rnd == 3:
        run.emit(AnomalyDetected(anomaly="kl_spike", detail="approx KL 0.09 > 0.0225",
                                 evidence={"approx_kl": 0.09}, auto_escalated=True), epoch)
        run.emit(TelemetryLevelChanged(level=TelemetryLevel.DEBUG, previous=TelemetryLevel.NORMAL,
                                       reason="anomaly kl_spike", until_epoch=epoch + 3), epoch)
    if rnd == 4:
        run.emit(TelemetryLevelChanged(level=TelemetryLevel.NORMAL, previous=TelemetryLevel.DEBUG,
                                       reason="window ended"), epoch)


def _commands(run: _Run, epoch: int) -> None:
    if epoch == 9:
        for status in (CommandStatus.DELIVERED, CommandStatus.APPLIED):
            run.emit(CommandStatusChanged(command_id="cmd-7f3a", action=CommandAction.PROFILE, status=status,
                                          applied_step=run.step if status is CommandStatus.APPLIED else None), epoch)
        run.emit(ProfileStarted(window="w1", batches=5, trace_dir="runs/demo/profiles/w1",
                                activities=["CPU"], command_id="cmd-7f3a"), epoch)
    if epoch == 10:
        ops = [TopOp(name=n, calls=c, cpu_time_us=t, self_cpu_time_us=s) for n, c, t, s in TOP_OPS]
        run.emit(ProfileCompleted(window="w1", batches=5, trace_path="runs/demo/profiles/w1/trace.json",
                                  wall_s=0.84, top_ops=ops, artifact="w1-trace.json", command_id="cmd-7f3a"), epoch)
        run.emit(CommandStatusChanged(command_id="cmd-7f3a", action=CommandAction.PROFILE,
                                      status=CommandStatus.COMPLETED,
                                      result={"trace": "w1-trace.json", "wall_s": 0.84}), epoch)


def scripted_run(run_id: str = "demo-run", *, epochs: int = 24, envs: int = 4, seed: int = 7,
                 ts0: float = 1_750_000_000.0, finish: bool = True) -> list[Event]:
    """A whole run as events, seq 1..N."""
    rng = random.Random(seed)
    run = _Run(run_id, ts0)
    run.emit(RunStarted(name="cifar-esper", config={"policy": "ppo", "n_envs": envs, "lr": 3e-4,
                                                    "telemetry_level": "NORMAL"}), 0)
    seeds: dict = {}
    acc = [0.1 + 0.02 * e for e in range(envs)]
    for epoch in range(1, epochs + 1):
        if epoch == 15:
            seeds.clear()  # fresh hosts: what grew before is gone, new seeds start over
        for env in range(envs):
            run.step += 50
            _lifecycle(run, rng, seeds, env, epoch)
            acc[env] = min(0.93, acc[env] + rng.uniform(0.0, 0.05) - (0.02 if rng.random() < 0.15 else 0.0))
            run.emit(EpochCompleted(round=epoch // 4, accuracy=round(acc[env], 4),
                                    val_loss=round(2.3 * (1 - acc[env]), 4), train_loss=round(2.4 * (1 - acc[env]), 4),
                                    reward=round(rng.uniform(-0.02, 0.05), 4),
                                    action=rng.choice(("WAIT", "GERMINATE", "ADVANCE", "PRUNE")),
                                    seeds=_snapshots(seeds, env), host_params=HOST_PARAMS,
                                    fossilized_params=_fossilized_params(seeds, env)), epoch, env)
        if epoch % 4 == 0:
            _round_end(run, rng, epoch, epoch // 4)
        _commands(run, epoch)
        run.emit(Heartbeat(uptime_s=round(epoch * 0.5, 1)), epoch)
    if finish:
        end = EsperOutcome(status="completed", duration_s=round(epochs * 0.5, 1), epochs=epochs, rounds=epochs // 4,
                           final_accuracy=round(max(acc), 4))
        run.emit(SummaryUpdated(values=end.summaries()), epochs)
        run.emit(end.finished(), epochs)
    return run.events
