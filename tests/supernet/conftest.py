"""Supernet tests run torch on one thread: tiny tensors, and a 2-core machine shared with other work."""

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """One intra-op thread: on a small shared machine, torch's thread pool spins against other processes."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
