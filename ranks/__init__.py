"""ranks: the process group of a multi-rank run, for the telemetry client and the trainer alike.

``Ranks`` (``ranks.group``) is the one object that calls ``torch.distributed``: which rank this process is,
its device, how the ranks agree on a value, gather, reduce and broadcast. ``join_ranks`` joins the group the
loop made already, the one torchrun describes in the environment, or none (rank 0 of 1). ``nissa`` agrees on
commands and run ids through it; Esper's PPO reduces its gradients through it. It imports nothing of the
project, and torch only where a collective needs it.
"""

from ranks.group import GATHER_BYTES, SEED_STRIDE, RankError, Ranks, RanksConfig, join_ranks, tensor_bytes

__all__ = ["GATHER_BYTES", "SEED_STRIDE", "RankError", "Ranks", "RanksConfig", "join_ranks", "tensor_bytes"]
