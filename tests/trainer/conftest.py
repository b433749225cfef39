"""Fixtures shared by the trainer's tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def one_thread():
    """One torch intra-op thread: two spinning against each other on a shared two-core machine are slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
