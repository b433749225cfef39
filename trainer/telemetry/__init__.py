"""Simic telemetry: gradient, LSTM and per-layer health, anomalies, phase timing, profile windows.

Every collector reads the device once per collection and is cheap when the level says
it should not run. ``nissa.control`` owns levels and commands; the profile handler
here plugs into its command processor.
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
from trainer.telemetry.install import install_profiling, install_rank_checks, telemetry_for_training
from trainer.telemetry.lstm import LSTMThresholds, lstm_health
from trainer.telemetry.sites import SimicTelemetry, TelemetryConfig

__all__ = [
    "AnomalyConfig", "AnomalyDetector", "BiasCorrectedEMA", "Drift", "EMAConfig",
    "GradientEMATracker", "GradientStats", "GradientThresholds", "LSTMThresholds", "PendingGradients",
    "SimicTelemetry", "TelemetryConfig",
    "collect_gradients", "install_profiling", "install_rank_checks", "lstm_health",
    "resolve_all", "seed_gradient_ratio", "telemetry_for_training",
]
