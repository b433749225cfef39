"""What the project's own producers make is a distribution by the ingest rules (``distribution_problem``):
``nissa.Histogram`` of empty, constant, all-NaN, half, integer, huge and mixed tensors, alone and binned together."""

from __future__ import annotations

import math

import torch

import nissa
from leyline import Histograms, decode_event, encode_event, make_event
from leyline.payloads_histogram import distribution_problem
from nissa.histogram import distributions


def test_nissa_histograms_of_awkward_tensors_are_valid_distributions():
    big = torch.finfo(torch.float32).max
    values = [torch.tensor([]), torch.full((5,), 2.5), torch.tensor([math.nan, math.inf]), torch.randn(30).half(),
              torch.randint(-3, 9, (40,)), torch.tensor([-big, big, 0.0]), torch.tensor([1.0, math.nan, -math.inf]),
              torch.randn(1000).double() * 1e300, torch.tensor([-1.7e308, 1.0, 1.7e308], dtype=torch.float64)]
    for bins in (1, 7, 64, 512):
        made = distributions([(f"t{i}", nissa.Histogram(v, bins=bins)) for i, v in enumerate(values)])
        assert [distribution_problem(d) for d in made] == [None] * len(values)
        event = make_event(Histograms(histograms=made), run_id="r", seq=1, ts=1.7e9)
        assert decode_event(encode_event(event)) == event
