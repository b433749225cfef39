"""Loop-agnostic telemetry: per-layer debug statistics, phase timing, profile windows, host-sync counting."""
