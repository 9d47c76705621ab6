"""A torch function mode that records every call bringing a tensor's values to the host (a device sync on an
accelerator), so a test can assert that sampling stays on the model's device."""

from __future__ import annotations

from torch.overrides import TorchFunctionMode

HOST_READS = {"cpu", "tolist", "item", "numpy", "__int__", "__float__", "__bool__", "__index__"}


class HostReads(TorchFunctionMode):
    """Records the names of host-reading calls made while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in HOST_READS:
            self.calls.append(func.__name__)
        return func(*args, **(kwargs or {}))
