"""``run_training``: the entry point the CLI and the tests share."""

from __future__ import annotations

import logging
import time

import torch
import torch.nn.functional as F

from leyline import EpochCompleted, RunFinished

from trainer.data import load_task
from trainer.hooks import RunHooks
from trainer.kasmina.host import CNNHost
from trainer.simic.config import TrainConfig

logger = logging.getLogger(__name__)


def resolve_device(name: str) -> torch.device:
    """``auto`` → cuda when available, else cpu."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def run_training(config: TrainConfig, hooks: RunHooks) -> RunFinished:
    """Train ``config.rounds`` rounds and return the summary.

    Emits every event between ``run_started`` and ``run_finished``: the caller emits those
    two (it knows the run's name and how it ended).
    """
    start = time.perf_counter()
    device = resolve_device(config.device)
    torch.manual_seed(config.seed)
    data = load_task(config.task, seed=config.seed, n_train=config.train_size, n_val=config.val_size,
                     data_dir=config.data_dir).to(device)
    step = epoch = 0
    acc = best = 0.0
    for round_ in range(1, config.rounds + 1):
        hosts = [CNNHost(config.host_config).to(device) for _ in range(config.n_envs)]
        opts = [torch.optim.SGD(h.parameters(), lr=config.host_lr, momentum=0.9, weight_decay=5e-4)
                for h in hosts]
        for _ in range(config.episode_length):
            epoch += 1
            perm = torch.randperm(data.n_train, device=device)
            for i in range(0, data.n_train, config.batch_size):
                idx = perm[i: i + config.batch_size]
                for host, opt in zip(hosts, opts):
                    host.train()
                    loss = F.cross_entropy(host(data.train_x[idx]), data.train_y[idx])
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                step += 1
                hooks.step_boundary(step, epoch)
            for env, host in enumerate(hosts):
                host.eval()
                with torch.no_grad():
                    logits = host(data.val_x)
                acc = float((logits.argmax(1) == data.val_y).float().mean())
                best = max(best, acc)
                hooks.emit(EpochCompleted(round=round_, accuracy=acc,
                                          val_loss=float(F.cross_entropy(logits, data.val_y))), env=env)
            hooks.epoch_end(epoch)
    return RunFinished(status="completed", duration_s=time.perf_counter() - start, epochs=epoch,
                       rounds=config.rounds, final_accuracy=acc, best_accuracy=best)
