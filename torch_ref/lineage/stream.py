"""The lineage's window schedule and data-stream variants (LINEAGE.md 7; mirrors
jaxgpt.lineage.stream): which schedule gives a step's window (the record's blocks, #18's floor,
#15's tokens, none for #8/#9), #8/#9's repeated first batch, and the per-rank shard switch of
#8/#9 and #15 with its record ranks. Resolved once from a TrainConfig; the stream
(torch_ref.data) and the schedules (torch_ref.schedules) take the values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch_ref import schedules
from torch_ref.config import TrainConfig


@dataclass(frozen=True)
class StreamVariants:
    window_schedule: str  # torch_ref.schedules.window_value's schedule
    repeat_first: bool  # #8/#9: step 0 and step 1 both train on batch 0
    shard_switch: str  # when a rank leaves a shard (torch_ref.data)
    data_ranks: int  # the record ranks whose offsets the per-rank shard switch uses

    def window(self, step: int, total_steps: int, max_tokens: int) -> int:
        """Step `step`'s window value in the schedule's unit (blocks; #15's tokens; 0: none)."""
        return schedules.window_value(step, total_steps, max_tokens, self.window_schedule)

    def shard_rule(self) -> tuple[str, int]:
        """(rule, data ranks): the per-rank shard switch, as torch_ref.data.batches_available takes it."""
        return self.shard_switch, self.data_ranks

    def stream_options(self) -> dict[str, Any]:
        """torch_ref.data.distributed_data_generator's keyword arguments for these variants."""
        return {"shard_switch": self.shard_switch, "data_ranks": self.data_ranks}

    def repeats_first(self, start_step: int) -> bool:
        """Whether the run serves its first batch twice (#8/#9, a run from step 0 only)."""
        return self.repeat_first and start_step == 0

    def repeated_batches(self, start_step: int, steps: int) -> int:
        """Batches served twice from `start_step` on: one when #8/#9's first batch repeats."""
        return int(self.repeats_first(start_step) and steps > 1)


def stream_variants(config: TrainConfig) -> StreamVariants:
    lineage = config.lineage
    return StreamVariants(lineage.window_schedule, lineage.repeat_first_batch, lineage.shard_switch,
                          lineage.data_ranks)
