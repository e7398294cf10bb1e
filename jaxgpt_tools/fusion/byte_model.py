"""The fusion study's one byte model, the same for both compilers and all four columns: a kernel
reads every distinct buffer it takes and writes every buffer it produces, each whole, once, in
bytes of its dtype.

Per kernel of a QKV program's table (results.json's `kernel_table`):
  XLA:      the distinct operands' types (`operands`, e.g. "bf16[65536,2304]") and the result's
            type (`result`; a multi-output fusion's tuple summed), from the optimized HLO;
  Inductor: the distinct buffer arguments it reads (`reads`) and writes (`writes`), each
            [elements, dtype], from its output code (in_ptr / out_ptr / in_out_ptr, an extern
            call's out=; a `reinterpret_tensor` view as its view).
A buffer a kernel reads only part of (merged's (T, 3D) GEMM result, split into q, k and v by the
kernels after it) counts whole in both compilers alike; a buffer updated in place counts read and
written. A cuBLAS call's workspace (the s8 array its custom call returns beside its result) is
scratch the library may use in part or not at all, not data the program moves: left out. XLA's
own count (a fusion that only slices an operand reads its slices; a dynamic-update-slice writes
its update) is kept beside it as `own_read` / `own_written`.
`apply` rewrites a study's QKV records to this model (idempotent: it reads only the buffer lists).
"""

from __future__ import annotations

import re
from typing import Any

from jaxgpt_tools.common.hlo import shape_bytes

# Bytes per element of the torch dtypes Inductor's output code names.
TORCH_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "bool": 1, "int64": 8, "int32": 4, "uint8": 1,
               "float8_e4m3fn": 1, "float8_e5m2": 1}
MODEL = "distinct buffers whole"
# XLA's custom-call targets of cuBLAS / cuBLASLt GEMMs ("__cublas$gemm", "__cublas$lt$matmul"),
# whose result tuple ends in their workspace, an s8 array.
CUBLAS_PREFIX = "__cublas"


def result_arrays(kernel: dict[str, Any]) -> list[str]:
    """The array types an XLA kernel writes: its result's (a tuple's each), less a cuBLAS call's
    trailing s8 workspace."""
    arrays = re.findall(r"\w+\[[\d,]*\]", kernel["result"])
    if str(kernel.get("kind", "")).startswith(CUBLAS_PREFIX) and len(arrays) > 1 and arrays[-1].startswith("s8["):
        arrays = arrays[:-1]
    return arrays


def kernel_read_written(compiler: str, kernel: dict[str, Any]) -> tuple[float, float]:
    """(bytes read, bytes written) of one kernel row under the one model (per run of the kernel)."""
    if compiler == "xla":
        return float(sum(shape_bytes(t) for t in kernel["operands"])), float(sum(shape_bytes(t) for t in result_arrays(kernel)))
    sized = lambda buffers: float(sum(n * TORCH_BYTES[dtype] for n, dtype in buffers))  # noqa: E731
    return sized(kernel["reads"]), sized(kernel["writes"])


def program_bytes(record: dict[str, Any]) -> float:
    """Bytes a program's kernels read and write per call under the one model (loop trips counted)."""
    return sum(sum(kernel_read_written(record["compiler"], k)) * k.get("runs", 1) for k in record["kernel_table"])


def apply_to_record(record: dict[str, Any]) -> dict[str, Any]:
    """The record with its per-kernel `read` / `written` and its `kernel_traffic_bytes` under the
    one model (the compiler's own count kept once as `own_*`); a record without a per-kernel
    table (the block) is returned as it is."""
    if not record.get("kernel_table"):
        return record
    table = []
    for kernel in record["kernel_table"]:
        read, written = kernel_read_written(record["compiler"], kernel)
        table.append({**kernel, "own_read": kernel.get("own_read", kernel["read"]),
                      "own_written": kernel.get("own_written", kernel["written"]), "read": read, "written": written})
    out = {**record, "kernel_table": table, "byte_model": MODEL,
           "own_kernel_traffic_bytes": record.get("own_kernel_traffic_bytes", record["kernel_traffic_bytes"])}
    out["kernel_traffic_bytes"] = program_bytes(out)
    return out


def apply(study: dict[str, Any]) -> dict[str, Any]:
    """The study with every record that has a per-kernel table under the one model."""
    return {**study, "records": [apply_to_record(r) for r in study["records"]]}
