"""``nissa.sweep.apply_hparams``: a sweep's new values on a real torch optimizer's param groups."""

import torch

from nissa.sweep import apply_hparams


def test_values_land_on_every_param_group_that_has_them():
    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    sgd = torch.optim.SGD([{"params": a.parameters()}, {"params": b.parameters(), "lr": 0.5}], lr=0.1, momentum=0.0)
    assert apply_hparams(sgd, {"lr": 0.01, "momentum": 0.9, "hidden": 32}) == {"lr": 0.01, "momentum": 0.9}
    assert [(g["lr"], g["momentum"]) for g in sgd.param_groups] == [(0.01, 0.9), (0.01, 0.9)]
    adam = torch.optim.Adam(a.parameters(), lr=0.1)
    assert apply_hparams(adam, {"beta2": 0.95, "weight_decay": 0.1}) == {"beta2": 0.95, "weight_decay": 0.1}
    assert adam.param_groups[0]["betas"] == (0.9, 0.95) and adam.param_groups[0]["weight_decay"] == 0.1
    assert apply_hparams(adam, {"momentum": 0.5}) == {}  # Adam has no momentum: nothing set, nothing said
