"""Tiny models, many small forward passes: one intra-op thread is faster than several (and far faster on a busy machine)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
