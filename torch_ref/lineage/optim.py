"""The lineage's optimizer variants (LINEAGE.md 6; mirrors jaxgpt.lineage.optim): Muon's momentum
form (the record's EMA, #8/#9's SGD-style), the Newton-Schulz step's grouping (the record's
polynomial, #8/#9's chain), and the cooldown in whole steps (#8-#15's warmdown_iters). Resolved
once from an OptimConfig."""

from __future__ import annotations

from dataclasses import dataclass

from torch_ref.config import OptimConfig


@dataclass(frozen=True)
class OptimVariants:
    momentum_form: str  # Muon's momentum: "ema" or "sgd" (torch_ref.muon)
    ns_iteration: str  # the Newton-Schulz step: "poly" or "chain" (torch_ref.muon)
    whole_step_cooldown: bool  # the cooldown as round(cooldown_frac * steps) whole steps (schedules.lr_multiplier)

    def muon_options(self) -> dict[str, str]:
        """torch_ref.muon.Muon's keyword arguments for these variants."""
        return {"momentum_form": self.momentum_form, "ns_iteration": self.ns_iteration}


def optim_variants(config: OptimConfig) -> OptimVariants:
    lineage = config.lineage
    return OptimVariants(lineage.muon_momentum_form, lineage.ns_iteration, lineage.cooldown_whole_steps)
