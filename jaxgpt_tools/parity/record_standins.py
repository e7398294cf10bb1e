"""What stands in for torch.distributed and FlexAttention when a record's script runs on the CPU
(jaxgpt_tools.parity.record_code binds these names before the script runs: `BOUND_NAMES` of
jaxgpt_tools.parity.record_changes)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


class _Done:
    """The handle of a finished collective."""

    def wait(self) -> bool:
        return True


class OneRank:
    """torch.distributed as the only rank of a group sees it: an all-reduce (SUM or AVG) leaves the
    tensor as it is, an all-gather copies it into the one slot. Bound as the scripts' `dist`."""

    class ReduceOp:
        SUM, AVG = "sum", "avg"

    @staticmethod
    def get_rank() -> int:
        return 0

    @staticmethod
    def get_world_size() -> int:
        return 1

    @staticmethod
    def all_reduce(tensor, op=None, async_op=False):
        return _Done() if async_op else None

    @staticmethod
    def all_gather(tensors, tensor, async_op=False):
        if len(tensors) != 1:
            raise ValueError(f"one rank gathers into one slot, got {len(tensors)}")
        tensors[0].copy_(tensor)
        return _Done() if async_op else None

    @staticmethod
    def all_gather_into_tensor(output, tensor, async_op=False):
        output.view(-1).copy_(tensor.view(-1))
        return _Done() if async_op else None


@dataclass(frozen=True)
class KvBlocks:
    """What a record's code hands FlexAttention's `BlockMask.from_kv_blocks`: per query block, the
    count and order of its partial key blocks (mask_mod applied) and of its full ones (none
    applied). Counts (1, 1, Q) int32, indices (1, 1, Q, K) int32; negative counts list nothing.
    Bound as the scripts' `BlockMask`."""

    kv_num_blocks: Any
    kv_indices: Any
    full_kv_num_blocks: Any = None
    full_kv_indices: Any = None
    block_size: int = 128
    mask_mod: Callable | None = None

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks, kv_indices, full_kv_num_blocks=None, full_kv_indices=None,
                       BLOCK_SIZE: int = 128, mask_mod: Callable | None = None) -> KvBlocks:  # noqa: N803 - FlexAttention's name
        return cls(kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, BLOCK_SIZE, mask_mod)

    def allowed(self, seq_len: int):
        """(T, T) bool, computed once per instance and length (the records hand every layer the
        same block mask): key k is attended from query q. A partial block's pairs pass the mask_mod,
        a full block's all pass; the two lists must not share a block (FlexAttention would
        visit it twice)."""
        cache = self.__dict__.setdefault("_allowed_by_length", {})  # frozen: the fields stay as the record built them
        if seq_len not in cache:
            cache[seq_len] = self._allowed(seq_len)
        return cache[seq_len]

    def _allowed(self, seq_len: int):
        import torch

        blocks = -(-seq_len // self.block_size)
        partial = _listed_blocks(self.kv_num_blocks, self.kv_indices, blocks)
        full = (torch.zeros_like(partial) if self.full_kv_num_blocks is None
                else _listed_blocks(self.full_kv_num_blocks, self.full_kv_indices, blocks))
        if (partial & full).any():
            raise ValueError("a key block is listed as both partial and full")
        q_idx, kv_idx = torch.arange(seq_len)[:, None], torch.arange(seq_len)[None, :]
        token = self.mask_mod(0, 0, q_idx, kv_idx) if self.mask_mod is not None else torch.ones(seq_len, seq_len, dtype=torch.bool)

        def tokens(block_mask):  # (Q, K) blocks -> (T, T) tokens
            return block_mask.repeat_interleave(self.block_size, 0).repeat_interleave(self.block_size, 1)[:seq_len, :seq_len]

        return (tokens(partial) & token) | tokens(full)


def _listed_blocks(counts, indices, blocks: int):
    """(Q, K) bool of the blocks a (1, 1, Q) count and (1, 1, Q, K) index list name: the first
    clamp(count, 0, K) indices of each row."""
    import torch

    counts = counts.reshape(-1).long().clamp(0, indices.shape[-1])
    order = indices.reshape(counts.numel(), -1).long()
    taken = torch.arange(order.shape[1])[None, :] < counts[:, None]
    dense = torch.zeros(counts.numel(), blocks, dtype=torch.bool)
    return dense.scatter_(1, order, taken)  # each row's indices are a permutation: no column twice


def dense_flex_attention(query, key, value, block_mask: KvBlocks, scale: float | None = None):
    """FlexAttention's output for (B, H, T, Dh) inputs and a record's block lists, computed as one
    masked softmax in the inputs' dtype (fp32 here); scale defaults to Dh^-0.5 as FlexAttention's.
    Bound as the scripts' `flex_attention`."""
    import torch

    allowed = block_mask.allowed(query.shape[-2])
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ value


def kernel_attention(query, key, value, allowed, scale: float):
    """FlexAttention's output as its kernel rounds bf16 inputs, for (B, H, T, Dh) inputs and a
    (T, T) bool `allowed`: scores accumulated in fp32, the unnormalised probabilities
    exp(s - row max) fed to the PV product in the value dtype with fp32 accumulation, the fp32
    accumulator divided by the fp32 row sum and rounded once to the query dtype (jaxgpt's dense
    backend computes the same; one key block per query row: the kernel's running-max rescaling
    across blocks is not reproduced)."""
    import torch

    scores = (query.float() @ key.float().transpose(-2, -1)) * scale
    scores = scores.masked_fill(~allowed, float("-inf"))
    unnormalised = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    weighted = unnormalised.to(value.dtype).float() @ value.float()
    return (weighted / unnormalised.sum(dim=-1, keepdim=True)).to(query.dtype)


def kernel_flex_attention(query, key, value, block_mask: KvBlocks, scale: float | None = None):
    """`kernel_attention` over the pairs a record's block lists allow; scale defaults to Dh^-0.5
    as FlexAttention's. Bound as the scripts' `flex_attention` in the bf16 column
    (record_code.load's precision "bf16")."""
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    return kernel_attention(query, key, value, block_mask.allowed(query.shape[-2]), scale)


@contextlib.contextmanager
def torchrun_env() -> Iterator[None]:
    """RANK=0, WORLD_SIZE=1, LOCAL_RANK=0 (what torchrun sets for one process; the records' Muon
    reads them), restored afterwards."""
    names = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(names)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
