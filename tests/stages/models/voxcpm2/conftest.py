"""One intra-op thread while these tests run: the tiny VoxCPM2 modules are thousands of small ops,
which torch's thread pool only slows down (by 100x on a busy 2-core machine)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="package")
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
