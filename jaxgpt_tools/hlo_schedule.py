"""Where a compiled step's collectives sit among its compute, read from an optimized, scheduled HLO.

XLA:GPU prints the entry computation in its execution order (`is_scheduled=true`). An
asynchronous collective is a `*-start` / `*-done` pair; whatever the schedule puts between the two
may run while the data moves. For each collective this reads its bytes (the result each device
ends up with) and the compute the schedule places before its start, between start and done, and
after its done, each as a roofline estimate: per kernel max(FLOPs / peak FLOP/s, bytes / peak
bandwidth), FLOPs from the dots of GEMM fusions, bytes from every operand and result. A while loop
counts its body times its known trip count. Custom calls (the Pallas attention kernels) count
their bytes only: their FLOPs are not in the HLO. Estimates of a plan compiled without a GPU, no
autotuning: they rank and place work, they are not timings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from jaxgpt.gpu_plan import PEAKS, shape_bytes

# name = TYPE opcode(operands), attributes; TYPE may be a tuple with nested parentheses.
_HEAD = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = ")
_HEADER = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) \(.*\) -> .*\{$", re.MULTILINE)
_COLLECTIVE_KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_FREE = {"parameter", "constant", "get-tuple-element", "bitcast", "tuple", "partition-id", "replica-id",
         "after-all", "opt-barrier"}  # no kernel: aliases, views and bookkeeping


@dataclass(frozen=True)
class Instruction:
    name: str
    type: str
    opcode: str
    operands: tuple[str, ...]
    attributes: str


def _balanced(text: str, start: int) -> int:
    """Index just past the parenthesis group opening at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    raise ValueError(f"unbalanced parentheses in HLO line: {text[:120]}")


def parse_instruction(line: str) -> Instruction | None:
    """One HLO instruction line; None for lines that are not instructions."""
    head = _HEAD.match(line)
    if not head:
        return None
    rest = line[head.end():]
    if rest.startswith("("):
        end = _balanced(rest, 0)
    else:
        end = rest.index(" ")
    type_, rest = rest[:end], rest[end:].lstrip()
    opcode = re.match(r"([\w\-]+)\(", rest)
    if not opcode:
        return None
    close = _balanced(rest, opcode.end() - 1)
    operands = tuple(re.findall(r"%([\w.\-]+)", rest[opcode.end():close - 1]))
    return Instruction(head.group(1), type_, opcode.group(1), operands, rest[close:])


def computations(hlo: str) -> dict[str, list[Instruction]]:
    """name -> instructions, in printed (for a scheduled module: execution) order; the entry
    computation is also under the key "ENTRY"."""
    result: dict[str, list[Instruction]] = {}
    for header in _HEADER.finditer(hlo):
        end = hlo.find("\n}", header.end())
        body = hlo[header.end():end if end >= 0 else len(hlo)]
        instructions = [i for i in map(parse_instruction, body.splitlines()) if i is not None]
        result[header.group(1)] = instructions
        if header.group(0).startswith("ENTRY"):
            result["ENTRY"] = instructions
    if "ENTRY" not in result:
        raise ValueError("no ENTRY computation in the HLO text")
    return result


def _dims(hlo_type: str) -> list[int]:
    match = re.search(r"\[([\d,]*)\]", hlo_type)
    return [int(d) for d in match.group(1).split(",") if d] if match else []


def _prod(values: list[int]) -> int:
    total = 1
    for value in values:
        total *= value
    return total


class CostModel:
    """Roofline estimates (ms) of the kernels of one HLO module on one device kind."""

    def __init__(self, hlo: str, device: str = "h100"):
        if device not in PEAKS:
            raise ValueError(f"no published peaks for {device!r}; known: {sorted(PEAKS)}")
        self.flop_rate, self.byte_rate = PEAKS[device]
        self.computations = computations(hlo)
        self.types = {name: {i.name: i.type for i in body} for name, body in self.computations.items()}
        self._flops: dict[str, float] = {}

    def dot_flops(self, computation: str) -> float:
        """FLOPs of the dots in a computation and in the fusions it calls (2 x output x contraction)."""
        if computation not in self._flops:
            total = 0.0
            types = self.types.get(computation, {})
            for inst in self.computations.get(computation, []):
                if inst.opcode == "dot" and inst.operands:
                    contracting = re.search(r"lhs_contracting_dims=\{([\d,]*)\}", inst.attributes)
                    lhs = _dims(types.get(inst.operands[0], ""))
                    k = _prod([lhs[int(d)] for d in contracting.group(1).split(",") if d]) if contracting and lhs else 1
                    total += 2.0 * _prod(_dims(inst.type)) * k
                for called in re.findall(r"calls=%?([\w.\-]+)", inst.attributes):
                    total += self.dot_flops(called)
            self._flops[computation] = total
        return self._flops[computation]

    def instruction_ms(self, inst: Instruction, computation: str = "ENTRY") -> float:
        """Roofline estimate of one instruction; 0 for those that launch no kernel and for
        collectives (their time is the link's, estimated elsewhere)."""
        if inst.opcode in _FREE or inst.opcode.startswith(_COLLECTIVE_KINDS):
            return 0.0
        if inst.opcode == "while":
            body = re.search(r"body=%?([\w.\-]+)", inst.attributes)
            trips = re.search(r'"known_trip_count":\{"n":"(\d+)"', inst.attributes)
            return (self.computation_ms(body.group(1)) if body else 0.0) * (int(trips.group(1)) if trips else 1)
        if inst.opcode in ("call", "conditional"):
            return sum(self.computation_ms(c) for c in re.findall(r"(?:to_apply|calls|branch_computations)=\{?%?([\w.\-]+)", inst.attributes))
        types = self.types.get(computation, {})
        moved = shape_bytes(inst.type) + sum(shape_bytes(types.get(op, "")) for op in inst.operands)
        flops = sum(self.dot_flops(c) for c in re.findall(r"calls=%?([\w.\-]+)", inst.attributes))
        return 1e3 * max(flops / self.flop_rate, moved / self.byte_rate)

    def computation_ms(self, name: str) -> float:
        return sum(self.instruction_ms(i, name) for i in self.computations.get(name, []))


def collective_schedule(hlo: str, device: str = "h100") -> dict[str, Any]:
    """The entry computation's collectives in schedule order, each with its kind, result bytes,
    and the estimated compute (ms, roofline) scheduled before its start, between start and done,
    and after its done; plus the whole entry's compute estimate."""
    model = CostModel(hlo, device)
    entry = model.computations["ENTRY"]
    cost = [model.instruction_ms(inst) for inst in entry]
    total = sum(cost)
    starts: dict[str, int] = {}
    collectives = []
    for index, inst in enumerate(entry):
        kind = next((k for k in _COLLECTIVE_KINDS if inst.opcode.startswith(k)), None)
        if kind is None:
            continue
        if inst.opcode.endswith("-start"):
            starts[inst.name] = index
            continue
        begin = starts.pop(inst.operands[0], index) if inst.opcode.endswith("-done") else index
        collectives.append({
            "name": entry[begin].name, "kind": kind, "bytes": shape_bytes(inst.type),
            "start_index": begin, "done_index": index, "asynchronous": begin != index,
            "compute_before_ms": sum(cost[:begin]),
            "compute_between_ms": sum(cost[begin + 1:index]),
            "compute_after_ms": sum(cost[index + 1:]),
        })
    return {"device": device, "instructions": len(entry), "compute_ms": total, "collectives": collectives}
