"""Simic telemetry: gradient, LSTM and per-layer health, anomalies, phase timing, profile windows.

Every collector reads the device once per collection and is cheap when the level says
it should not run. The run (``nissa``) owns levels, commands and profile windows.
"""

from trainer.telemetry.anomaly import AnomalyConfig, AnomalyDetector
from trainer.telemetry.ema import BiasCorrectedEMA, Drift, EMAConfig, GradientEMATracker
from trainer.telemetry.gradients import (
    GradientStats,
    GradientThresholds,
    PendingGradients,
    collect_gradients,
    resolve_all,
    seed_gradient_ratio,
)
from trainer.telemetry.install import telemetry_for_training
from trainer.telemetry.lstm import LSTMThresholds, lstm_health
from trainer.telemetry.sites import SimicTelemetry, TelemetryConfig

__all__ = [
    "AnomalyConfig", "AnomalyDetector", "BiasCorrectedEMA", "Drift", "EMAConfig",
    "GradientEMATracker", "GradientStats", "GradientThresholds", "LSTMThresholds", "PendingGradients",
    "SimicTelemetry", "TelemetryConfig",
    "collect_gradients", "lstm_health",
    "resolve_all", "seed_gradient_ratio", "telemetry_for_training",
]
