"""A config that grows during a run: ``run.config.update(...)`` and TensorBoard's ``add_hparams`` after the
first step are stored as the run's config (a ``config`` event), shown by ``GET /runs/{id}`` and filterable
(``config.lr>=…``), on each store."""

from __future__ import annotations

import httpx

import nissa
from tests.e2e.api import wait_for


def _found(url: str, q: str) -> list[str]:
    return [r["run_id"] for r in httpx.get(f"{url}/runs", params={"q": q}).json()]


def test_a_config_updated_mid_run_is_the_runs_config(tmp_path, server_url):
    run = nissa.init(server=server_url, run_name="grows", log_dir=tmp_path, system_metrics=False,
                     config={"lr": 0.001, "opt": {"name": "sgd"}})
    for i in range(3):
        run.step()
        run.log({"loss": 1.0 / (i + 1)})
    run.config.update({"lr": 0.02, "warmup": {"steps": 100}})
    run.config["seed"] = 7
    assert run.finish().complete
    wait_for(lambda: _found(server_url, "config.lr>=0.01") == [run.run_id], 30, "the new lr, filterable")
    assert _found(server_url, "config.warmup.steps=100 config.seed=7 config.opt.name=sgd") == [run.run_id]
    config = httpx.get(f"{server_url}/runs/{run.run_id}").json()["config"]
    assert config == {"lr": 0.02, "opt.name": "sgd", "warmup.steps": 100, "seed": 7}
    assert dict(run.config) == config


def test_add_hparams_after_the_first_step_is_kept(tmp_path, server_url):
    from nissa.integrations.tensorboard import SummaryWriter

    writer = SummaryWriter(server=server_url, run_name="tb-late", nissa_log_dir=tmp_path, system_metrics=False)
    for step in range(3):
        writer.add_scalar("loss", 1.0 / (step + 1), step)
    writer.add_hparams({"lr": 0.05, "layers": 4}, {"hparam/acc": 0.9})
    writer.close()
    run_id = writer.run.run_id
    wait_for(lambda: _found(server_url, "config.lr>=0.01 config.layers=4") == [run_id], 30, "add_hparams' config")
