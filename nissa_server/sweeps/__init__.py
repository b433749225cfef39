"""Sweeps on the server: search (Optuna's samplers and pruners), population-based training, trial leases."""
