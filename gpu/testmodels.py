"""Small real torch models of chosen sizes, for tests, benchmarks and demos on virtual devices.

Built on the ``meta`` device and materialised with ``load_state_dict(assign=True)`` from
seeded tensors, so a 100 MB model costs a fill, not a slow random initialisation.
"""

from __future__ import annotations

import io
import time
from typing import Any


def mlp(size_mb: float, width: int = 512, seed: int = 0) -> Any:
    """An ``nn.Sequential`` of ``width`` x ``width`` Linear layers totalling about ``size_mb``."""
    import torch

    layer_bytes = (width * width + width) * 4
    n = max(1, round(size_mb * 2**20 / layer_bytes))
    with torch.device("meta"):
        layers: list[torch.nn.Module] = []
        for _ in range(n):
            layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
        m = torch.nn.Sequential(*layers)
    g = torch.Generator().manual_seed(seed)
    sd = {
        k: torch.randn(v.shape, generator=g) * (1.0 / width**0.5) for k, v in m.state_dict().items()
    }
    m.load_state_dict(sd, assign=True)
    return m.eval()


def model_bytes(m: Any) -> bytes:
    """``torch.save`` of the whole module: what an action ships as its model file."""
    import torch

    buf = io.BytesIO()
    torch.save(m, buf)
    return buf.getvalue()


def nbytes(m: Any) -> int:
    return sum(t.numel() * t.element_size() for t in [*m.parameters(), *m.buffers()])


class Sleepy:
    """Marker namespace; see ``SleepyNet`` (kept importable by the workers)."""


def _sleepy_cls() -> Any:
    import torch

    class SleepyNet(torch.nn.Module):
        """Sleeps ``delay_s`` per call: a slow inference for crash and queueing tests."""

        def __init__(self, delay_s: float = 1.0, width: int = 64) -> None:
            super().__init__()
            self.delay_s = delay_s
            self.lin = torch.nn.Linear(width, width)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            time.sleep(self.delay_s)
            return self.lin(x)

    SleepyNet.__module__ = __name__
    SleepyNet.__qualname__ = "SleepyNet"
    return SleepyNet


def __getattr__(name: str) -> Any:
    if name == "SleepyNet":  # built lazily so importing this module needs no torch
        cls = _sleepy_cls()
        globals()["SleepyNet"] = cls
        return cls
    raise AttributeError(name)
