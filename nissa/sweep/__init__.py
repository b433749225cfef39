"""Sweeps from the client side: ``nissa sweep`` (create, agent, status, stop), the probe of a ``pbt`` spec's command
at create, the agent that runs a sweep's trials on this machine, and what a trial's loop gets (its values in
``run.config``, ``run.on_hparams``, ``run.on_restore``, ``apply_hparams``)."""

from nissa.sweep.hparams import apply_hparams

__all__ = ["apply_hparams"]
