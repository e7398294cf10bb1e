"""jaxgpt_tools.parity.record_masks without a record's log: how a forward's block masks are taken
(a stand-in script), and the layouts the records' masks are compared on. (The records' own masks
against both frameworks: parity_tests/test_record_masks.py.)"""

from __future__ import annotations

import types

import numpy as np
import pytest

from jaxgpt_tools.parity import record_masks
from jaxgpt_tools.parity.record_code import LoadedRecord
from jaxgpt_tools.parity.record_standins import KvBlocks


def _script(source: str, name: str = "softcap") -> LoadedRecord:
    module = types.ModuleType("stand_in_record")
    module.__dict__["BlockMask"] = KvBlocks
    exec(source, module.__dict__)  # noqa: S102 - a stand-in script written here
    return LoadedRecord(name, module, {}, ())


BUILDS_TWO = """
import torch
class GPT:
    def forward(self, inputs, targets, window):
        n = len(inputs) // 128
        counts = torch.full((1, 1, n), int(window), dtype=torch.int32)
        indices = torch.arange(n, dtype=torch.int32).expand(1, 1, n, n)
        long = BlockMask.from_kv_blocks(counts, indices, BLOCK_SIZE=128)
        short = BlockMask.from_kv_blocks(counts // 2, indices, BLOCK_SIZE=128)
        return self.embed(inputs)
"""


def test_the_masks_the_forward_builds_are_kept_in_order_and_the_model_is_never_reached():
    torch = pytest.importorskip("torch")
    loaded = _script(BUILDS_TWO)
    long, short = record_masks.record_block_masks(loaded, np.zeros(256, np.int32), 3)
    assert torch.equal(long.kv_num_blocks, torch.full((1, 1, 2), 3, dtype=torch.int32))
    assert torch.equal(short.kv_num_blocks, torch.full((1, 1, 2), 1, dtype=torch.int32))
    assert loaded.module.BlockMask is KvBlocks  # the recording binding is undone


def test_a_forward_without_masks_or_past_its_model_is_refused():
    pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="built no block mask"):
        record_masks.record_block_masks(_script("class GPT:\n    def forward(self, x, y, w):\n        return self.embed"), [0] * 128, 1)
    with pytest.raises(RuntimeError, match="ran to its end"):
        record_masks.record_block_masks(_script("class GPT:\n    def forward(self, x, y, w):\n        return 0"), [0] * 128, 1)
    with pytest.raises(ValueError, match="builds no block mask"):
        record_masks.record_block_masks(_script("", name="untie-embed"), [0] * 128, 1)


def test_the_layouts_are_whole_blocks_with_their_documents():
    found = record_masks.layouts()
    assert {len(tokens) // record_masks.BLOCK for tokens in found.values()} == {16, 24}
    assert all(len(tokens) % record_masks.BLOCK == 0 for tokens in found.values())
    assert not (found["no EOT"] == record_masks.EOT).any()
    assert np.flatnonzero(found["one document"] == record_masks.EOT).tolist() == [0]
    assert (found["many short documents"] == record_masks.EOT).sum() > 16  # several documents per block
    lines = record_masks.describe()
    assert lines[0] == "## Masks against the records' own builders" and any("#18 softcap" in line for line in lines)
