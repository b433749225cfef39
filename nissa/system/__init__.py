"""System metrics: the machine under a run (CPU, memory, disk and network I/O, each GPU), sampled by a daemon
thread of its own and emitted as ``system`` events (series ``system.*``); see ``nissa.system.sampler``."""

from nissa.system.sampler import SystemConfig, SystemSampler, start_system_metrics

__all__ = ["SystemConfig", "SystemSampler", "start_system_metrics"]
