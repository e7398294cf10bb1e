"""Noise floors measured from several samples, and the perturbation most of those samples use.

A trajectory row bounds a cross-framework gap by a multiple of how far the same run moves under a
perturbation of rounding size. One sample of that movement is itself noisy (a lineage floor moved
1.8e-6 to 8.4e-6 between runs), so a floor is several samples and the bound is a multiple of their
upper quantile.

The samples' main perturbation, `ulp_perturbed`: every fp32 parameter of the initial state moved
by -1, 0 or +1 ulp (a seed draws which). Any fp32 evaluation of the first forward is within a few
ulps of the exact one, so this is the size of the difference two implementations start with; and,
unlike reordering one final sum (the 1-vs-2-device floor), it reaches every term of every sum,
which is where the runs are sensitive: an Adam element whose gradient is a near-cancellation below
eps (#15's smallest head gradient, 1.8e-9, is 0.2e-9 to 0.5e-9 off in fp32) takes a first step
lr x g / (|g| + eps) in proportion to its rounding error (docs/NUMERICS.md, "Why #15's training
rows drift")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# The floor's upper quantile: with 5-8 samples, between the two largest.
UPPER_QUANTILE = 0.9
# The seeds of the one-ulp perturbations of a floor's samples.
ULP_SEEDS = (0, 1, 2, 3, 4)


@dataclass(frozen=True)
class Spread:
    """A floor's samples (relative differences, each at least `resolution`: fp32's resolution of
    the measure) and their min / median / UPPER_QUANTILE."""

    samples: tuple[float, ...]
    resolution: float = 0.0

    @property
    def values(self) -> np.ndarray:
        return np.maximum(np.asarray(self.samples, np.float64), self.resolution)

    @property
    def low(self) -> float:
        return float(self.values.min())

    @property
    def median(self) -> float:
        return float(np.median(self.values))

    @property
    def upper(self) -> float:
        return float(np.quantile(self.values, UPPER_QUANTILE))

    def describe(self) -> str:
        """'min / median / q90 of n samples', the row's notes."""
        return f"{self.low:.2e} / {self.median:.2e} / {self.upper:.2e} (min / median / q{UPPER_QUANTILE * 100:.0f} of {len(self.samples)})"


def ulp_perturbed(state: dict[str, Any], seed: int) -> dict[str, Any]:
    """A copy of `state` ({name: torch tensor}) whose fp32 parameters have each element moved by
    -1, 0 or +1 ulp (uniform, numpy seed `seed`); exact zeros kept (every evaluation holds them
    exactly, and a denormal in a zero-initialised projection would undo the record's structure);
    other dtypes (#15's bf16 inv_freq) and buffers named *inv_freq kept as they are."""
    import torch

    rng = np.random.default_rng(seed)
    out = {}
    for name, value in state.items():
        if value.dtype != torch.float32 or name.endswith("inv_freq"):
            out[name] = value
            continue
        array = value.detach().cpu().numpy()
        direction = np.where(array == 0, 0, rng.integers(-1, 2, size=array.shape))
        moved = np.where(direction > 0, np.nextafter(array, np.float32(np.inf)),
                         np.where(direction < 0, np.nextafter(array, np.float32(-np.inf)), array))
        out[name] = torch.from_numpy(moved.astype(np.float32))
    return out
