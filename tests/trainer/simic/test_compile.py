"""``--compile-mode`` on CPU (inductor and the C compiler are here): compile holds through the loop.

The loop test is the suite's costliest: it compiles two host-block regions (training and
validation each) and the policy's step and update with inductor. Inductor keeps compiled
graphs in its on-disk cache, so only a machine's first run pays the full price (70-90 s on
two quiet cores, 193 s on two busy ones; about 7 s afterwards).
"""

from __future__ import annotations

import math

import pytest
import torch

from leyline import CompileStats, PhaseTiming, TelemetryLevel
from leyline.esper import EpochCompleted, PPOUpdate
from tests.trainer.test_build import RecordingHooks
from trainer.build import run_training
from trainer.simic.config import TrainConfig
from trainer.telemetry.compile_stats import CompileMonitor

pytestmark = pytest.mark.usefixtures("one_thread")


def test_monitor_counts_recompiles_graph_breaks_and_fallbacks_to_eager():
    monitor = CompileMonitor("default")

    def grows(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    def talks(x: torch.Tensor) -> torch.Tensor:
        y = x + 1
        print(end="")  # untraceable: a graph break
        return y * 3

    # The eager backend: what is counted does not depend on inductor, and costs no C compiler.
    with torch._dynamo.config.patch(recompile_limit=2):
        compiled = torch.compile(grows, backend="eager", dynamic=False)
        for n in range(1, 5):  # a static shape per size: the third size passes the limit
            compiled(torch.ones(n))
    torch.compile(talks, backend="eager")(torch.ones(2))
    stats = monitor.stats()
    assert stats.recompiles == 1 and stats.eager_fallbacks == 1 and stats.graph_breaks == 1
    assert "recompile limit" in (stats.last_reason or ""), stats.last_reason
    assert stats.compiles >= 4


# Its own timeout, measured: a cold compile (an empty inductor cache) took 193 s on two cores at load 4 to 9,
# against 70-90 s on a quiet machine; the suite's 120 s is for tests that do not compile.
@pytest.mark.timeout(600)
def test_a_compiled_loop_holds_on_cpu():
    # Two block shapes sharing one forward, two envs, fresh hosts in round 2, a short last batch
    # (160 = 64 + 64 + 32) and validation batches: the old per-block compile hit the limit here.
    config = TrainConfig(device="cpu", compile_mode="default", policy="ppo", n_envs=2, rounds=2, episode_length=2,
                         train_size=160, val_size=64, batch_size=64, base_channels=4, host_blocks=2,
                         slots=("r0c0", "r0c1"), lstm_hidden=8, log_every=0, min_training_epochs=1, min_prune_age=1,
                         embargo_epochs=1)
    hooks = RecordingHooks(TelemetryLevel.NORMAL)
    summary = run_training(config, hooks)
    assert summary.status == "completed" and summary.rounds == 2
    stats: list[CompileStats] = [p.compile for _, p in hooks.of(PhaseTiming)]
    last = stats[-1]
    assert last.eager_fallbacks == 0 and last.graph_breaks == 0, last
    # Per block region one entry for training and one for validation (no_grad): 2 recompiles in all;
    # the policy's step and update compile once each.
    assert last.compiles == 2 * 2 + 2 and last.recompiles == 2, last
    assert stats[2] == last, "round 2's fresh hosts reuse the compiled regions: nothing compiles again"
    epochs = [p for _, p in hooks.of(EpochCompleted)]
    assert all(math.isfinite(p.train_loss) for p in epochs)
    assert len(hooks.of(PPOUpdate)) == 2


def test_a_torch_without_isolated_regions_gets_a_recompile_limit_the_shared_code_fits_in(monkeypatch):
    import torch

    from trainer import compiling

    config = torch._dynamo.config
    monkeypatch.setattr(config, "recompile_limit", 8)
    monkeypatch.setattr(compiling, "_isolates", lambda: False)
    fn = compiling.compiled(lambda x: x + 1, mode=None, name="unused")
    assert config.recompile_limit == compiling.SHARED_LIMIT
    assert callable(fn)
    monkeypatch.setattr(compiling, "_isolates", lambda: True)
    compiling.compiled(lambda x: x * 2, mode=None, name="isolated")  # the pinned torch takes the options
