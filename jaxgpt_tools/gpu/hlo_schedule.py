"""Where a compiled step's collectives sit among its compute, read from an optimized, scheduled HLO.

XLA:GPU prints the entry computation in its execution order (`is_scheduled=true`). An
asynchronous collective is a `*-start` / `*-done` pair; whatever the schedule puts between the two
may run while the data moves. For each collective this reads its bytes (the result each device
ends up with) and the compute the schedule places before its start, between start and done, and
after its done, each as a roofline estimate: per kernel max(FLOPs / peak FLOP/s, bytes / peak
bandwidth), FLOPs from the dots of GEMM fusions, bytes as `jaxgpt_tools.common.hlo.kernel_bytes` counts them.
A while loop counts its body times its known trip count. Custom calls (the Pallas attention
kernels) count their bytes only: their FLOPs are not in the HLO. Estimates of a plan compiled
without a GPU, no autotuning: they rank and place work, they are not timings.
"""

from __future__ import annotations

import math
import re
from typing import Any

from jaxgpt_tools.common import hlo
from jaxgpt_tools.gpu.compile_plan import PEAKS


def _dims(shape: str) -> list[int]:
    match = re.search(r"\[([\d,]*)\]", shape)
    return [int(d) for d in match.group(1).split(",") if d] if match else []


def _collective(inst: hlo.Instruction) -> str | None:
    return next((kind for kind in hlo.COLLECTIVES if inst.opcode.startswith(kind)), None)


class CostModel:
    """Roofline estimates (ms) of the kernels of one HLO module on one device kind."""

    def __init__(self, hlo_text: str, device: str = "h100"):
        if device not in PEAKS:
            raise ValueError(f"no published peaks for {device!r}; known: {sorted(PEAKS)}")
        self.flop_rate, self.byte_rate = PEAKS[device]
        self.module = hlo.parse_module(hlo_text)
        if not self.module.entry:
            raise ValueError("no ENTRY computation in the HLO text")
        self.shapes = self.module.shapes()

    def dot_flops(self, computation: str) -> float:
        """FLOPs of the dots in a computation and the fusions it calls (2 x output x contraction)."""
        total = 0.0
        for inst in self.module.computations.get(computation, []):
            if inst.opcode == "dot" and inst.operands:
                contracting = re.search(r"lhs_contracting_dims=\{([\d,]*)\}", inst.attrs)
                lhs = _dims(self.shapes.get(inst.operands[0], ""))
                k = math.prod([lhs[int(d)] for d in contracting.group(1).split(",") if d]) if contracting and lhs else 1
                total += 2.0 * math.prod(_dims(inst.shape)) * k
            total += sum(self.dot_flops(called) for called in inst.called("calls"))
        return total

    def instruction_ms(self, inst: hlo.Instruction) -> float:
        """Roofline estimate of one instruction; 0 for those that launch no kernel and for
        collectives (their time is the link's, estimated elsewhere)."""
        if inst.opcode in hlo.FREE_OPCODES or _collective(inst):
            return 0.0
        if inst.opcode == "while":
            return sum(map(self.computation_ms, inst.called("body"))) * (hlo.trip_count(inst) or 1)
        if inst.opcode in hlo.CONTROL_OPCODES:
            return sum(self.computation_ms(c) for key in ("to_apply", "branch_computations") for c in inst.called(key))
        flops = sum(self.dot_flops(called) for called in inst.called("calls"))
        moved = hlo.kernel_bytes(self.module, inst, self.shapes)
        return 1e3 * max(flops / self.flop_rate, moved / self.byte_rate)

    def computation_ms(self, name: str) -> float:
        return sum(self.instruction_ms(i) for i in self.module.computations.get(name, []))


def collective_schedule(hlo_text: str, device: str = "h100") -> dict[str, Any]:
    """The entry computation's collectives in schedule order, each with its kind, result bytes,
    and the estimated compute (ms, roofline) scheduled before its start, between start and done,
    and after its done; plus the whole entry's compute estimate."""
    model = CostModel(hlo_text, device)
    entry = model.module.computations[model.module.entry]
    cost = [model.instruction_ms(inst) for inst in entry]
    starts: dict[str, int] = {}
    collectives = []
    for index, inst in enumerate(entry):
        kind = _collective(inst)
        if kind is None:
            continue
        if inst.opcode.endswith("-start"):
            starts[inst.name] = index
            continue
        begin = starts.pop(inst.operands[0], index) if inst.opcode.endswith("-done") else index
        collectives.append({
            "name": entry[begin].name, "kind": kind, "bytes": hlo.shape_bytes(inst.shape),
            "start_index": begin, "done_index": index, "asynchronous": begin != index,
            "compute_before_ms": sum(cost[:begin]),
            "compute_between_ms": sum(cost[begin + 1:index]),
            "compute_after_ms": sum(cost[index + 1:]),
        })
    return {"device": device, "instructions": len(entry), "compute_ms": sum(cost), "collectives": collectives}
