"""Run-time profiles of upload and inference times, fitted by simple regression.

The LALB paper profiles every model on every GPU type: upload time depends on model size only,
inference time on the model and the batch size. Here both are fitted on line from what the
devices report (least squares over the last samples), starting from priors that come from the
device's measured copy bandwidth, never from hard-coded per-model constants.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


class LinearFit:
    """``y ≈ a + b·x`` over the last ``window`` samples (ordinary least squares)."""

    def __init__(self, window: int = 64) -> None:
        self._xy: deque[tuple[float, float]] = deque(maxlen=window)
        self._coef: tuple[float, float] | None = None

    def __len__(self) -> int:
        return len(self._xy)

    def add(self, x: float, y: float) -> None:
        self._xy.append((float(x), float(y)))
        self._coef = None

    def predict(self, x: float) -> float | None:
        if not self._xy:
            return None
        if self._coef is None:
            self._coef = self._fit()
        a, b = self._coef
        return max(0.0, a + b * x)

    def _fit(self) -> tuple[float, float]:
        n = len(self._xy)
        mx = sum(x for x, _ in self._xy) / n
        my = sum(y for _, y in self._xy) / n
        sxx = sum((x - mx) ** 2 for x, _ in self._xy)
        if n < 2 or sxx <= 1e-12 * max(1.0, mx * mx):
            # One x value seen so far: the mean, scaled through the origin, is the best guess.
            return (0.0, my / mx) if mx > 0 else (my, 0.0)
        b = sum((x - mx) * (y - my) for x, y in self._xy) / sxx
        if b < 0:  # noise made a negative slope: fall back to proportional
            return (0.0, my / mx) if mx > 0 else (my, 0.0)
        return (my - b * mx, b)


@dataclass
class DeviceTypePrior:
    """What a device measured about itself at start (bytes per second)."""

    copy_bw: float  # host tier → device memory
    compute_bw: float  # weights streamed per second during a forward pass


@dataclass
class Estimator:
    """Upload/inference/cold-start estimates per device type, learned from observations."""

    priors: dict[str, DeviceTypePrior] = field(default_factory=dict)
    default_prior: DeviceTypePrior = field(
        # gpu-pool.md: pinned host memory over PCIe Gen4 x16 delivers about 25 GB/s.
        default_factory=lambda: DeviceTypePrior(copy_bw=25e9, compute_bw=25e9)
    )
    window: int = 64
    _upload: dict[str, LinearFit] = field(default_factory=dict)
    _cold: dict[str, LinearFit] = field(default_factory=dict)
    _infer: dict[tuple[str, str], LinearFit] = field(default_factory=dict)
    _infer_per_byte: dict[str, LinearFit] = field(default_factory=dict)

    def prior(self, dtype: str) -> DeviceTypePrior:
        return self.priors.get(dtype, self.default_prior)

    def upload_s(self, size: int, dtype: str) -> float:
        fit = self._upload.get(dtype)
        guess = fit.predict(size) if fit is not None else None
        return guess if guess is not None else size / self.prior(dtype).copy_bw

    def cold_start_s(self, size: int, dtype: str) -> float:
        """A fresh worker process plus a full load (the Exclusive policy's switch cost)."""
        fit = self._cold.get(dtype)
        guess = fit.predict(size) if fit is not None else None
        return guess if guess is not None else 10 * self.upload_s(size, dtype)

    def infer_s(self, model: str, size: int, batch: int, dtype: str) -> float:
        fit = self._infer.get((model, dtype))
        guess = fit.predict(batch) if fit is not None else None
        if guess is not None:
            return guess
        # Never seen this model here: scale what other models cost per weight byte.
        per_byte = self._infer_per_byte.get(dtype)
        guess = per_byte.predict(size) if per_byte is not None else None
        if guess is not None:
            return guess * max(1, batch)
        return size / self.prior(dtype).compute_bw * max(1, batch)

    def observe_upload(self, size: int, dtype: str, seconds: float) -> None:
        self._upload.setdefault(dtype, LinearFit(self.window)).add(size, seconds)

    def observe_cold_start(self, size: int, dtype: str, seconds: float) -> None:
        self._cold.setdefault(dtype, LinearFit(self.window)).add(size, seconds)

    def observe_infer(self, model: str, size: int, batch: int, dtype: str, seconds: float) -> None:
        self._infer.setdefault((model, dtype), LinearFit(self.window)).add(max(1, batch), seconds)
        self._infer_per_byte.setdefault(dtype, LinearFit(self.window)).add(
            size, seconds / max(1, batch)
        )
