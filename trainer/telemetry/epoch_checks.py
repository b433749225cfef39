"""Per-epoch health checks: the faults a PPO update would report a whole round too late.

Fed once per epoch with that epoch's gradient collections (per env and scope: the host and each
training seed) and the loop's ``EpochSignals`` (accuracy and losses per env, what the policy's
decision showed). Checks, each on the run's own history rather than on absolute constants:

- ``nan_inf``: a scope's gradients, or an env's loss or accuracy, are not finite;
- ``gradient_explosion``: a scope's largest gradient norm of the epoch is many times the median of
  its own earlier epochs (a learning-rate spike);
- ``dead_seed``: a training seed's gradients are gone: zero, or a tiny fraction of its own median;
- ``loss_spike``: an env's training loss jumped well above the highest it had in this round (a
  learning-rate spike: with BatchNorm the weights grow and the gradients measured at the next
  stride are often back to normal, while the epoch's loss shows the blow-up);
- ``loss_drift``: an env's training loss stayed well above what the hosts of earlier rounds had at
  the same epoch, for several epochs (corrupted labels, a milder learning-rate spike: the loss
  triples on 10% permuted labels, where a healthy host's is within 2× of the reference);
- ``gradient_drift``: an env's host gradient norm moved away from the norm the hosts of earlier
  rounds had at the same epoch of their episode, for several epochs in a row (hosts are fresh
  every round, so the same epoch of earlier rounds is the fair reference, not the epoch before);
- ``performance_degradation``: an env's validation accuracy stayed well below its own recent
  best in this round for several epochs (the original detector's B7-DRL-02; one-epoch dips of
  30-60% are common in healthy runs, as seeds blend in and BatchNorm statistics catch up);
- ``value_collapse``: the critic's estimates stopped differing between envs and stopped moving
  from one decision to the next (either alone happens by chance: two envs' estimates can
  coincide);
- ``entropy_collapse``: the policy's entropy at decision time fell to a fraction of its own median.

A check reports when its condition starts, once per (anomaly, env, scope), and re-arms when the
condition clears: a dead seed is one event, not one per epoch.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from leyline import AnomalyDetected
from trainer.simic.sites import EpochSignals, PolicySignals
from trainer.telemetry.gradients import GradientStats

HOST_SCOPE = "host"
Finding = tuple[int | None, AnomalyDetected]
"""An anomaly and the env it belongs to (None: the policy, shared by every env)."""


@dataclass(frozen=True)
class EpochCheckConfig:
    """Thresholds of the per-epoch checks, each relative to a series' own history."""

    min_history: int = 4
    """Samples a series needs before it is judged against its own history."""
    history: int = 64
    """Samples kept per series; their median is the reference."""
    explosion_factor: float = 10.0
    """Largest gradient norm of the epoch over the scope's median above which gradients exploded."""
    dead_factor: float = 1e-3
    """A seed's largest gradient norm of the epoch under this fraction of its median: the seed is dead.
    A seed too young for a history is dead only when its gradients are exactly zero."""
    drift_factor: float = 4.0
    """Host gradient norm over (or under) the same epoch of earlier rounds beyond which it drifted."""
    drift_epochs: int = 2
    """Consecutive epochs the drift must last before it is reported."""
    drift_memory: float = 0.5
    """Weight of earlier rounds in the per-epoch reference (an EMA across rounds)."""
    loss_spike: float = 3.0
    """An env's training loss over the highest of its earlier epochs this round above which it spiked."""
    loss_drift_factor: float = 2.0
    """An env's training loss over the same epoch of earlier rounds (an EMA across rounds, weighted by
    ``drift_memory``) above which it drifted. Chosen on development seeds, where healthy hosts stayed
    under 2.0 (99th percentile 1.9) and 10% permuted labels gave 3×."""
    loss_drift_epochs: int = 2
    """Consecutive epochs the loss must stay that high before it is reported."""
    degradation: float = 0.4
    """Fraction of its recent best an env's accuracy must lose to count as degraded."""
    degradation_epochs: int = 2
    """Consecutive epochs the accuracy must stay that low before it is reported."""
    recent_epochs: int = 5
    """Epochs of this round that make the recent best."""
    warmup_epochs: int = 3
    """Epochs of a round (fresh hosts learning from scratch) before accuracy is judged."""
    value_factor: float = 1e-3
    """The critic's step-to-step movement under this fraction of its median: the value head collapsed."""
    entropy_factor: float = 0.25
    """Decision-time entropy under this fraction of its median: the policy's entropy collapsed."""

    def __post_init__(self) -> None:
        if self.min_history < 1 or self.history < self.min_history:
            raise ValueError("need 1 <= min_history <= history")
        if min(self.explosion_factor, self.drift_factor, self.loss_spike, self.loss_drift_factor) <= 1:
            raise ValueError("explosion_factor, drift_factor, loss_spike and loss_drift_factor must be > 1")
        if not (0 < self.dead_factor < 1 and 0 < self.value_factor < 1 and 0 < self.entropy_factor < 1
                and 0 < self.degradation < 1 and 0 <= self.drift_memory < 1):
            raise ValueError("dead, value and entropy factors, degradation and drift_memory must be in (0, 1)")
        if min(self.drift_epochs, self.recent_epochs, self.degradation_epochs, self.loss_drift_epochs) < 1 \
                or self.warmup_epochs < 0:
            raise ValueError("drift_epochs, recent_epochs and degradation_epochs must be >= 1, warmup_epochs >= 0")


class _Series:
    """The last ``size`` values of one measurement and their median."""

    def __init__(self, size: int) -> None:
        self.values: deque[float] = deque(maxlen=size)

    def __len__(self) -> int:
        return len(self.values)

    def median(self) -> float:
        return statistics.median(self.values)

    def add(self, value: float) -> None:
        if math.isfinite(value):
            self.values.append(value)


def _finding(anomaly: str, detail: str, **evidence: float) -> AnomalyDetected:
    return AnomalyDetected(anomaly=anomaly, detail=detail,
                           evidence={k: float(v) for k, v in evidence.items() if math.isfinite(v)})


def _nonfinite(env: int, bad: list[str]) -> AnomalyDetected:
    return _finding("nan_inf", f"env {env}: non-finite {', '.join(bad)}", **{f"{b}_nonfinite": 1.0 for b in bad})


class EpochChecks:
    """The per-epoch checks and the histories they judge against."""

    def __init__(self, config: EpochCheckConfig | None = None) -> None:
        self.config = config or EpochCheckConfig()
        self._norms: dict[tuple[int, str], _Series] = {}
        self._drift_ref: dict[tuple[int, int], float] = {}
        self._drift_run: dict[int, int] = {}
        self._acc: dict[int, deque[float]] = {}
        self._low_run: dict[int, int] = {}
        self._top_loss: dict[int, float] = {}
        self._loss_ref: dict[tuple[int, int], float] = {}
        self._loss_run: dict[int, int] = {}
        self._round = -1
        self._last_values: tuple[float, ...] | None = None
        self._value_moves = _Series(self.config.history)
        self._value_spread = _Series(self.config.history)
        self._entropy = _Series(self.config.history)
        self._active: set[tuple[str, int | None, str]] = set()

    def state_dict(self) -> dict[str, object]:
        """The histories the checks judge against, as plain containers (for a checkpoint)."""
        return {"norms": {key: list(series.values) for key, series in self._norms.items()},
                "drift_ref": dict(self._drift_ref), "drift_run": dict(self._drift_run),
                "acc": {env: list(values) for env, values in self._acc.items()}, "low_run": dict(self._low_run),
                "top_loss": dict(self._top_loss), "loss_ref": dict(self._loss_ref),
                "loss_run": dict(self._loss_run), "round": self._round, "last_values": self._last_values,
                "value_moves": list(self._value_moves.values), "value_spread": list(self._value_spread.values),
                "entropy": list(self._entropy.values), "active": sorted(self._active, key=repr)}

    def load_state_dict(self, state: dict) -> None:
        c = self.config
        self._norms = {}
        for key, values in state["norms"].items():
            self._norms[key] = _Series(c.history)
            self._norms[key].values.extend(values)
        self._drift_ref, self._drift_run = dict(state["drift_ref"]), dict(state["drift_run"])
        self._acc = {env: deque(values, maxlen=c.recent_epochs) for env, values in state["acc"].items()}
        self._low_run, self._top_loss = dict(state["low_run"]), dict(state["top_loss"])
        self._loss_ref, self._loss_run = dict(state.get("loss_ref", {})), dict(state.get("loss_run", {}))
        self._round, self._last_values = int(state["round"]), state["last_values"]
        for name in ("value_moves", "value_spread", "entropy"):
            series = _Series(c.history)
            series.values.extend(state[name])
            setattr(self, f"_{name}", series)
        self._active = {tuple(key) for key in state["active"]}

    def forget_scope(self, env: int, scope: str) -> None:
        """A new seed took ``scope``: its history starts over and its checks re-arm."""
        self._norms.pop((env, scope), None)
        self._active = {key for key in self._active if key[1:] != (env, scope)}

    def run(self, signals: EpochSignals | None, grads: Iterable[tuple[int, GradientStats]]) -> list[Finding]:
        """Every check on one epoch; returns the conditions that started in it."""
        if signals is not None and signals.round != self._round:
            self._round, self._last_values = signals.round, None
            self._acc, self._low_run, self._top_loss = {}, {}, {}
        by_scope: dict[tuple[int, str], list[GradientStats]] = {}
        for env, stats in grads:
            by_scope.setdefault((env, stats.scope), []).append(stats)
        found: list[Finding] = []
        for (env, scope), scope_stats in sorted(by_scope.items()):
            found += self._gradients(env, scope, scope_stats, signals)
        if signals is not None:
            found += self._metrics(signals)
            if signals.policy is not None:
                found += self._policy(signals.policy)
        return found

    # --- edge triggering ----------------------------------------------------------------------

    def _edge(self, fired: bool, anomaly: str, env: int | None, scope: str,
              make: Callable[[], AnomalyDetected]) -> list[Finding]:
        key = (anomaly, env, scope)
        if not fired:
            self._active.discard(key)
            return []
        if key in self._active:
            return []
        self._active.add(key)
        return [(env, make())]

    # --- gradients ----------------------------------------------------------------------------

    def _gradients(self, env: int, scope: str, stats: list[GradientStats],
                   signals: EpochSignals | None) -> list[Finding]:
        c = self.config
        where = f"env {env} {scope}"
        bad = sum(s.nonfinite for s in stats)
        found = self._edge(bad > 0, "nan_inf", env, scope, lambda: _finding(
            "nan_inf", f"{where}: non-finite gradients ({bad} tensors this epoch)", nonfinite_grad_tensors=bad))
        norms = [s.global_norm for s in stats if s.finite and s.global_norm is not None]
        if not norms:
            return found
        top, series = max(norms), self._norms.setdefault((env, scope), _Series(c.history))
        known = len(series) >= c.min_history
        median = series.median() if known else math.nan
        exploded = known and top > c.explosion_factor * median
        found += self._edge(exploded, "gradient_explosion", env, scope, lambda: _finding(
            "gradient_explosion", f"{where}: gradient norm {top:.3g} is {top / median:.0f}× its median {median:.3g}",
            norm=top, median=median, threshold=c.explosion_factor))
        if scope != HOST_SCOPE:
            dead = top == 0.0 or (known and top < c.dead_factor * median)
            found += self._edge(dead, "dead_seed", env, scope, lambda: _finding(
                "dead_seed", f"{where}: the seed's gradients are gone (norm {top:.3g}, median {median:.3g})",
                norm=top, median=median, threshold=c.dead_factor))
        elif signals is not None:
            found += self._drift(env, sum(norms) / len(norms), signals.epoch_in_round)
        series.add(top)
        return found

    def _drift(self, env: int, norm: float, epoch: int) -> list[Finding]:
        c = self.config
        ref = self._drift_ref.get((env, epoch))
        ratio = norm / ref if ref else math.nan
        off = math.isfinite(ratio) and ratio > 0 and abs(math.log(ratio)) > math.log(c.drift_factor)
        self._drift_run[env] = self._drift_run.get(env, 0) + 1 if off else 0
        self._drift_ref[(env, epoch)] = norm if ref is None else c.drift_memory * ref + (1 - c.drift_memory) * norm
        lasted = self._drift_run[env] >= c.drift_epochs
        return self._edge(lasted, "gradient_drift", env, HOST_SCOPE, lambda: _finding(
            "gradient_drift", f"env {env} host: gradient norm {norm:.3g} is {ratio:.2f}× the norm at this epoch "
            f"of earlier rounds ({ref:.3g}) for {self._drift_run[env]} epochs",
            norm=norm, reference=ref or math.nan, ratio=ratio, threshold=c.drift_factor))

    # --- accuracy and losses ------------------------------------------------------------------

    def _metrics(self, s: EpochSignals) -> list[Finding]:
        found = []
        for env, (acc, val_loss, train_loss) in enumerate(zip(s.accuracy, s.val_loss, s.train_loss, strict=True)):
            bad = [name for name, v in (("accuracy", acc), ("val_loss", val_loss), ("train_loss", train_loss))
                   if not math.isfinite(v)]
            found += self._edge(bool(bad), "nan_inf", env, "metrics", functools.partial(_nonfinite, env, bad))
            found += self._loss(env, train_loss)
            found += self._loss_drift(env, train_loss, s.epoch_in_round)
            found += self._accuracy(env, acc, s.epoch_in_round)
        return found

    def _loss(self, env: int, loss: float) -> list[Finding]:
        top = self._top_loss.get(env)
        spiked = top is not None and math.isfinite(loss) and loss > self.config.loss_spike * top
        found = self._edge(spiked, "loss_spike", env, "loss", lambda: _finding(
            "loss_spike", f"env {env}: training loss {loss:.3g} is {loss / (top or math.nan):.1f}× the highest of this "
            f"round before it ({top:.3g})", loss=loss, highest_before=top or math.nan,
            threshold=self.config.loss_spike))
        if math.isfinite(loss):
            self._top_loss[env] = loss if top is None else max(top, loss)
        return found

    def _loss_drift(self, env: int, loss: float, epoch: int) -> list[Finding]:
        c = self.config
        ref = self._loss_ref.get((env, epoch))
        ratio = loss / ref if ref and math.isfinite(loss) else math.nan
        high = math.isfinite(ratio) and ratio > c.loss_drift_factor
        run = self._loss_run[env] = self._loss_run.get(env, 0) + 1 if high else 0
        if math.isfinite(loss) and not high:  # a drifted round does not become the reference
            self._loss_ref[(env, epoch)] = loss if ref is None else c.drift_memory * ref + (1 - c.drift_memory) * loss
        return self._edge(run >= c.loss_drift_epochs, "loss_drift", env, "loss", lambda: _finding(
            "loss_drift", f"env {env}: training loss {loss:.3g} is {ratio:.1f}× the loss at this epoch of earlier "
            f"rounds ({ref:.3g}) for {run} epochs", loss=loss, reference=ref or math.nan, ratio=ratio,
            threshold=c.loss_drift_factor))

    def _accuracy(self, env: int, acc: float, epoch_in_round: int) -> list[Finding]:
        c = self.config
        history = self._acc.setdefault(env, deque(maxlen=c.recent_epochs))
        best = max(history) if history else math.nan
        judged = epoch_in_round > c.warmup_epochs and len(history) > 0 and math.isfinite(acc)
        low = judged and acc < (1 - c.degradation) * best
        run = self._low_run[env] = self._low_run.get(env, 0) + 1 if low else 0
        found = self._edge(run >= c.degradation_epochs, "performance_degradation", env, "accuracy", lambda: _finding(
            "performance_degradation", f"env {env}: accuracy {acc:.3f} is {1 - acc / best:.0%} below its recent best "
            f"{best:.3f} for {run} epochs", accuracy=acc, recent_best=best, threshold=c.degradation))
        if math.isfinite(acc) and not low:  # the best before a fall stays the reference through it
            history.append(acc)
        return found

    # --- the policy --------------------------------------------------------------------------

    def _policy(self, p: PolicySignals) -> list[Finding]:
        c = self.config
        last, self._last_values = self._last_values, p.values
        flat: list[tuple[str, float, float]] = []  # (what, now, its median) of every collapsed spread
        spreads = [("across envs", max(p.values) - min(p.values), self._value_spread)] if len(p.values) > 1 else []
        if last is not None and len(last) == len(p.values):
            move = sum(abs(a - b) for a, b in zip(p.values, last, strict=True)) / len(p.values)
            spreads.append(("from one decision to the next", move, self._value_moves))
        for what, value, series in spreads:
            if len(series) >= c.min_history and value <= c.value_factor * series.median():
                flat.append((what, value, series.median()))
            series.add(value)
        collapsed = len(spreads) == 2 and len(flat) == 2  # one env: no spread across envs to judge by
        collapsed |= len(p.values) == 1 and len(flat) == 1
        found = self._edge(collapsed, "value_collapse", None, "policy", lambda: _finding(
            "value_collapse", "the critic's estimates stopped varying " + " and ".join(
                f"{what} ({value:.3g}, median {median:.3g})" for what, value, median in flat),
            spread=flat[0][1], median=flat[0][2], threshold=c.value_factor))
        entropy = sum(p.entropy) / max(len(p.entropy), 1)
        known = len(self._entropy) >= c.min_history
        median = self._entropy.median() if known else math.nan
        low = known and entropy < c.entropy_factor * median
        found += self._edge(low, "entropy_collapse", None, "policy", lambda: _finding(
            "entropy_collapse", f"decision-time entropy {entropy:.3f} fell to {entropy / median:.0%} of its median "
            f"{median:.3f}", entropy=entropy, median=median, threshold=c.entropy_factor))
        self._entropy.add(entropy)
        return found
