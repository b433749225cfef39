"""One realistic example payload per event kind: for docs, OpenAPI examples, tests and benchmarks."""

from __future__ import annotations

from leyline.enums import CommandAction, CommandStatus, Kind, TelemetryLevel
from leyline.esper import (
    EpochCompleted,
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
from leyline.events import PAYLOAD_TYPES, Event, make_event
from leyline.kinds import AnyPayload
from leyline.metrics import Metrics, SummaryUpdated, TextLogged
from leyline.payloads import (
    ConfigUpdated,
    RunFinished,
    RunResumed,
    RunStarted,
)
from leyline.payloads_alerts import AlertChanged
from leyline.payloads_health import (
    AnomalyDetected,
    DebugLayerStats,
    GradientHealth,
    LayerStat,
)
from leyline.payloads_histogram import Distribution, Histograms
from leyline.payloads_ops import (
    CommandStatusChanged,
    CompileStats,
    EventsDropped,
    Heartbeat,
    HubHealth,
    PhaseTime,
    PhaseTiming,
    ProfileCompleted,
    ProfileStarted,
    TelemetryLevelChanged,
    TopOp,
)
from leyline.payloads_system import (
    CpuStats,
    DiskStats,
    GpuStats,
    MemoryStats,
    NetworkStats,
    SystemMetrics,
)

_SLOTS = [
    SlotSnapshot(slot="r0c0", stage=SeedStage.BLENDING, seed_id="s3", blueprint="attention",
                 alpha=0.6, contribution=0.012),
    SlotSnapshot(slot="r0c1"),
]

SAMPLE_PAYLOADS: dict[Kind, AnyPayload] = {
    p.KIND: p
    for p in (
        RunStarted(name="demo", config={"policy": "ppo", "n_envs": 2, "lr": 3e-4, "amp": None}, project="cifar",
                   group="lr-sweep", tags=["baseline"], notes="first try", summary={"val_loss": "min"}),
        RunFinished(status="completed", duration_s=12.5),
        EpochCompleted(round=1, accuracy=0.55, val_loss=1.31, train_loss=1.4, reward=0.02,
                       action="GERMINATE", seeds=_SLOTS, host_params=4174, fossilized_params=152),
        SeedGerminated(slot="r0c0", seed_id="s3", blueprint="attention", params=2210),
        SeedStageChanged(slot="r0c0", seed_id="s3", from_stage=SeedStage.TRAINING,
                         to_stage=SeedStage.BLENDING, reason="G2 passed"),
        SeedGateEvaluated(slot="r0c0", seed_id="s3", gate="G2", passed=True, reason="healthy"),
        SeedFossilized(slot="r0c0", seed_id="s3", blueprint="attention", params=2210,
                       contribution=0.02, host_params=4174),
        SeedPruned(slot="r0c1", seed_id="s4", blueprint="conv_heavy", reason="hurts accuracy",
                   contribution=-0.01),
        PPOUpdate(round=1, policy_loss=-0.01, value_loss=0.4, entropy={"op": 1.6, "slot": 0.6},
                  approx_kl=0.004, clip_fraction=0.12, explained_variance=None, ratio_min=0.8,
                  ratio_max=1.25, grad_norm=0.9, update_epochs=4, value_std=0.31, return_std=0.52),
        GradientHealth(scope="host", global_norm=1.2, max_tensor_norm=0.7, n_tensors=12,
                       ema_norm=1.1, drift=0.09),
        LSTMHealth(h_norm=3.1, c_norm=5.2, h_max=0.9, c_max=2.4),
        AnomalyDetected(anomaly="kl_spike", detail="approx KL 0.09 > 0.0225",
                        evidence={"approx_kl": 0.09, "threshold": 0.0225}, auto_escalated=True),
        TelemetryLevelChanged(level=TelemetryLevel.DEBUG, previous=TelemetryLevel.NORMAL,
                              reason="command", until_epoch=12, command_id="c1"),
        DebugLayerStats(model="host", layers=[LayerStat(name="blocks.0.conv.weight", grad_norm=0.3,
                        grad_mean=0.0, grad_std=0.01, grad_abs_max=0.05, weight_norm=4.2)]),
        ProfileStarted(window="w1", batches=5, trace_dir="runs/r/profiles/w1", activities=["CPU"]),
        ProfileCompleted(window="w1", batches=5, trace_path="runs/r/profiles/w1/trace.json",
                         wall_s=0.8, top_ops=[TopOp(name="aten::conv2d", calls=20,
                         cpu_time_us=1500.0, self_cpu_time_us=90.0)]),
        PhaseTiming(round=1, phases=[PhaseTime(phase="train", wall_ms=120.0, cpu_ms=230.0)],
                    env_epochs_per_s=8.0, compile=CompileStats(mode="default", compiles=8, recompiles=2,
                                                               graph_breaks=0, eager_fallbacks=0, compile_s=41.5)),
        CommandStatusChanged(command_id="c1", action=CommandAction.DEBUG,
                             status=CommandStatus.APPLIED, applied_step=120),
        EventsDropped(counts={"gradient_health": 3}, total=3),
        HubHealth(queue_depth=2, logged=100, sent=98, acked=97, dropped={}, reconnects=0,
                  connected=True),
        Heartbeat(uptime_s=30.0),
        Metrics(values={"loss": 0.42, "lr": 0.001, "grad/max": "inf"}, labels={"split": "train"}),
        SummaryUpdated(values={"test_acc": 0.91}, directions={"val_loss": "min"}),
        ConfigUpdated(config={"lr": 0.001, "warmup": 100}),
        Histograms(histograms=[Distribution(name="weights/fc1", min=-0.5, max=0.5, count=10, bins=[1, 2, 4, 2, 1]),
                               Distribution(name="gradients/fc1", min=None, max=None, count=0, nonfinite=3,
                                            bins=[0, 0])]),
        TextLogged(tag="notes", text="lr warm-up ends here; <b>not</b> markup"),
        SystemMetrics(cpu=CpuStats(percent=63.0, load_1m=1.8, process_percent=98.5),
                      memory=MemoryStats(percent=41.0, used_bytes=6.6e9, total_bytes=1.6e10, process_rss_bytes=1.2e9),
                      disk=DiskStats(read_bytes_per_s=0.0, write_bytes_per_s=2.4e5),
                      network=NetworkStats(recv_bytes_per_s=1.5e4, sent_bytes_per_s=9.1e3),
                      gpu=[GpuStats(name="0", product="NVIDIA H100 80GB HBM3", utilization=31.0,
                                    memory_used_bytes=2.1e10, memory_total_bytes=8.5e10, memory_percent=24.7,
                                    power_w=212.0, temperature_c=48.0, sm_clock_mhz=1980.0, throttle_reasons=0)]),
        RunResumed(checkpoint="round-000002", path="runs/r/checkpoints/round-000002", round=2,
                   checkpoint_step=384, checkpoint_epoch=24, checkpoint_seq=310, pid=4242),
        AlertChanged(alert_id="a1", rule="stuck", condition="hang", state="firing", subject="rank 1",
                     message="rank 1 has not advanced past step 4210 for 62 s", command_id="c2"),
    )
}
assert set(SAMPLE_PAYLOADS) == set(PAYLOAD_TYPES)


def sample_events(run_id: str = "sample-run", start_seq: int = 1, ts: float = 1.7e9) -> list[Event]:
    """One event of every kind, seq contiguous from ``start_seq``."""
    return [
        make_event(p, run_id=run_id, seq=start_seq + i, ts=ts + i, step=i, epoch=i // 4)
        for i, p in enumerate(SAMPLE_PAYLOADS.values())
    ]
