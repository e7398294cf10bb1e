"""Muon for the hidden matrices, as the Sub3Min record runs it (RECORD.md section 5).

Momentum with Nesterov through two lerps, a quintic Newton-Schulz orthogonalisation in bf16
(batched over leading dims, so the (3, D, D) qkv_w gets three independent slices), a
sqrt(max(1, rows/cols)) shape scale, and the record's distribution scheme: parameters of equal
size are processed in chunks of `world_size`, each rank orthogonalises one parameter of a chunk,
and an all-gather of the flattened updates gives every rank every update.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import torch
import torch.distributed as dist
from torch import Tensor

# Quintic coefficients chosen (by the record's authors) to maximise the slope at zero.
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
# Added to the Frobenius norm (not to its square) before dividing.
NS_NORM_EPS = 1e-7


def _newton_schulz(G: Tensor, steps: int, dtype: torch.dtype, iteration: str = "poly") -> Tensor:
    a, b, c = NS_COEFFICIENTS
    X = G.to(dtype)
    # Iterate on the wide orientation so X @ X^T is the smaller Gram matrix.
    tall = G.size(-2) > G.size(-1)
    if tall:
        X = X.mT
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + NS_NORM_EPS)
    for _ in range(steps):
        gram = X @ X.mT
        if iteration == "chain":  # #8/#9: B = A X; X = a X + b B + (c A) B
            chained = gram @ X
            X = a * X + b * chained + c * gram @ chained
            continue
        poly = b * gram + c * gram @ gram
        X = a * X + poly @ X
    if tall:
        X = X.mT
    return X


@functools.cache
def _compiled_newton_schulz():
    # The record compiles NS; on the CPU eager is used (no Triton, and compile time would dominate).
    return torch.compile(_newton_schulz)


def zeropower_via_newtonschulz5(G: Tensor, steps: int, dtype: torch.dtype = torch.bfloat16,
                                iteration: str = "poly") -> Tensor:
    """Approximate orthogonalisation U S' V^T of G (S' roughly in 0.5..1.5), as the record's NS5.

    G: (..., rows, cols), any float dtype; each trailing matrix is normalised by its own
    Frobenius norm and iterated independently. `dtype` is the working dtype: bfloat16 as the
    record, float32 to measure how much of a difference is bf16 rounding.
    `iteration`: "poly" (the record's B = b A + (c A) A, X = a X + B X) or "chain" (#8/#9's
    B = A X, X = a X + b B + (c A) B; the same polynomial, rounded at other points).
    Returns a tensor of G's shape in `dtype`.
    """
    if G.ndim < 2:
        raise ValueError(f"Newton-Schulz needs at least a matrix, got shape {tuple(G.shape)}")
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    if dtype not in (torch.bfloat16, torch.float32):
        raise ValueError(f"Newton-Schulz dtype must be bfloat16 or float32, got {dtype}")
    if iteration not in ("poly", "chain"):
        raise ValueError(f"Newton-Schulz iteration must be 'poly' or 'chain', got {iteration!r}")
    fn = _compiled_newton_schulz() if G.is_cuda else _newton_schulz
    return fn(G, steps, dtype, iteration)


def update_scale(shape: torch.Size | tuple[int, ...]) -> float:
    """sqrt(max(1, rows/cols)) from the last two dims: 2 for (3072, 768), else 1 in the record."""
    return max(1.0, shape[-2] / shape[-1]) ** 0.5


class Muon(torch.optim.Optimizer):
    """MomentUm Orthogonalized by Newton-Schulz, the record's distributed variant.

    Every parameter must have ndim >= 2 and an fp32 (or any float) gradient that is already
    identical on all ranks (the training loop all-reduces before stepping). Each momentum buffer
    lives only on the rank that owns the parameter; all ranks end with identical parameters.
    With world_size == 1 no process group is needed.

    Group keys: lr, momentum, nesterov, ns_steps (LambdaLR scales lr; the loop sets momentum).
    `momentum_form` "sgd" is #8/#9's buf = m buf + g, u = g + m buf instead of the lerps;
    `ns_iteration` as zeropower_via_newtonschulz5's `iteration`.
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 0.02,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_steps: int = 5,
        rank: int = 0,
        world_size: int = 1,
        ns_dtype: torch.dtype = torch.bfloat16,
        momentum_form: str = "ema",
        ns_iteration: str = "poly",
    ) -> None:
        params = list(params)
        if not params:
            raise ValueError("Muon got an empty parameter list")
        for p in params:
            if not isinstance(p, Tensor) or p.ndim < 2:
                shape = tuple(p.shape) if isinstance(p, Tensor) else type(p).__name__
                raise ValueError(f"Muon only takes matrices (ndim >= 2), got {shape}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"invalid rank {rank} for world_size {world_size}")
        if world_size > 1 and not dist.is_initialized():
            raise RuntimeError(f"Muon with world_size {world_size} needs an initialised torch.distributed group")
        if momentum_form not in ("ema", "sgd"):
            raise ValueError(f"momentum_form must be 'ema' or 'sgd', got {momentum_form!r}")
        self.rank = rank
        self.world_size = world_size
        self.ns_dtype = ns_dtype
        self.momentum_form = momentum_form
        self.ns_iteration = ns_iteration
        defaults = dict(lr=lr, momentum=momentum, nesterov=nesterov, ns_steps=ns_steps)
        # One group per element count, so one gather buffer shape serves a whole group.
        sizes = sorted({p.numel() for p in params}, reverse=True)
        groups = [dict(params=[p for p in params if p.numel() == size]) for size in sizes]
        super().__init__(groups, defaults)

    def _orthogonalized_update(self, p: Tensor, group: dict) -> Tensor:
        """Momentum + Nesterov + NS for one owned parameter; returns the flat ns_dtype update."""
        if p.grad is None:
            raise RuntimeError(f"Muon parameter of shape {tuple(p.shape)} has no gradient")
        grad = p.grad
        momentum = group["momentum"]
        state = self.state[p]
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(grad)
        buf = state["momentum_buffer"]
        if self.momentum_form == "sgd":  # #8/#9: plain SGD momentum, Nesterov as g + m * buf
            buf.mul_(momentum).add_(grad)
            direction = grad.add(buf, alpha=momentum) if group["nesterov"] else buf
        else:
            buf.lerp_(grad, 1 - momentum)  # buf = m*buf + (1-m)*grad
            # Nesterov: look ahead from grad toward the new buffer (torch.lerp numerics, as the record).
            direction = grad.lerp(buf, momentum) if group["nesterov"] else buf
        return zeropower_via_newtonschulz5(direction, group["ns_steps"], self.ns_dtype, self.ns_iteration).flatten()

    @torch.no_grad()
    def step(self) -> None:  # type: ignore[override]  # no closure: the record's Muon takes none
        for group in self.param_groups:
            params: list[Tensor] = group["params"]
            lr = group["lr"]
            if self.world_size == 1:
                for p in params:
                    update = self._orthogonalized_update(p, group)
                    p.add_(update.view_as(p), alpha=-lr * update_scale(p.shape))
                continue
            self._distributed_group_step(group, params, lr)

    def _distributed_group_step(self, group: dict, params: list[Tensor], lr: float) -> None:
        numel = params[0].numel()
        # Flat (world_size * numel) buffer: gloo accepts only a flat output; NCCL takes either.
        gathered = torch.empty(self.world_size * numel, dtype=self.ns_dtype, device=params[0].device)
        pending: tuple[dist.Work, list[Tensor]] | None = None
        for start in range(0, len(params), self.world_size):
            chunk = params[start : start + self.world_size]
            if self.rank < len(chunk):
                mine = self._orthogonalized_update(chunk[self.rank], group)
            else:  # this rank has no parameter in the last chunk: gather a placeholder
                mine = torch.zeros(numel, dtype=self.ns_dtype, device=params[0].device)
            # Apply the previous chunk only now, so its gather overlapped with this NS.
            _apply_gathered(pending, gathered, lr)
            handle = _all_gather_flat(gathered, mine)
            pending = (handle, chunk)
        _apply_gathered(pending, gathered, lr)


def _all_gather_flat(output: Tensor, local: Tensor) -> dist.Work:
    """Asynchronous all-gather of equal-size 1-D tensors into `output` (rank r at slot r)."""
    # Newer torch renamed all_gather_into_tensor (now a deprecated alias); keep both working.
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return gather(output, local, async_op=True)


def _apply_gathered(pending: tuple[dist.Work, list[Tensor]] | None, gathered: Tensor, lr: float) -> None:
    """Wait for a chunk's gather; slot i of the flat `gathered` buffer updates chunk[i]."""
    if pending is None:
        return
    handle, chunk = pending
    handle.wait()
    slots = gathered.view(-1, chunk[0].numel())
    for p, update in zip(chunk, slots, strict=False):  # the last chunk may be shorter: placeholder slots
        p.add_(update.view_as(p), alpha=-lr * update_scale(p.shape))
