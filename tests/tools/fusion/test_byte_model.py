"""jaxgpt_tools.fusion.byte_model: one byte model for both compilers, by hand on small kernel rows."""

from __future__ import annotations

from jaxgpt_tools.fusion import byte_model

# An XLA fusion that slices q out of merged's (T, 3D) result: XLA's own count reads the slice,
# the one model the whole buffer (T 4, D 2: bf16 (4, 6) in, bf16 (4, 2) out).
XLA_SLICE = {"name": "slice_fusion", "runs": 1, "read": 16.0, "written": 16, "operands": ["bf16[4,6]"], "result": "bf16[4,2]"}
# A multi-output fusion reading one buffer twice (listed once) and writing a tuple.
XLA_TUPLE = {"name": "mof", "runs": 2, "read": 8.0, "written": 24, "operands": ["f32[2]"], "result": "(f32[2], bf16[8])"}
INDUCTOR_ROW = {"name": "triton_poi_fused_0", "read": 48.0, "written": 16.0, "reads": [[4, "float32"], [16, "bfloat16"]],
                "writes": [[8, "bfloat16"]]}


def test_kernel_bytes_by_hand():
    assert byte_model.kernel_read_written("xla", XLA_SLICE) == (48.0, 16.0)  # the whole (4, 6) bf16 buffer: 48 bytes
    assert byte_model.kernel_read_written("xla", XLA_TUPLE) == (8.0, 24.0)  # 2 f32 + 8 bf16 written
    assert byte_model.kernel_read_written("inductor", INDUCTOR_ROW) == (48.0, 16.0)


def test_a_program_counts_loop_trips_and_apply_is_idempotent():
    record = {"compiler": "xla", "part": "qkv", "kernel_traffic_bytes": 16.0 + 16 + 2 * (8 + 24),
              "kernel_table": [XLA_SLICE, XLA_TUPLE]}
    assert byte_model.program_bytes(record) == 48 + 16 + 2 * (8 + 24)
    once = byte_model.apply_to_record(record)
    assert once["kernel_traffic_bytes"] == 128 and once["own_kernel_traffic_bytes"] == 96
    assert once["kernel_table"][0]["own_read"] == 16.0 and once["kernel_table"][0]["read"] == 48.0
    assert byte_model.apply_to_record(once) == once
    assert record["kernel_traffic_bytes"] == 96  # the input record is left as it was


def test_a_record_without_a_kernel_table_is_left_alone():
    block = {"compiler": "xla", "part": "block", "kernel_traffic_bytes": 5.0}
    assert byte_model.apply_to_record(block) is block
    study = byte_model.apply({"records": [block], "sweep": []})
    assert study["records"] == [block] and study["sweep"] == []
