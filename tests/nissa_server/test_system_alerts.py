"""An alert rule on a system series, as on any other: "GPU utilisation below 40%" fires per GPU and rank from
the ``system`` events a run streams, and resolves when the GPU is busy again."""

from __future__ import annotations

from leyline import GpuStats, SystemMetrics, make_event
from leyline.enums import EventKind
from leyline.samples import SAMPLE_PAYLOADS
from nissa_server.alerts.rules import parse_rules
from tests.support import IngestClient, running_server
from tests.support.webhook import webhook_receiver


async def test_a_threshold_on_gpu_utilization_fires_and_resolves(tmp_path):
    with webhook_receiver() as hook:
        rules = parse_rules({"destinations": {"hook": {"urls": [hook.url]}}, "rules": [
            {"name": "starved", "when": "threshold", "series": "system.gpu.utilization", "below": 40}]},
            "alerts.toml")
        with running_server(tmp_path, alert_rules=rules, maintenance_interval_s=0.2) as url:
            async with IngestClient(url, "gpu-run", rank=1) as trainer:
                seq = 0

                async def send(payload) -> None:
                    nonlocal seq
                    seq += 1
                    await trainer.send([make_event(payload, run_id="gpu-run", seq=seq, ts=1.7e9 + seq, step=seq,
                                                   epoch=0, rank=1)])

                def gpus(*busy: float) -> SystemMetrics:
                    return SystemMetrics(gpu=[GpuStats(name=str(i), utilization=u) for i, u in enumerate(busy)])

                await send(SAMPLE_PAYLOADS[EventKind.RUN_STARTED])
                await send(gpus(95.0, 30.0))
                bodies = [b for _, b in hook.wait(lambda got: len(got) >= 1, timeout=30)]
                assert bodies[0]["title"] == "[nissa] starved: gpu-run: system.gpu.utilization{gpu=1,rank=1}"
                assert bodies[0]["message"].splitlines()[0] == "system.gpu.utilization{gpu=1,rank=1} = 30, below 40"
                await send(gpus(95.0, 90.0))
                bodies = [b for _, b in hook.wait(lambda got: len(got) >= 2, timeout=30)]
                assert bodies[1]["title"] == "[nissa] resolved: starved: gpu-run: system.gpu.utilization{gpu=1,rank=1}"
