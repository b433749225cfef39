"""TensorBoard's ``add_hparams`` (torch's writer puts them in a directory of their own under the run's): the
imported run carries them as its config, filterable as ``config.lr``, not a child run beside it."""

from __future__ import annotations

from nissa.importer.tensorboard import read_runs


def test_hparams_are_the_imported_runs_own(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(tmp_path / "tb" / "exp")) as writer:
        for step in range(3):
            writer.add_scalar("loss", 1.0 / (step + 1), step)
        writer.add_hparams({"lr": 0.01, "opt": "adam"}, {"hparam/acc": 0.75})
    with SummaryWriter(str(tmp_path / "tb" / "other")) as writer:
        writer.add_scalar("loss", 2.0, 0)
    runs = list(read_runs(tmp_path / "tb"))
    assert [r.name for r in runs] == ["exp", "other"]
    exp = runs[0]
    assert {k: exp.config[k] for k in ("lr", "opt")} == {"lr": 0.01, "opt": "adam"}
    assert exp.values == 4 and "lr" not in runs[1].config  # the loss's three points and add_hparams' metric
